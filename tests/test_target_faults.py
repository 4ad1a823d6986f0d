"""Target faults through the real CLI: exceptions, hangs (``--turn-timeout``), replies that are not
messages, and a custom scorer that raises. Each is an item error with a clear message and a traceback
stored in ``items.traceback``; the run goes on; ``--max-errors N`` tolerates N."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability_helpers import load_json, query, run_cli, write_project

AGENT = """
import asyncio, time

class Reply:
    pass

def generate(input, **options):
    if input == "raise":
        raise ValueError("kaboom from the target")
    if input == "hang":
        time.sleep(30)  # a sync call cannot be cancelled: the run must not wait for it
    if input == "int":
        return 42
    if input == "none":
        return None
    if input == "dict":
        return {"text": "hello", "role": "assistant"}
    if input == "strings":
        return ["hello", "world"]
    if input == "roleless":
        return [{"content": "no role"}]
    if input == "object":
        return Reply()
    if input == "second turn fails":
        raise RuntimeError("the second turn broke")
    return f"fine {input}"

async def agenerate(input, **options):
    if input == "hang":
        await asyncio.sleep(30)
    return generate(input, **options)

def picky_scorer(run):
    if "score-raise" in run.input:
        raise KeyError("scorer blew up")
    return 1.0
"""

FAULTS = {
    "raise": "turn 0: the target raised ValueError: kaboom from the target",
    "hang": "turn 0: the target did not answer within 0.5s",
    "int": "turn 0: the target returned int, not a response",
    "none": "turn 0: the target returned NoneType, not a response",
    "dict": "turn 0: the target returned a dict without 'messages' (keys: text, role)",
    "strings": "turn 0: response message 0 is str, not a message dict with a 'role'",
    "roleless": "turn 0: response message 0 is dict, not a message dict with a 'role'",
    "object": "turn 0: the target returned Reply, not a response",
    "multi": "turn 1: the target raised RuntimeError: the second turn broke",
}
TRACEBACK_SAYS = {"raise": "ValueError: kaboom from the target", "multi": "RuntimeError: the second turn broke",
                  "hang": "TurnTimedOut: the target did not answer within", "int": "BadReply"}


def dataset(target: str) -> str:
    lines = [f"target: agent:{target}", "concurrency: 12", "gates:", "  - includes: fine", "scorers:",
             "  - scorer: {python: 'agent:picky_scorer'}", "    id: picky", "data:", "  - {id: good, input: good}",
             "  - {id: multi, inputs: [first turn, second turn fails]}"]
    lines += [f"  - {{id: {key}, input: {key}}}" for key in [*FAULTS, "score-raise"] if key != "multi"]
    return "\n".join(lines) + "\n"


@pytest.mark.timing
def test_target_faults_are_item_errors_with_tracebacks_and_the_run_goes_on(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset("generate"))
    started = time.monotonic()
    done = run_cli(["run", "ds.yaml", "--turn-timeout", "0.5", "--json", "-"], tmp_path)
    assert time.monotonic() - started < 15, "a hung sync target held up the end of the run"
    assert done.returncode == 4, done.stderr
    assert "internal error" not in done.stderr
    result = load_json(done.stdout)
    items = {item["id"]: item for item in result["items"]}
    assert items["good"]["status"] == "ok" and items["good"]["scores"] == {"picky": 1.0}
    for key, message in FAULTS.items():
        assert items[key]["status"] == "error", key
        assert items[key]["error"] == message or items[key]["error"].startswith(message), (key, items[key]["error"])
    assert result["summary"]["errors"] == len(FAULTS)
    # a scorer that raises is that scorer's error: the conversation stands (its gate scored), the exit code says 4
    scored = items["score-raise"]
    assert scored["status"] == "ok" and scored["scores"] == {"picky": None} and scored["gate_scores"] == {
        "includes(fine)": 1.0}
    assert scored["outcomes"]["scorers"]["picky"]["error"] == "KeyError: 'scorer blew up'"
    assert result["summary"]["scorer_errors"] == {"picky": 1}
    assert result["verdict"] == "passed"  # the two conversations that ran passed; errors are not scored

    rows = dict(query(tmp_path / "evalcli.db", "SELECT item_id, traceback FROM items WHERE status = 'error'"))
    assert set(rows) == set(FAULTS)
    for key, traceback in rows.items():
        assert traceback and traceback.startswith("Traceback (most recent call last)"), key
    for key, text in TRACEBACK_SAYS.items():
        assert text in rows[key], (key, rows[key])
    assert 'agent.py", line' in rows["raise"], "the traceback reaches into the target's own code"
    # the first turn of the failed multi-turn conversation is kept, and the turn that failed with what was said
    assert query(tmp_path / "evalcli.db", "SELECT t.turn_index, t.input, t.output FROM turns t JOIN items i "
                 "USING (run_id, item_index) WHERE i.item_id = 'multi' ORDER BY t.turn_index")[1:] == [
        (1, "second turn fails", "[]")]
    assert "multi  error: turn 1: the target raised RuntimeError" in done.stderr  # the failing list, with --json -


def test_an_async_hang_is_cancelled_and_max_errors_tolerates_exactly_n(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset("agenerate"))
    errors = len(FAULTS) + 1  # the conversations that errored, and the one scorer error
    tolerated = run_cli(["run", "ds.yaml", "--turn-timeout", "0.5", "--max-errors", str(errors), "--json", "-"],
                        tmp_path)
    assert tolerated.returncode == 0, tolerated.stderr
    result = load_json(tolerated.stdout)
    assert result["summary"]["errors"] == len(FAULTS)
    hang = next(i for i in result["items"] if i["id"] == "hang")
    assert hang["error"] == FAULTS["hang"]
    one_short = run_cli(["run", "ds.yaml", "--turn-timeout", "0.5", "--max-errors", str(errors - 1), "-q"],
                        tmp_path)
    assert one_short.returncode == 4, one_short.stderr
    assert query(tmp_path / "evalcli.db", "SELECT exit_code, errors FROM runs ORDER BY id") == [
        (0, len(FAULTS)), (4, len(FAULTS))]
