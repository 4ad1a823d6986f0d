"""The schema of ``evalcli schema`` and the validator agree on types (docs/datasets.md, "Types, and a value that is
wholly one variable"): every key is of its type as written, except a value wholly one ``${VAR}`` (quoted or not), which a
key wanting a number or true/false reads as YAML reads the variable's value written in its place.

The invariant (``test_the_schema_accepts_exactly_what_the_validator_accepts``): for a dataset text and an environment,
the validator accepts exactly when the schema accepts the document as written (what an editor sees) and the
document with each variable's value written in its place (what the loader reads). What the schema cannot say, and
so is not generated:

- quoting: JSON has no quotes, and neither does the rule: ``concurrency: '${C}'`` is read as ``concurrency: ${C}``
  (inside ``{...}`` a variable must be quoted), so the document as read writes the value unquoted;
- rules across keys (a threshold's ``min`` above its ``max``, a label naming a scorer the dataset lacks, ``calibrated``
  on a judge only): the generated documents keep them;
- ``${...}`` inside ``{...}`` or ``[...]`` (YAML reads the braces): typed keys are written in block style;
- a variable that is unset and has no default (an error whatever the key): every variable is set or has a default.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.dataset.fields import WHOLE_INTERPOLATION
from evalcli.dataset.load import load_dataset
from evalcli.dataset.scaffold import dataset_schema
from evalcli.errors import DatasetError
from tests.conftest import CliResult

TYPED = {"integer", "number", "boolean"}


def _options(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for option in prop.get("anyOf", [prop]) for o in (_options(option) if "anyOf" in option else [option])]


def _typed_keys(part: dict[str, Any], where: str) -> list[tuple[str, list[dict[str, Any]]]]:
    found = []
    for key, prop in part.get("properties", {}).items():
        found.append((f"{where}.{key}", _options(prop)))
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict):
            found.append((f"{where}.{key}.*", _options(extra)))
    return found


def _parts(node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every object schema in ``node`` (the dataset models', the scorer kinds' and the target forms'), by where."""
    found = []
    if isinstance(node, dict):
        if "properties" in node:
            found.append((where, node))
        for key, value in node.items():
            found += _parts(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _parts(value, f"{where}/{index}")
    return found


def test_every_typed_key_also_takes_exactly_a_whole_interpolation() -> None:
    schema = dataset_schema()
    checked = []
    for where, part in _parts(schema, ""):
        for key, options in [*_typed_keys(part, where), *(((where, _options(part)),) if "anyOf" in part else ())]:
            texts = [o for o in options if o.get("type") == "string"]
            whole = [o for o in texts if o.get("pattern") == WHOLE_INTERPOLATION]
            if not {o.get("type") for o in options} & TYPED:
                assert not whole, key  # only a key that wants a number or true/false reads ${VAR} so
                continue
            free = [o for o in texts if o not in whole and "enum" not in o and "pattern" not in o]
            if free:  # it takes any text too (an id: text or a number): ${VAR} is text there
                continue
            checked.append(key)
            assert whole, key
    names = {key.rsplit("/", 1)[-1].split(".", 1)[-1] for key in checked}
    assert {"concurrency", "target_has_memory", "turns", "max_turns", "labels.*", "delay", "min_labels", "ignore_case",
            "timeout", "temperature"} <= names, names


AGENT = "def agent(input, **kw):\n    return 'ok'\n"
WRITTEN = st.sampled_from(["4", "1", "0", "-1", "3.5", "0.5", "1e3", "true", "false", "yes", "no", "null", "'4'",
                           "'0.5'", "'true'", "'yes'", "'no'", "abc", "''", "20000", "60", ".inf"])
"""A typed key's value as written (plain or quoted)."""
ENV = st.sampled_from(["4", "2", "0", "-3", "0.5", "2.5", "true", "no", "yes", "abc", "", "null", "99999", "1e3"])
"""A variable's value."""


@st.composite
def value(draw: st.DrawFn, name: str) -> tuple[str, dict[str, str]]:
    """(the text written for a typed key, the environment it needs)."""
    how = draw(st.sampled_from(["written", "whole", "whole-default", "quoted", "partial"]))
    if how == "written":
        return draw(WRITTEN), {}
    env = {name: draw(ENV)} if how != "whole-default" else {}
    default = draw(st.sampled_from([":-", ":-3", ":-0.5", ":-true", ":-x"])) if how != "whole" else ""
    text = f"${{{name}{default}}}"
    return {"quoted": f"'{text}'", "partial": f"n{text}"}.get(how, text), env


KEYS = ("concurrency", "has_memory", "turns", "cost", "seconds", "max_turns", "label", "delay", "threshold", "kappa",
        "min_labels", "ignore_case")


@st.composite
def dataset(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A dataset whose typed keys (some of them, block style) hold generated values; every other rule kept."""
    chosen = draw(st.sets(st.sampled_from(KEYS), min_size=1, max_size=4))
    env: dict[str, str] = {}
    v: dict[str, str] = {}
    for key in chosen:
        v[key], more = draw(value(key.upper()))
        env.update(more)

    def line(key: str, indent: str, name: str | None = None) -> str:
        return f"{indent}{name or key}: {v[key]}\n" if key in v else ""

    limits = "".join(line(k, "  ") for k in ("turns", "cost", "seconds"))
    text = ("target: agent:agent\n" + line("concurrency", "") + line("has_memory", "", "target_has_memory")
            + (f"limits:\n{limits}" if limits else "")
            + "gates:\n  - scorer:\n      judge:\n        criterion: polite\n        model: openai/gpt-4o-mini\n"
            + "    id: polite\n" + ("    calibrated:\n" + line("kappa", "      ", "min_kappa")
                                    + line("min_labels", "      ") if {"kappa", "min_labels"} & set(v) else "")
            + "scorers:\n  - scorer:\n      includes:\n        value: ok\n" + line("ignore_case", "        ")
            + "    id: said\n" + line("threshold", "    ")
            + "tools:\n  lookup:\n    returns: 1\n" + line("delay", "    ")
            + "data:\n  - input: hi\n" + ("    labels:\n" + line("label", "      ", "said") if "label" in v else "")
            + "  - simulate:\n      goal: g\n" + line("max_turns", "      "))
    return text, env


def substituted(text: str, env: dict[str, str]) -> str:
    """The text with each variable's value written in its place (its default when it is unset or empty)."""
    import re
    value = lambda m: env.get(m.group(1)) or (m.group(2) if m.group(2) is not None else "")  # noqa: E731
    text = re.sub(r"'\$\{([A-Z_]+)(?::-([^}]*))?\}'$", value, text, flags=re.M)  # a whole one, quoted: its value
    return re.sub(r"\$\{([A-Z_]+)(?::-([^}]*))?\}", value, text)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agreement")
    (path / "agent.py").write_text(AGENT)
    return path


def validator_accepts(folder: Path, text: str, env: dict[str, str]) -> bool:
    file = folder / "d.yaml"
    file.write_text(text)
    saved = {name: os.environ.get(name) for name in KEYS_ENV}
    os.environ.update(env)
    for name in set(KEYS_ENV) - set(env):
        os.environ.pop(name, None)
    try:
        load_dataset(file)
        return True
    except DatasetError:
        return False
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


KEYS_ENV = [key.upper() for key in KEYS]


@settings(max_examples=int(os.environ.get("EVALCLI_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dataset())
def test_the_schema_accepts_exactly_what_the_validator_accepts(folder: Path, case: tuple[str, dict[str, str]]) -> None:
    text, env = case
    schema = jsonschema.Draft202012Validator(SCHEMA)
    as_written, as_read = yaml.safe_load(text), yaml.safe_load(substituted(text, env))
    by_schema = schema.is_valid(as_written) and schema.is_valid(as_read)
    assert validator_accepts(folder, text, env) == by_schema, (text, env, [e.message for e in schema.iter_errors(as_read)])


SCHEMA = dataset_schema()


def test_the_base_document_is_valid(folder: Path) -> None:
    """The generation's fixed parts break no rule: with every typed key well written, the validator accepts."""
    text = ("target: agent:agent\nconcurrency: ${C:-4}\ngates:\n  - scorer:\n      judge:\n        criterion: polite\n"
            "        model: openai/gpt-4o-mini\n    id: polite\n    calibrated:\n      min_labels: ${N:-3}\n"
            "scorers:\n  - scorer:\n      includes: ok\n    id: said\n    threshold: ${T:-0.5}\n"
            "tools:\n  lookup:\n    returns: 1\n    delay: ${D:-0.5}\ndata:\n  - input: hi\n    labels:\n"
            "      said: ${L:-pass}\n  - simulate:\n      goal: g\n      max_turns: ${M:-3}\n")
    assert validator_accepts(folder, text, {})
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(yaml.safe_load(text))


TEXT_FOR_NUMBER = {
    "concurrency quoted": ("concurrency: '4'\n", 2),
    "limits.turns quoted": ("limits:\n  turns: '3'\n", 3),
    "target_has_memory quoted": ("target_has_memory: 'true'\n", 2),
    "concurrency a partial interpolation": ("concurrency: 1${C:-4}\n", 2),
    "concurrency an interpolation that is not a number": ("concurrency: ${C:-four}\n", 2),
}


@pytest.mark.parametrize("name", list(TEXT_FOR_NUMBER))
def test_text_where_a_number_is_wanted_is_refused_on_its_line(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult], name: str) -> None:
    written, line = TEXT_FOR_NUMBER[name]
    write("d.yaml", "target: agents:echo\n" + written + "scorers: [{includes: x}]\ndata: [{input: q}]\n")
    done = cli("validate", "d.yaml")
    assert done.code == 2, done.stdout + done.stderr
    assert f"d.yaml:{line}:" in done.stderr and "hint:" in done.stderr and "Traceback" not in done.stderr, done.stderr


PEAK_AGENT = '''
import asyncio, pathlib
state = {"now": 0, "peak": 0}

async def agent(input, **kw):
    state["now"] += 1
    state["peak"] = max(state["peak"], state["now"])
    await asyncio.sleep(0.5)
    state["now"] -= 1
    pathlib.Path("peak.txt").write_text(str(state["peak"]))
    return "ok"
'''


@pytest.mark.timing
@pytest.mark.parametrize(("env", "peak"), [({}, 2), ({"CONC": "3"}, 3)])
def test_a_whole_interpolation_is_the_number_the_run_uses(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                           env: dict[str, str], peak: int) -> None:
    write("peak.py", PEAK_AGENT)
    write("d.yaml", "target: peak:agent\nconcurrency: ${CONC:-2}\nscorers: [{includes: ok}]\ndata:\n"
          + "".join(f"  - input: q{i}\n" for i in range(8)))
    assert cli("validate", "d.yaml", env=env).code == 0
    done = cli("run", "d.yaml", "--no-cache", env=env)
    assert done.code == 0, done.stdout + done.stderr
    assert (done.cwd / "peak.txt").read_text() == str(peak)


def test_max_turns_may_be_wholly_an_interpolation(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\nscorers: [{includes: x}]\ndata:\n  - simulate:\n      goal: g\n"
                    "      max_turns: ${T:-3}\n")
    done = cli("validate", "d.yaml")
    assert done.code == 0, done.stdout + done.stderr
    loaded = load_dataset(done.cwd / "d.yaml")
    assert loaded.items[0].simulation is not None and loaded.items[0].simulation.max_turns == 3
