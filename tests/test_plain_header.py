"""A dataset's top level in the common shape is read without the models (``evalcli/dataset/header.py``,
docs/performance.md "Before the first turn"): on any top level, plain or not, ``load._top_level`` gives the same
values (and their types) as
``DatasetFile``, the same wrong keys and the same problems as the model's
path, and loading the whole dataset gives the same dataset or the same problems. Loading a plain dataset imports
none of the dataset file's models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalcli.dataset import header as header_module
from evalcli.dataset import load as load_module
from evalcli.dataset.files import DatasetFile
from evalcli.dataset.reading import read_top
from evalcli.errors import DatasetError, Problem
from tests.conftest import REPO
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

texts = st.one_of(st.sampled_from(["agents:echo", "", " ", "x", "${HEADER_VAR}", "${HEADER_NUM}", "${HEADER_NONE:-}",
                                   "error", "score", "live", "HEADER_VAR"]), st.text(max_size=5))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([4, 10_000, 10_001, 10**20]),
                    st.floats(allow_nan=False, allow_infinity=False), texts)
odd = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(texts, scalars, max_size=2),
                st.dictionaries(st.integers(0, 2), scalars, min_size=1, max_size=1))
VALUES: dict[str, Any] = {
    "target": st.one_of(texts, st.dictionaries(texts, odd, max_size=2)),
    "target_options": st.dictionaries(texts, odd, max_size=3),
    "target_has_memory": st.one_of(st.none(), st.booleans()),
    "concurrency": st.one_of(st.integers(0, 12), st.sampled_from([10_000, 10_001])),
    "gates": st.one_of(st.none(), st.lists(st.one_of(texts, st.just({"includes": "x"})), max_size=2)),
    "scorers": st.one_of(st.none(), st.lists(st.one_of(texts, st.just({"includes": "x"})), max_size=2)),
    "data_file": st.one_of(st.none(), texts), "description": st.one_of(st.none(), texts),
    "on_limit": st.one_of(st.none(), st.sampled_from(["error", "score", "stop"])),
    "secrets": st.one_of(st.none(), st.lists(texts, max_size=2)),
    "tools": st.one_of(st.none(), st.just({"get_weather": {"returns": 1}}), st.just({"replay": ""})),
    "unmocked": st.one_of(st.none(), st.sampled_from(["live", "error", "maybe"])),
    "limits": st.one_of(st.none(), st.just({"turns": 2}), st.just({"turns": 0}), st.just({"on": 1})),
}


@st.composite
def header(draw: st.DrawFn) -> dict[Any, Any]:
    value: dict[Any, Any] = {}
    for key, values in VALUES.items():
        if draw(st.integers(0, 2)) == 0:
            value[key] = draw(values) if draw(st.integers(0, 5)) else draw(odd)
    if not draw(st.integers(0, 6)):
        value[draw(st.sampled_from(["scorer", "dat", "input", "tags", 3]))] = draw(odd)
    return value


def _top(data: Any, pos: Any, models_only: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What ``_top_level`` gives: each field's value and type, the wrong keys, the problems."""
    with monkeypatch.context() as patch:
        if models_only:
            patch.setattr(load_module, "plain_header", lambda given: None)
        problems: list[Problem] = []
        top, bad = load_module._top_level(dict(data), pos, problems)
    fields = {name: (getattr(top, name), type(getattr(top, name))) for name in DatasetFile.model_fields}
    return fields, bad, [(p.where, p.message, p.hint) for p in problems]


def _load(path: Path, models_only: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        if models_only:
            patch.setattr(load_module, "plain_header", lambda given: None)
        try:
            dataset = load_module.load_dataset(path, str(path.parent / "scorers.yaml"))
        except DatasetError as exc:
            return [(p.where, p.message, p.hint) for p in exc.problems]
    return (dataset.target_spec, dataset.target_options, dataset.concurrency, dataset.gates, dataset.scorers,
            dataset.items, dataset.hash, dataset.tools, dataset.unmocked, dataset.limits, dataset.warnings,
            dataset.target_has_memory, sorted(dataset.secret_values))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header(), st.booleans())
@example({"target": "agents:echo", "target_options": {"latency": 0.05}, "concurrency": 64, "gates": ["has-answer"],
          "scorers": [{"scorer": "has-answer", "threshold": 1}]}, True)
