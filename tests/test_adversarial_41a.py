"""Issue 41's budgets, tapes and regex rule tried as users would (docs/hermetic.md, "Tapes"; docs/reliability.md):
what broke, through the real CLI. A tape is planned like every other output: checked before anything runs, never
the tape the run replays, and never shared by two runs of one command; a tape that cannot be read is a located
error, never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.evaluate import tape_names
from evalcli.tools import tape_path
from tests.conftest import CliResult

AGENT = '''
import os
import evalcli


@evalcli.tool
def lookup(query: str) -> dict:
    """Look something up."""
    if os.environ.get("TOOL_DISABLED"):
        raise RuntimeError("the live service must not be called")
    return {"echo": query, "where": os.path.basename(os.path.dirname(os.path.abspath(__file__)))}


def agent(input: str) -> str:
    try:
        return "done " + str(lookup(query=input))
    except Exception as exc:  # noqa: BLE001 - told to the user
        return f"failed: {exc}"
'''


def dataset(n: int, replay: str | None = None) -> str:
    tools = f"tools: {{replay: {replay}}}\n" if replay else ""
    return ("target: adv41a_tools:agent\n" + tools + "scorers:\n  - includes: done\ndata:\n"
            + "".join(f"  - {{id: q{i}, input: query {i}}}\n" for i in range(n)))


def tape_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def agent_dir(workdir: Path) -> Path:
    (workdir / "adv41a_tools.py").write_text(AGENT)
    return workdir


def test_recording_over_the_tape_the_run_replays_is_refused_before_anything_runs(
        agent_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", dataset(4))
    recorded = cli("run", "d.yaml", "--record-tools", "tapes")
    assert recorded.code == 0, recorded.stderr
    tape = agent_dir / "tapes" / "d.tape.jsonl"
    before = tape.read_bytes()
    assert len(tape_lines(tape)) == 4
    write("d.yaml", dataset(4, replay="tapes/d.tape.jsonl"))
    # an interrupted run would have rewritten the tape with only the conversations it played, and its resume
    # would then be refused because the replayed tape changed: refused at once, the tape untouched
    again = cli("run", "d.yaml", "--record-tools", "tapes", "--db", "again.db", env={"TOOL_DISABLED": "1"})
    assert again.code == 2, again.stderr
    assert "--record-tools would write tapes/d.tape.jsonl, the tape the dataset replays" in again.stderr
    assert "record into another folder" in again.stderr
    assert tape.read_bytes() == before
    assert not (agent_dir / "again.db").exists()
    # another folder is fine, and records what the tape answered
    other = cli("run", "d.yaml", "--record-tools", "tapes-new", "--hermetic", env={"TOOL_DISABLED": "1"})
    assert other.code == 0, other.stderr
    assert tape_lines(agent_dir / "tapes-new" / "d.tape.jsonl") == tape_lines(tape)


def test_a_record_folder_that_is_a_file_is_exit_2_before_anything_runs(
        agent_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", dataset(2))
    (agent_dir / "tapes").write_text("not a folder\n")
    for folder in ("tapes", "tapes/sub"):
        done = cli("run", "d.yaml", "--record-tools", folder)
        assert done.code == 2, done.stderr
        assert f"error: --record-tools {folder}: tapes is a file, not a folder" in done.stderr
        assert "internal error" not in done.stderr
        assert not (agent_dir / "evalcli.db").exists()  # nothing played, nothing stored


def test_two_datasets_of_one_stem_each_keep_their_own_tape(
        agent_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    for folder in ("x", "y"):
        (agent_dir / folder).mkdir()
        (agent_dir / folder / "adv41a_tools.py").write_text(AGENT)
    write("x/d.yaml", dataset(3))
    write("y/d.yaml", dataset(2))
    done = cli("run", "x/d.yaml", "y/d.yaml", "--record-tools", "tapes")
    assert done.code == 0, done.stderr
    tapes = sorted(p.name for p in (agent_dir / "tapes").iterdir())
    assert tapes == ["x-d.tape.jsonl", "y-d.tape.jsonl"]  # named as --json names its files
    assert [line["identity"] for line in tape_lines(agent_dir / "tapes" / "x-d.tape.jsonl")] == ["id:q0", "id:q1",
                                                                                                  "id:q2"]
    assert len(tape_lines(agent_dir / "tapes" / "y-d.tape.jsonl")) == 2


@pytest.mark.parametrize(("line", "message"), [
    ('{"identity": "id:q0", "turn": "abc", "tool": "lookup", "arguments": {}}', """'turn' is a whole number from 0, not "abc\""""),
    ('{"identity": "id:q0", "turn": [1], "tool": "lookup", "arguments": {}}', "'turn' is a whole number from 0, not [1]"),
    ('{"identity": "id:q0", "call": "x", "tool": "lookup", "arguments": {}}', """'call' is a whole number from 0, not "x\""""),
    ('{"identity": null, "tool": "lookup", "arguments": {}}', "a tape line is an object with identity"),
])
def test_a_tape_line_that_cannot_be_read_is_a_located_error(
        agent_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult], line: str, message: str) -> None:
    good = '{"identity": "id:q0", "turn": 0, "call": 0, "tool": "lookup", "arguments": {"query": "query 0"}, ' \
           '"result": "r"}'
    write("tapes/d.tape.jsonl", good + "\n" + line + "\n")
    write("d.yaml", dataset(1, replay="tapes/d.tape.jsonl"))
    for command in ("validate", "run"):
        done = cli(command, "d.yaml")
        assert done.code == 2, done.stderr
        assert f"tapes/d.tape.jsonl:2: dataset: tape 'tapes/d.tape.jsonl': {message}" in done.stderr
        assert "internal error" not in done.stderr


