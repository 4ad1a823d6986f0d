"""Helpers for the reliability tests: a project in a temp dir, and the real CLI run as a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import CliResult

REPO = Path(__file__).resolve().parent.parent

SUBPROCESS_TIMEOUT = 300.0
"""How long a test waits for a subprocess it runs to the end (the CLI, pytest, a script) before calling it hung. It
must hold on a machine loaded by other work (a fresh interpreter importing litellm took over 60 s at load 13), so it
only ever stops a hang; a test whose point is how long something takes is marked ``timing`` instead, and runs alone
(docs/development.md). ``tests/test_time_limits.py`` holds every test to it."""


def write_project(folder: Path, *, agent: str, dataset: str, scorers: str | None = None,
                  dataset_name: str = "ds.yaml") -> Path:
    """Write ``agent.py``, the dataset (and ``scorers.yaml``) into ``folder``; return the dataset path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text(textwrap.dedent(agent), encoding="utf-8")
    path = folder / dataset_name
    path.write_text(textwrap.dedent(dataset), encoding="utf-8")
    if scorers is not None:
        (folder / "scorers.yaml").write_text(textwrap.dedent(scorers), encoding="utf-8")
    return path


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: no proxies for loopback, litellm's local cost map."""
    env = dict(os.environ)
    # this working tree, whatever the installed evalcli points at
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"})
    env.update(extra)
    return env


def start_cli(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m evalcli ARGS`` started in ``cwd``, stdout and stderr piped."""
    return subprocess.Popen([sys.executable, "-m", "evalcli", *args], cwd=cwd, env=env or cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_cli(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = SUBPROCESS_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python -m evalcli ARGS`` run to the end in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "evalcli", *args], cwd=cwd, env=env or cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def wait_for_lines(path: Path, count: int, timeout: float = SUBPROCESS_TIMEOUT) -> None:
    """Wait until the file has at least ``count`` lines (a target appends one per call)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not reach {count} lines in {timeout}s")


def query(db: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def essentials(result: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on how a run was split up: verdict, aggregates and per-item outcomes."""
    items = [{k: item[k] for k in ("index", "id", "status", "error", "scores", "gate_scores")}
             | {"outputs": [t["output"] for t in item["turns"]]} for item in result["items"]]
    return {k: result[k] for k in ("verdict", "scores", "summary", "gate_results", "threshold_results",
                                   "turn_results")} | {"items": items}


def load_json(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(module: str, *args: str, env: dict[str, str]) -> Iterator[int]:
    """The port of a loopback server run as ``python -m MODULE ARGS --port PORT`` from the repository, once it
    listens (within ``SUBPROCESS_TIMEOUT``); stopped at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", module, *args, "--port", str(port)], cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


RESUMABLE = ("target: agents:boom\ngates: [{includes: fine}]\ndata:\n  - {id: a, input: hi}\n  - id: b\n"
             "    turns:\n      - {input: one}\n      - {input: boom, gates: [{includes: fine}]}\n")
"""A dataset whose second conversation errors (``agents:boom``): a run of it has something to resume."""


def stored_run(write: Callable[..., Path], cli: Callable[..., CliResult]) -> str:
    """The id of a run of ``RESUMABLE`` written as ``d.yaml`` (its conversation ``b`` errored)."""
    write("d.yaml", RESUMABLE)
    first = cli("run", "d.yaml", "--json", "-")
    assert first.code == 4, first.stderr  # b errored: there is something to resume
    return str(first.json["run_id"])

