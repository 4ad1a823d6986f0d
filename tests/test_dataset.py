"""Dataset validation (docs/datasets.md): every error names FILE:LINE:COL, says what to write, exits 2, writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.dataset import load_dataset
from evalcli.errors import DatasetError
from tests.conftest import CliResult

HEAD = "target: agents:echo\nscorers: [{includes: x}]\n"


def problems_of(path: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    return str(caught.value)


CASES = [
    # (name, yaml text, expected location, expected message fragment)
    ("empty data", HEAD + "data: []\n", "3:7", "'data' is empty"),
    ("no input", HEAD + "data:\n  - id: a\n    tags: [x]\n", "4:5", "must have 'input', 'inputs', or 'turns'"),
    ("empty inputs", HEAD + "data:\n  - inputs: []\n", "4:13", "'inputs' must be a non-empty array"),
    ("inputs not a list", HEAD + "data:\n  - inputs: hello\n", "4:13", "'inputs' must be a non-empty array"),
    ("turns with input", HEAD + "data:\n  - input: a\n    turns: [{input: b}]\n", "5:5",
     "'turns' cannot be combined with 'input' or 'inputs'"),
    ("input with inputs", HEAD + "data:\n  - input: a\n    inputs: [b]\n", "5:5", "'input' cannot be combined with 'inputs'"),
    ("empty turns", HEAD + "data:\n  - turns: []\n", "4:12", "'turns' must be a non-empty array"),
    ("turn without input", HEAD + "data:\n  - turns:\n      - scorers: [{includes: x}]\n", "5:9",
     "turn 0 must be an object with an 'input' property"),
    ("threshold above 1", "target: agents:echo\nscorers:\n  - scorer: {includes: x}\n    threshold: 1.5\ndata: [{input: a}]\n",
     "4:16", 'Minimum threshold for scorer "includes(x)" must be a finite number between 0 and 1, got 1.5'),
    ("negative threshold", "target: agents:echo\nscorers:\n  - {scorer: {includes: x}, threshold: -0.1}\ndata: [{input: a}]\n",
     "3:40", "between 0 and 1, got -0.1"),
    ("empty threshold", "target: agents:echo\nscorers:\n  - {scorer: {includes: x}, threshold: {}}\ndata: [{input: a}]\n",
     "3:40", "must specify at least one of min or max"),
    ("min above max", "target: agents:echo\nscorers:\n  - scorer: {includes: x}\n    threshold: {min: 0.8, max: 0.2}\n"
     "data: [{input: a}]\n", "4:16", "has min (0.8) greater than max (0.2)"),
    ("max out of range", "target: agents:echo\nscorers:\n  - scorer: {includes: x}\n    threshold: {max: 1.5}\n"
     "data: [{input: a}]\n", "4:22", "Maximum threshold"),
    ("string threshold", "target: agents:echo\nscorers:\n  - scorer: {includes: x}\n    threshold: high\ndata: [{input: a}]\n",
     "4:16", "must be a number or an object with min/max bounds, got a str"),
    ("per-turn threshold", HEAD + "data:\n  - turns:\n      - input: a\n        scorers: [{scorer: {includes: a}, threshold: 2}]\n",
     "6:54", "got 2"),
    ("no scorer or gate", "target: agents:echo\ndata:\n  - turns: [{input: a}]\n", "1:1",
     "At least one scorer or gate must be provided"),
    ("unknown check", "target: agents:echo\nscorers:\n  - includs: Brooklyn\ndata: [{input: a}]\n", "3:5",
     "unknown scorer kind 'includs' (did you mean 'includes'?)"),
    ("unknown scorer id", "target: agents:echo\nscorers:\n  - mentions-brooklin\ndata: [{input: a}]\n", "3:5",
     "unknown scorer 'mentions-brooklin'"),
    ("duplicate ids", "target: agents:echo\nscorers:\n  - includes: a\n  - {scorer: {includes: b}, id: includes(a)}\n"
     "data: [{input: a}]\n", "4:5", "duplicate scorer id 'includes(a)'"),
    ("duplicate per-turn ids", HEAD + "data:\n  - turns:\n      - input: a\n        gates: [{includes: a}, {includes: a}]\n",
     "6:32", "duplicate scorer id 'includes(a)' in 'gates'"),
    ("threshold on a gate", "target: agents:echo\ngates:\n  - scorer: {includes: a}\n    threshold: 1\ndata: [{input: a}]\n",
     "4:5", "a gate takes no threshold"),
    ("target does not import", "target: no_such_module:agent\nscorers: [{includes: x}]\ndata: [{input: a}]\n", "1:9",
     "target 'no_such_module:agent' does not import: ModuleNotFoundError"),
    ("target attribute missing", "target: agents:nope\nscorers: [{includes: x}]\ndata: [{input: a}]\n", "1:9",
     "has no attribute 'nope'"),
    ("target not module:attr", "target: agents\nscorers: [{includes: x}]\ndata: [{input: a}]\n", "1:9",
     "is not an import path"),
    ("unknown top key", "target: agents:echo\nscorers: [{includes: x}]\nscorer: []\ndata: [{input: a}]\n", "3:1",
     "unknown key 'scorer' in dataset (did you mean 'scorers'?)"),
    ("unknown item key", HEAD + "data:\n  - inptu: a\n", "4:5", "unknown key 'inptu' in item 0 (did you mean 'input'?)"),
    ("unknown turn key", HEAD + "data:\n  - turns:\n      - input: a\n        scorer: []\n", "6:9",
     "unknown key 'scorer' in item 0 turn 0 (did you mean 'scorers'?)"),
    ("unknown wrapper key", "target: agents:echo\nscorers:\n  - scorer: {includes: x}\n    treshold: 1\ndata: [{input: a}]\n",
     "4:5", "unknown key 'treshold' in scorer entry (did you mean 'threshold'?)"),
    ("unknown check argument", "target: agents:echo\nscorers:\n  - called_tool: {name: x, tims: 2}\ndata: [{input: a}]\n",
     "3:28", "unknown key 'tims' in called_tool (did you mean 'times'?)"),
    ("missing target", "scorers: [{includes: x}]\ndata: [{input: a}]\n", "1:1", "dataset needs 'target'"),
    ("bad yaml", "target: agents:echo\ndata:\n  - input: [unclosed\n", "4:1", "not valid YAML"),
    ("duplicate key", HEAD + "data: [{input: a}]\ndata: [{input: b}]\n", "4:1", "duplicate key 'data'"),
    ("duplicate item ids", HEAD + "data:\n  - {id: a, input: x}\n  - {id: a, input: y}\n", "5:10",
     "id 'a' is already used by item 0"),
    ("input not a string", HEAD + "data:\n  - input: [a, b]\n", "4:12", "'input' must be a string"),
    ("unset env var", "target: agents:echo\nscorers: [{includes: '${EVALCLI_TEST_UNSET_VAR}'}]\ndata: [{input: a}]\n",
     "2:22", "environment variable EVALCLI_TEST_UNSET_VAR is not set"),
    ("concurrency zero", HEAD + "concurrency: 0\ndata: [{input: a}]\n", "3:14", "greater than or equal to 1"),
    ("not a mapping", "- input: a\n", "1:1", "a dataset must be a mapping"),
]


@pytest.mark.parametrize(("text", "where", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_dataset_errors_name_file_line_and_column(workdir: Path, text: str, where: str, message: str) -> None:
    path = workdir / "bad.yaml"
    path.write_text(text)
    errors = problems_of(path)
    assert message in errors
    located = [line for line in errors.splitlines() if message in line]
    assert located[0].startswith(f"{path}:{where}: "), errors


def test_every_problem_is_reported_at_once_with_a_hint(workdir: Path) -> None:
    path = workdir / "bad.yaml"
    path.write_text("target: agents:echo\nscorers: [{includs: x}]\ndata:\n  - inputs: []\n  - inptu: b\n")
    errors = problems_of(path)
    assert "includs" in errors and "'inputs' must be a non-empty array" in errors and "inptu" in errors
    assert errors.count("hint:") >= 3


def test_cli_exits_2_and_writes_nothing_for_an_invalid_dataset(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    write("good.yaml", HEAD + "data: [{input: a}]\n")
    write("bad.yaml", HEAD + "data:\n  - inputs: []\n")
    result = cli("run", "good.yaml", "bad.yaml", "--db", "runs.db")
    assert result.code == 2
    assert "bad.yaml:4:13: item 0: 'inputs' must be a non-empty array" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (result.cwd / "runs.db").exists()  # validation of every file happens before anything runs


def test_validate_command(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("good.yaml", HEAD + "data: [{input: a}, {inputs: [b, c]}]\n")
    ok = cli("validate", "good.yaml")
    assert ok.code == 0 and "good.yaml: ok (2 items" in ok.stdout
    write("bad.yaml", "target: agents:echo\ndata: [{input: a}]\n")
    bad = cli("validate", "good.yaml", "bad.yaml")
    assert bad.code == 2 and "At least one scorer or gate must be provided" in bad.stderr
    assert not (bad.cwd / "evalcli.db").exists()


def test_missing_file_is_a_clear_error(cli: Callable[..., CliResult]) -> None:
    result = cli("run", "nope.yaml")
    assert result.code == 2 and "nope.yaml: no such dataset file" in result.stderr


def test_interpolation_with_defaults(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALCLI_TEST_CITY", "Brooklyn")
    monkeypatch.delenv("EVALCLI_TEST_MISSING", raising=False)
    path = workdir / "d.yaml"
    path.write_text("target: agents:echo\nscorers:\n  - includes: ${EVALCLI_TEST_CITY}\n"
                    "  - includes: ${EVALCLI_TEST_MISSING:-Paris}\n  - includes: 'in ${EVALCLI_TEST_CITY} now'\n"
                    "data: [{input: a}]\n")
    dataset = load_dataset(path)
    assert [s.args["value"] for s in dataset.scorers] == ["Brooklyn", "Paris", "in Brooklyn now"]


def test_item_defaults_and_forms(workdir: Path) -> None:
    path = workdir / "d.yaml"
    path.write_text(HEAD + "data:\n  - input: a\n  - {id: named, tags: [t1], inputs: [b, c]}\n"
                    "  - turns: [{input: d}, {input: e, gates: [{includes: e}]}]\n")
    dataset = load_dataset(path)
    assert [(i.id, i.form, i.inputs) for i in dataset.items] == [
        ("0", "input", ["a"]), ("named", "inputs", ["b", "c"]), ("2", "turns", ["d", "e"])]
    assert dataset.items[1].tags == ["t1"]
    assert dataset.items[2].turns and dataset.items[2].turns[1].gates[0].id == "includes(e)"


def test_gate_and_scorer_may_share_an_id(workdir: Path) -> None:
    path = workdir / "d.yaml"
    path.write_text("target: agents:echo\ngates: [{includes: a}]\nscorers: [{includes: a}]\ndata: [{input: a}]\n")
    dataset = load_dataset(path)
    assert dataset.gates[0].id == dataset.scorers[0].id == "includes(a)"


def test_jsonl_data_file_errors_point_at_the_line(workdir: Path) -> None:
    (workdir / "items.jsonl").write_text('{"input": "a"}\n\n{"inputs": []}\n')
    path = workdir / "d.yaml"
    path.write_text(HEAD + "data_file: items.jsonl\n")
    errors = problems_of(path)
    assert f"{workdir / 'items.jsonl'}:3:1: item 1: 'inputs' must be a non-empty array" in errors


def test_jsonl_dataset_with_header_line(workdir: Path) -> None:
    path = workdir / "d.jsonl"
    path.write_text('{"target": "agents:echo", "scorers": [{"includes": "a"}]}\n{"input": "a"}\n{"id": "x", "inputs": ["b"]}\n')
    dataset = load_dataset(path)
    assert [i.id for i in dataset.items] == ["0", "x"]


def test_registry_errors_are_located(workdir: Path) -> None:
    (workdir / "scorers.yaml").write_text("scorers:\n  good: {includes: a}\n  bad:\n    includs: b\n")
    path = workdir / "d.yaml"
    path.write_text("target: agents:echo\nscorers: [good]\ndata: [{input: a}]\n")
    errors = problems_of(path)
    assert f"{workdir / 'scorers.yaml'}:4:5: unknown scorer kind 'includs'" in errors