def test_a_replay_path_that_is_a_folder_says_so(
        agent_dir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    (agent_dir / "tapes").mkdir()
    write("d.yaml", dataset(1, replay="tapes"))
    done = cli("validate", "d.yaml")
    assert done.code == 2
    assert "d.yaml:2:17: dataset: tape 'tapes' is a folder, not a tape" in done.stderr
    assert "e.g. 'tapes/NAME.tape.jsonl'" in done.stderr


@given(runs=st.lists(st.tuples(st.sampled_from(["d.yaml", "x/d.yaml", "y/d.yaml", "e.yaml", "x/e.yaml"]),
                               st.sampled_from([None, "model:openai/a", "model:openai/b", "m:openai/a"])),
                     min_size=1, max_size=6, unique=True))
def test_no_two_runs_of_a_command_share_a_tape(runs: list[tuple[str, str | None]]) -> None:
    """Whatever datasets and targets one command runs, each run's tape path is its own (docs/hermetic.md)."""
    planned = [(Path(d), t) for d, t in runs]
    paths = [tape_path("tapes", d, name) for (d, _), name in zip(planned, tape_names(planned), strict=True)]
    assert len(set(paths)) == len(paths)
    if len({d.stem for d, _ in planned}) == len(planned):
        assert paths == [Path("tapes") / f"{d.stem}.tape.jsonl" for d, _ in planned]  # the documented name


def test_a_cost_budget_refusal_names_a_few_users_of_each_model_then_how_many_more(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    items = "".join(f"  - {{id: s{i}, simulate: {{goal: get answer {i}, model: openai/sim-m}}}}\n" for i in range(40))
    write("d.yaml", "target:\n  model: openai/target-m\n  api_base: http://127.0.0.1:9/v1\nscorers: [{includes: x}]\n"
                    "data:\n" + items)
    done = cli("run", "d.yaml", "--max-cost", "1")
    assert done.code == 2, done.stderr
    assert ("openai/sim-m (the simulated user of item s0, the simulated user of item s1, the simulated user of item s2 "
            "and 37 more)") in done.stderr
    assert "item s3," not in done.stderr and len(done.stderr) < 1200
