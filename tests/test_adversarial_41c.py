"""Issue 41, tried again as users would (docs/hermetic.md): tool plans on other threads, through the real CLI.

The targets are real callables whose ``@evalcli.tool`` writes a marker file when it runs live, so a call that was
meant to be mocked or refused but ran is seen.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult

WORKERS = '''
import pathlib, queue, threading
from concurrent.futures import Future

import evalcli

MARK = pathlib.Path(__file__).with_name("ran.txt")


@evalcli.tool
def lookup(key: str) -> str:
    with MARK.open("a") as f:
        f.write(f"lookup {key}\\n")
    return f"live {key}"


class Worker:
    """One thread that runs every conversation's tool calls, as an agent's own worker does."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.started = False
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            fn, done = self.jobs.get()
            try:
                done.set_result(fn())
            except Exception as exc:
                done.set_exception(exc)

    def run(self, fn):
        self.start()
        done = Future()
        self.jobs.put((fn, done))
        return done.result(timeout=60)


LAZY = Worker()      # started by the first conversation's turn
EARLY = Worker()
EARLY.start()        # started when the target is imported, before the run


def lazy(input, **options) -> str:
    key = input.split()[-1]
    return LAZY.run(lambda: lookup(key=key))


def early(input, **options) -> str:
    key = input.split()[-1]
    return EARLY.run(lambda: lookup(key=key))
'''


@pytest.fixture
def agents(workdir: Path) -> Path:
    (workdir / "worker_tools.py").write_text(WORKERS)
    return workdir


def marker(workdir: Path) -> list[str]:
    path = workdir / "ran.txt"
    return sorted(path.read_text().splitlines()) if path.exists() else []


def replies(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"]
                         if m["role"] == "assistant" and m.get("content")] for item in result.json["items"]}


def dataset(target: str) -> str:
    data = "\n".join(f"""
          - id: k{n}
            input: look up k{n}
            tools:
              lookup: {{returns: mock-k{n}}}""" for n in range(3))
    return f"""
        target: worker_tools:{target}
        concurrency: 1
        data:{data}
        gates:
          - includes: mock
    """


def test_a_worker_thread_started_in_one_turn_never_answers_from_that_conversations_mocks(
        agents: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    # the worker started in k0's turn once carried k0's plan for ever: k1 and k2 were answered "mock-k0" and passed
    write("d.yaml", dataset("lazy"))
    result = cli("run", "d.yaml", "--json", "-")
    found = replies(result)
    assert found["k0"] == ["mock-k0"], result.stderr
    for n in (1, 2):
        assert "mock-k0" not in found[f"k{n}"], found  # never another conversation's mock
    assert marker(agents) == ["lookup k1", "lookup k2"]  # no conversation's plan: they ran as outside evalcli


@pytest.mark.parametrize("target", ["lazy", "early"])
def test_hermetic_refuses_a_tool_call_tied_to_no_conversation(agents: Path, write: Callable[..., Path],
                                                              cli: Callable[..., CliResult], target: str) -> None:
    # a worker started before the run (or one that outlived its turn) ran the tool live under --hermetic, exit 0
    write("d.yaml", dataset(target))
    result = cli("run", "d.yaml", "--hermetic", "--json", "-")
    assert result.code == 4, result.stderr
    items: dict[str, Any] = {item["id"]: item for item in result.json["items"]}
    refused = ["k1", "k2"] if target == "lazy" else ["k0", "k1", "k2"]
    for name in refused:
        assert items[name]["status"] == "error", items[name]
        assert "--hermetic" in items[name]["error"] and "lookup" in items[name]["error"], items[name]["error"]
        assert "tied to no conversation" in items[name]["error"]
    assert marker(agents) == []  # nothing ran live