@example({"target": "agents:echo", "concurrency": "${HEADER_NUM}", "target_has_memory": "${HEADER_BOOL}",
          "description": "${HEADER_VAR}", "scorers": ["has-answer"]}, False)
@example({"target": {"http": {"url": "http://127.0.0.1:9"}}, "concurrency": True, "scorers": None,
          "on_limit": "score", "secrets": ["HEADER_VAR"]}, True)
def test_a_plain_header_reads_as_the_model_reads_it(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                     head: dict[Any, Any], jsonl: bool) -> None:
    monkeypatch.setenv("HEADER_VAR", "sk-header0123456789abcdef")
    monkeypatch.setenv("HEADER_NUM", "7")
    monkeypatch.setenv("HEADER_BOOL", "yes")
    (workdir / "scorers.yaml").write_text("scorers:\n  has-answer:\n    includes: a\n")
    items = [{"id": "a", "input": "q"}, {"id": "b", "turns": [{"input": "q", "gates": ["has-answer"]}]}]
    if jsonl:
        if not all(isinstance(key, str) for key in head):
            return  # JSON has text keys only
        path = workdir / "d.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in [{"target": "agents:echo", **head}, *items]) + "\n")
    else:
        path = workdir / "d.yaml"
        path.write_text(yaml.safe_dump({**head, "data": items}, allow_unicode=True, sort_keys=False))
    try:
        data, pos, _, _ = read_top(path)
    except DatasetError:
        return  # not a dataset's top level at all (e.g. no header line): _top_level is never reached
    assert _top(data, pos, False, monkeypatch) == _top(data, pos, True, monkeypatch)
    assert _load(path, False, monkeypatch) == _load(path, True, monkeypatch)


def test_the_benchmark_header_takes_the_plain_path(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The common header is read without the model (else this whole path would be untested)."""
    taken: list[bool] = []
    plain_header = load_module.plain_header

    def spy(given: dict[str, Any]) -> Any:
        made = plain_header(given)
        taken.append(made is not None)
        return made

    monkeypatch.setattr(load_module, "plain_header", spy)
    (workdir / "scorers.yaml").write_text("scorers:\n  has-answer:\n    includes: a\n")
    head = {"target": "agents:echo", "target_options": {"latency": 0.05}, "concurrency": 64, "gates": ["has-answer"],
            "scorers": [{"scorer": "has-answer", "threshold": 1}]}
    (workdir / "d.jsonl").write_text(json.dumps(head) + "\n" + json.dumps({"id": "a", "input": "q"}) + "\n")
    assert load_module.load_dataset(workdir / "d.jsonl", str(workdir / "scorers.yaml")).concurrency == 64
    assert taken == [True]
    assert header_module.plain_header({**head, "limits": {"turns": 2}}) is None


def test_the_plain_header_has_the_models_keys_and_defaults() -> None:
    assert list(header_module.PLAIN_KEYS) == list(DatasetFile.model_fields)
    made, model = header_module.Header({}), DatasetFile()
    assert {name: getattr(made, name) for name in DatasetFile.model_fields} == model.model_dump()
    assert header_module.Header({}).target_options is not made.target_options  # a fresh mapping each, as the model's


# Whether a dataset file's models were imported when a plain dataset was loaded; then `evalcli schema` (which imports
# them).
IMPORTED = """
import json, sys
from evalcli.dataset import load_dataset
dataset = load_dataset(sys.argv[1])
print("IMPORTED " + json.dumps([name in sys.modules for name in ("evalcli.dataset.files", "evalcli.dataset.fields")]))
from evalcli.dataset.scaffold import dataset_schema
print("SCHEMA " + json.dumps(dataset_schema()))
"""


def test_a_plain_dataset_imports_no_model_of_the_file(workdir: Path) -> None:
    (workdir / "d.jsonl").write_text('{"target": "agents:echo", "concurrency": 8, "gates": [{"includes": "q"}]}\n'
                                     '{"id": "a", "input": "q"}\n{"inputs": ["q", "r"]}\n')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", IMPORTED, "d.jsonl"], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, schema = done.stdout.split("SCHEMA ", 1)
    assert json.loads(imported.removeprefix("IMPORTED ")) == [False, False]
    assert json.loads(schema)["title"] == "evalcli dataset"
