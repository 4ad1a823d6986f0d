"""Ctrl-C during a simulated run: what finished is kept, ``--resume`` plays only what is missing and gives the
result of an uninterrupted run; a conversation cancelled mid-way replays its simulated user from the cache."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.llm_server import LLMServer
from tests.reliability_helpers import cli_env, essentials, load_json, query, run_cli, start_cli, wait_for_lines, write_project
from tests.sim_helpers import goal_of, serve, sim_env, simulator_requests, user_said

pytestmark = [pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals"),
              pytest.mark.usefixtures("llm_backend")]  # every test on both backends (docs/models.md)

AGENT = """
import os, time

def generate(input, **options):
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(input + "\\n")
    if input.startswith("hang") and os.path.exists(os.environ["HANG_FLAG"]):
        time.sleep(120)
    time.sleep(0.2)
    with open(os.environ["CALLS_FILE"] + ".done", "a") as f:
        f.write(input + "\\n")
    return f"answer to {input}"

generate.memory = True
"""

ITEMS = 8
TURNS = 3


def dataset(hang: int | None = None) -> str:
    goals = ["hang" if n == hang else f"g{n}" for n in range(ITEMS)]
    items = "".join(f"  - {{id: s{n}, simulate: {{goal: {goal}, max_turns: {TURNS}}}}}\n" for n, goal in enumerate(goals))
    return f"target: agent:generate\nconcurrency: 2\ngates: [{{includes: answer}}]\ndata:\n{items}"


def project(folder: Path, server: LLMServer, hang: int | None = None) -> dict[str, str]:
    write_project(folder, agent=AGENT, dataset=dataset(hang))
    return cli_env(CALLS_FILE=str(folder / "calls.txt"), HANG_FLAG=str(folder / "hang.flag"), **sim_env(server))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def conversations(result: dict[str, Any]) -> list[list[str]]:
    return [[t["input"] for t in item["turns"]] for item in result["items"]]


@pytest.fixture
def server(llm_server: LLMServer) -> LLMServer:
    serve(llm_server, lambda heard, request: f"{goal_of(request)} message {len(user_said(request))}")
    return llm_server


@pytest.mark.timing
def test_sigint_keeps_finished_simulated_conversations_and_resume_matches_an_uninterrupted_run(
        tmp_path: Path, server: LLMServer) -> None:
    folder = tmp_path / "run"
    env = project(folder, server)
    process = start_cli(["run", "ds.yaml"], folder, env)
    wait_for_lines(folder / "calls.txt.done", 5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 130, stderr
    stored = query(folder / "evalcli.db", "SELECT item_id, status, stop_reason FROM items")
    assert 0 < len(stored) < ITEMS and all(row[1:] == ("ok", "max_turns") for row in stored)
    run_id = query(folder / "evalcli.db", "SELECT id FROM runs")[0][0]
    asked_before = len(simulator_requests(server))

    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], folder, env)
    assert resumed.returncode == 0, resumed.stderr
    result = load_json(resumed.stdout)
    assert len(lines(folder / "calls.txt")) == ITEMS * TURNS, "every agent turn ran exactly once over both processes"
    assert len(simulator_requests(server)) - asked_before == TURNS * (ITEMS - len(stored))

    reference_folder = tmp_path / "reference"
    reference = run_cli(["run", "ds.yaml", "--json", "-"], reference_folder, project(reference_folder, server))
    assert reference.returncode == 0, reference.stderr
    expected = load_json(reference.stdout)
    assert essentials(result) == essentials(expected)
    assert conversations(result) == conversations(expected)
    assert [i["stop_reason"] for i in result["items"]] == ["max_turns"] * ITEMS


@pytest.mark.timing
def test_a_conversation_cancelled_mid_way_replays_its_simulated_user_from_the_cache(
        tmp_path: Path, server: LLMServer) -> None:
    env = project(tmp_path, server, hang=1)
    (tmp_path / "hang.flag").write_text("hang")
    process = start_cli(["run", "ds.yaml"], tmp_path, env)
    wait_for_lines(tmp_path / "calls.txt.done", 6)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)  # a second signal cancels the hung conversation at once
    process.communicate(timeout=15)
    assert process.returncode == 130
    assert "s1" not in {i for (i,) in query(tmp_path / "evalcli.db", "SELECT item_id FROM items")}
    hung_asks = [r for r in simulator_requests(server) if goal_of(r) == "hang"]
    assert len(hung_asks) == 1, "the hung conversation asked its simulator for its first message only"

    (tmp_path / "hang.flag").unlink()
    run_id = query(tmp_path / "evalcli.db", "SELECT id FROM runs")[0][0]
    resumed = run_cli(["run", "ds.yaml", "--resume", run_id, "--json", "-"], tmp_path, env)
    assert resumed.returncode == 0, resumed.stderr
    result = load_json(resumed.stdout)
    assert conversations(result)[1] == ["hang message 0", "hang message 1", "hang message 2"]
    replayed = [r for r in simulator_requests(server) if goal_of(r) == "hang"]
    assert len(replayed) == TURNS, "the first message came from the cache; only the two new ones were asked"
    cached = query(tmp_path / "evalcli.db", "SELECT cache_hit, turn_index FROM llm_calls l JOIN runs r ON r.id = l.run_id "
                                            "WHERE item_index = 1 AND purpose = 'simulator' ORDER BY l.rowid")
    assert cached[-TURNS:] == [(1, 0), (0, 1), (0, 2)]
