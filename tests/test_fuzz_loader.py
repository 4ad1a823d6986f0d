"""Fuzzing the dataset loader: random text, YAML-shaped noise, and random mutations of a valid dataset
(as text and as data) either load or raise ``DatasetError`` located in the file, never anything else.
Huge inputs (a 50 MB string, deep nesting, alias bombs) fail fast with a clear error, also in the CLI."""

from __future__ import annotations

import copy
import itertools
import math
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.dataset import Dataset, load_dataset, load_registry
from evalcli.errors import DatasetError
from tests.reliability_helpers import run_cli

VALID = """\
target: fuzz_target_agent:generate
target_options:
  memory: {resource: user-1}
concurrency: 2
gates:
  - called_tool: get_weather
scorers:
  - includes: Brooklyn
  - scorer: mentions
    threshold: 0.5
  - scorer: {similarity: {expected: sunny, ignore_case: true}}
    threshold: {min: 0.1, max: 0.9}
    id: sim
data:
  - id: one
    tags: [smoke]
    input: What is the weather in Brooklyn?
    ground_truth: {city: Brooklyn}
  - inputs: [My city is Brooklyn., 'What is the weather there?']
  - turns:
      - input: Weather in Brooklyn?
        gates: [{called_tool: get_weather}]
      - input: And tomorrow?
        scorers:
          - scorer: {matches: {pattern: 'rain|sun', exact: false}}
            threshold: 1
"""
REGISTRY = """\
scorers:
  mentions:
    includes: Brooklyn
  judge:
    multi_turn_judge: {model: openai/x, criterion: Gave a forecast.}
"""
AGENT = "def generate(input, **options):\n    return 'sunny in Brooklyn'\n"

# EVALCLI_FUZZ_EXAMPLES=5000 for a deeper search than the suite's quick one
FUZZ = settings(max_examples=int(os.environ.get("EVALCLI_FUZZ_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz")
    (path / "fuzz_target_agent.py").write_text(AGENT)
    (path / "scorers.yaml").write_text(REGISTRY)
    return path


def load_or_dataset_error(path: Path) -> Dataset | DatasetError:
    """The loader's answer; anything but a Dataset or a DatasetError fails the test."""
    try:
        return load_dataset(path)
    except DatasetError as exc:
        assert exc.problems, "a DatasetError with no problem in it"
        for problem in exc.problems:
            assert problem.where.startswith(str(path)) or problem.where.startswith(str(path.parent)), problem
            assert problem.message.strip()
        return exc


def check_text(folder: Path, text: str | bytes) -> Dataset | DatasetError:
    path = folder / "fuzzed.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return load_or_dataset_error(path)


def test_the_valid_dataset_loads(folder: Path) -> None:
    result = check_text(folder, VALID)
    assert isinstance(result, Dataset) and len(result.items) == 3


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400)
YAML_TOKENS = ["target:", " fuzz_target_agent:generate", "data:", "scorers:", "gates:", "input:", "inputs:", "turns:",
               "threshold:", "id:", "tags:", "concurrency:", "target_options:", "data_file:", "- ", "  ", "    ", "\n",
               ":", "{", "}", "[", "]", ",", "'", '"', "|", ">", "#", "---", "...", "%YAML 1.1", "&a ", "*a",
               "<<: *a", "? ", "!!binary ", "!!python/object:os.system ", "!!str ", "!!float ", "${HOME}",
               "${UNSET_FUZZ_VAR}", "${X:-d}", "includes", "called_tool", "judge", "mentions", "0.5", "-1", "2",
               "1e999", ".nan", "-.inf", "null", "~", "true", "yes", "0x1F", "2024-01-01", "\t", "\r\n", "\ufeff",
               "\x00", "\x85", "é", "\u202e"]
YAMLISH = st.lists(st.sampled_from(YAML_TOKENS) | st.text(max_size=5), max_size=60).map("".join)


@FUZZ
@given(text=TEXT | YAMLISH)
def test_random_text_loads_or_is_a_dataset_error(folder: Path, text: str) -> None:
    check_text(folder, text)


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_load_or_are_a_dataset_error(folder: Path, data: bytes) -> None:
    check_text(folder, data)


@st.composite
def mutated_text(draw: st.DrawFn) -> str:
    """The valid dataset with a few random edits: deletions, insertions, line shuffles, retyped values."""
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "dup-line", "drop-line", "swap-lines", "indent", "token"]))
        lines = text.split("\n")
        if kind == "delete" and text:
            start = draw(st.integers(0, len(text) - 1))
            text = text[:start] + text[start + draw(st.integers(1, 20)):]
        elif kind == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(YAML_TOKENS) | TEXT.filter(lambda t: len(t) < 10)) + text[at:]
        elif kind in ("dup-line", "drop-line", "indent") and lines:
            n = draw(st.integers(0, len(lines) - 1))
            if kind == "dup-line":
                lines.insert(n, lines[n])
            elif kind == "drop-line":
                del lines[n]
            else:
                lines[n] = draw(st.sampled_from(["", " ", "  ", "\t"])) + lines[n]
            text = "\n".join(lines)
        elif kind == "swap-lines" and len(lines) > 1:
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        elif kind == "token":
            words = re.findall(r"[A-Za-z_]+|\d+(?:\.\d+)?", text)
            old = draw(st.sampled_from(words))
            text = text.replace(old, draw(st.sampled_from(YAML_TOKENS)), 1)
    return text


