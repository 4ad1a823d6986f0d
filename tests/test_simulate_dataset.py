"""The ``simulate:`` form as a dataset file (docs/simulated-users.md): validation with located errors, all at once; defaults;
the simulator's model; the JSON Schema; preflight warnings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from evalcli.dataset import load_dataset
from evalcli.errors import DatasetError
from evalcli.run.drivers import driver_for
from evalcli.run.simulated import SimulatedUser
from tests.conftest import REPO, CliResult

HEAD = "target: agents:echo_agent\nscorers: [{includes: x}]\ndata:\n"

BAD = HEAD + """\
  - id: both
    input: hello
    simulate: {goal: Get a refund, gaol: typo}
  - id: many
    simulate:
      goal: "  "
      max_turns: 51
      colour: red
  - id: no-goal
    simulate: {persona: Terse}
  - id: not-a-mapping
    simulate: Get a refund
  - id: zero
    simulate: {goal: g, max_turns: 0}
  - id: facts-list
    simulate: {goal: g, facts: [order 1234]}
  - id: quoted-number
    simulate: {goal: g, max_turns: "8", opening: ""}
"""


def test_every_mistake_in_simulate_blocks_is_reported_at_once_with_its_place(write: Callable[..., Path]) -> None:
    path = write("bad.yaml", BAD)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    lines = [f"{p.where.split(':', 1)[1]} {p.message}" for p in caught.value.problems]
    expected = [
        "6:5 item 0 (both): 'simulate' cannot be combined with 'input'",
        "6:36 unknown key 'gaol' in item 0 (both) simulate (did you mean 'goal'?)",
        "9:13 item 1 (many) simulate: 'goal': goal must not be empty: write what the simulated user wants",
        "10:18 item 1 (many) simulate: 'max_turns': Input should be less than or equal to 50",
        "11:7 unknown key 'colour' in item 1 (many) simulate",
        "13:15 item 2 (no-goal) simulate needs 'goal'",
        "15:15 item 3 (not-a-mapping): 'simulate' must be a mapping with at least 'goal'",
        "17:36 item 4 (zero) simulate: 'max_turns': Input should be greater than or equal to 1",
        "19:32 item 5 (facts-list) simulate: 'facts': Input should be a valid dictionary",
        "21:36 item 6 (quoted-number) simulate: 'max_turns': Input should be a valid integer",
        "21:50 item 6 (quoted-number) simulate: 'opening': opening must not be empty: write the first message, "
        "or leave 'opening' out",
    ]
    assert lines == expected
    assert all(p.hint for p in caught.value.problems)


def test_the_cli_reports_them_one_per_line_and_exits_2(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("bad.yaml", BAD)
    result = cli("validate", "bad.yaml")
    assert result.code == 2
    assert result.stderr.count("bad.yaml:") == 11
    assert "bad.yaml:10:18: item 1 (many) simulate: 'max_turns'" in result.stderr


def test_a_valid_block_gives_a_simulated_item_with_its_defaults(write: Callable[..., Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALCLI_SIMULATOR_MODEL", raising=False)
    monkeypatch.delenv("EVALCLI_JUDGE_MODEL", raising=False)
    path = write("ok.yaml", HEAD + """\
  - id: refund
    tags: [support]
    simulate:
      goal: Get a refund for order 1234.
      persona: Impatient.
      facts: {order_id: "1234", items: 2}
      opening: my order arrived broken
    expected_outcome: A refund was confirmed.
  - simulate: {goal: Just chat, model: openai/gpt-4o-mini, max_turns: 50}
""")
    first, second = load_dataset(path).items
    assert (first.form, first.id, first.tags, first.inputs, first.turns) == ("simulate", "refund", ["support"],
                                                                            ["my order arrived broken"], None)
    assert first.goal == "Get a refund for order 1234." and first.expected_outcome == "A refund was confirmed."
    assert first.first_input == "my order arrived broken"
    simulation = first.simulation
    assert isinstance(driver_for(first), SimulatedUser) and first.multi_turn and simulation is not None
    assert (simulation.max_turns, simulation.model) == (8, "local/gemma-3-270m")
    assert simulation.facts == (("order_id", "1234"), ("items", "2"))
    assert isinstance(driver_for(second), SimulatedUser) and second.simulation is not None
    assert second.simulation.max_turns == 50
    assert (second.inputs, second.first_input, second.simulation.model) == ([], "", "openai/gpt-4o-mini")


def test_the_simulators_model_comes_from_the_block_then_the_environment_then_the_judge_default(
        write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path = write("m.yaml", HEAD + "  - simulate: {goal: g}\n  - simulate: {goal: g, model: 'openai/own'}\n"
                                  "  - simulate: {goal: g, model: '${SIM_MODEL_VAR:-openai/fallback}'}\n")
    monkeypatch.delenv("SIM_MODEL_VAR", raising=False)
    monkeypatch.setenv("EVALCLI_JUDGE_MODEL", "openai/the-judge")
    monkeypatch.delenv("EVALCLI_SIMULATOR_MODEL", raising=False)
    assert [i.simulation.model for i in load_dataset(path).items] == ["openai/the-judge", "openai/own",  # type: ignore
                                                                      "openai/fallback"]
    monkeypatch.setenv("EVALCLI_SIMULATOR_MODEL", "openai/the-simulator")
    assert load_dataset(path).items[0].simulation.model == "openai/the-simulator"  # type: ignore[union-attr]


def test_filter_searches_the_opening(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("f.yaml", HEAD + "  - simulate: {goal: g, opening: hello there, max_turns: 1}\n"
                           "  - simulate: {goal: g, opening: goodbye, max_turns: 1}\n")
    result = cli("run", "f.yaml", "--filter", "hello", "--json", "-")
    assert result.code == 0, result.stderr
    assert [i["turns"][0]["input"] for i in result.json["items"]] == ["hello there"]
    assert result.json["items"][0]["stop_reason"] == "max_turns"


def test_validate_warns_when_the_simulators_model_cannot_be_reached(write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    write("w.yaml", HEAD + "  - {id: chat, simulate: {goal: g, model: anthropic/claude-haiku-4-5}}\n")
    result = cli("validate", "w.yaml", env={"ANTHROPIC_API_KEY": ""})
    assert result.code == 0
    assert "the simulated user of item chat" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr


def test_the_schema_describes_simulate_and_accepts_the_example(cli: Callable[..., CliResult]) -> None:
    schema = json.loads(cli("schema").stdout)
    simulate = schema["$defs"]["Item"]["properties"]["simulate"]
    simulate = schema["$defs"][simulate["$ref"].rsplit("/", 1)[-1]]
    assert simulate["required"] == ["goal"] and simulate["additionalProperties"] is False
    number, whole = simulate["properties"]["max_turns"]["anyOf"]  # a number, or wholly one ${VAR} (docs/datasets.md)
    assert number["minimum"] == 1 and number["maximum"] == 50 and whole["pattern"].startswith("^\\$")
    jsonschema.validate(yaml.safe_load((REPO / "datasets" / "simulated.yaml").read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"target": "a:b", "data": [{"simulate": {"goal": "g", "colour": "red"}}]}, schema)