@FUZZ
@given(text=mutated_text())
def test_text_mutations_of_a_valid_dataset_load_or_are_a_dataset_error(folder: Path, text: str) -> None:
    check_text(folder, text)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20) | st.sampled_from(["includes", "called_tool", "mentions", "judge", "get_weather", "", "-"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["input", "inputs", "turns", "scorer", "threshold", "id", "min", "max", "includes",
                         "gates", "scorers", "tags", "value", "judge", "python", "x"]) | st.text(max_size=8),
        children, max_size=4),
    max_leaves=12)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*path, index))
    return found


@st.composite
def mutated_data(draw: st.DrawFn) -> Any:
    """The valid dataset as data, with values replaced, keys removed or added at random places."""
    data = copy.deepcopy(yaml.safe_load(VALID))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)[1:]))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
        else:
            parent.append(draw(VALUES))
    return data


@FUZZ
@given(data=mutated_data())
def test_data_mutations_of_a_valid_dataset_load_or_are_a_dataset_error(folder: Path, data: Any) -> None:
    check_text(folder, yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


@FUZZ
@given(text=st.sampled_from([REGISTRY]).flatmap(
    lambda base: st.lists(st.sampled_from(YAML_TOKENS), max_size=8).map(lambda ts: base + "".join(ts))) | YAMLISH)
def test_registry_mutations_load_or_are_a_dataset_error(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzzed-scorers.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_registry(str(path))
    except DatasetError as exc:
        assert all(p.where.startswith(str(path)) for p in exc.problems), exc.problems


# -- huge inputs -------------------------------------------------------------------------------------

HEAD = "target: fuzz_target_agent:generate\nscorers: [{includes: x}]\ndata:\n  - input: "


def laughs(levels: int = 10) -> str:
    names = [f"l{n}" for n in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]" for prev, name in itertools.pairwise(names)]
    return "\n".join(lines) + "\n" + HEAD + "x\n"


HUGE = {
    "fifty-mb-string": (lambda: HEAD + "a" * (50 * 2**20) + "\n", r"file is 50 MB; the limit is 16 MB"),
    "deep-flow-nesting": (lambda: HEAD + "[" * 50_000 + "]" * 50_000 + "\n", r"nested too deeply"),
    "deep-block-nesting": (lambda: HEAD + "x\n    ground_truth:\n" + "".join(
        " " * (2 * n + 6) + "k:\n" for n in range(3000)), r"nested (too deeply|deeper than)"),
    "billion-laughs": (laughs, r"too many values \(a YAML alias bomb\?\)"),
    "alias-to-huge-string": (lambda: "s: &s " + "b" * 2**20 + "\n" + "big: [" + ", ".join(["*s"] * 20_000) + "]\n"
                             + HEAD + "x\n", r"expands to too much text through aliases"),
}


@pytest.mark.parametrize("name", list(HUGE))
@pytest.mark.timing
def test_huge_inputs_fail_fast_with_a_clear_located_error(folder: Path, name: str) -> None:
    make, message = HUGE[name]
    path = folder / f"{name}.yaml"
    path.write_text(make(), encoding="utf-8")
    started = time.monotonic()
    result = load_or_dataset_error(path)
    assert time.monotonic() - started < 5, f"{name} took too long to be rejected"
    assert isinstance(result, DatasetError) and re.search(message, str(result)), str(result)[:300]
    if name != "fifty-mb-string":  # a size error is about the whole file; the others point at a line
        assert re.match(rf"{re.escape(str(path))}:\d+:\d+: ", str(result)), str(result)[:200]


@pytest.mark.timing
def test_the_cli_rejects_broken_and_huge_files_with_exit_2_and_file_line(folder: Path) -> None:
    broken = {
        "tab.yaml": VALID.replace("  - id: one", "\t- id: one"),
        "unclosed.yaml": VALID.replace("[smoke]", "[smoke"),
        "typo.yaml": VALID.replace("ground_truth", "grund_truth"),
        "threshold.yaml": VALID.replace("threshold: 0.5", "threshold: 1.5"),
        "laughs.yaml": laughs(),
        "deep.yaml": HUGE["deep-flow-nesting"][0](),
        "bytes.yaml": "target: x\n\udcff",
    }
    for name, text in broken.items():
        (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (folder / "big.yaml").write_text(HUGE["fifty-mb-string"][0]())
    names = [*broken, "big.yaml"]
    started = time.monotonic()
    done = run_cli(["run", *names, "--db", "never.db"], folder)
    assert time.monotonic() - started < 15
    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    for name in broken:
        assert re.search(rf"^error: {re.escape(name)}:\d+:\d+: |^{re.escape(name)}:\d+:\d+: ", done.stderr,
                         re.MULTILINE), (name, done.stderr)
    assert "big.yaml: file is 50 MB" in done.stderr
    assert not (folder / "never.db").exists(), "nothing may run (or be stored) when a dataset is invalid"


def test_non_finite_and_out_of_range_thresholds_are_errors(folder: Path) -> None:
    for bad in (".nan", ".inf", "-0.1", "1.0000001", "{}", "{min: 0.9, max: 0.1}", "'half'"):
        result = check_text(folder, VALID.replace("threshold: 0.5", f"threshold: {bad}"))
        assert isinstance(result, DatasetError), bad
        assert math.isfinite(0) and ":" in result.problems[0].where
