"""Benchmark workloads: N conversations x T turns as a JSONL dataset, and running ``evalcli run`` on it.

A dataset is a JSONL file (a header line, then one item a line): even items are ``inputs``
conversations, odd items ``turns`` conversations with a per-turn gate, so both multi-turn paths
are exercised. Every gate and scorer is a check (no LLM judge), so the figures measure evalcli's
own overhead and its concurrency, never a model's.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"


@dataclass(frozen=True)
class Workload:
    """One benchmark case."""

    n: int
    turns: int
    latency: float
    concurrency: int
    target: str = "sleep"
    """``sleep`` (asyncio.sleep in the target), ``http`` (a model call through evalcli's LLM client to the loopback
    server, on the backend ``EVALCLI_LLM_BACKEND`` names), ``http-target`` (docs/targets/http.md ``target: {http: ...}``
    against examples/targets/agent_server.py) or ``mastra-target`` (``target: {mastra: ...}`` against the real
    Mastra server of tests/mastra/)."""
    tools: bool = True
    """Replies carry a get_weather tool call (checked with called_tool); ``False``: one text message."""

    @property
    def ideal(self) -> float:
        """Seconds a perfect runner needs: every turn's latency, ``concurrency`` at a time."""
        return self.n * self.turns * self.latency / self.concurrency

    @property
    def name(self) -> str:
        return f"{self.n}x{self.turns}"


def _checks(tools: bool) -> tuple[list[Any], list[Any]]:
    """(gates, scorers) of the header: check-only, so no LLM is involved in scoring."""
    if tools:
        return ["bench-called-weather"], ["bench-mentions-brooklyn", {"scorer": "bench-few-tool-calls", "threshold": 1}]
    return ["bench-mentions-brooklyn"], ["bench-no-error"]


FORM_TARGETS = {
    "http-target": lambda url: {"http": {"url": f"{url}/chat",
                                         "body": {"message": "{{ input }}", "session_id": "{{ thread }}"},
                                         "response": {"messages": "messages", "usage": "usage"}}},
    "mastra-target": lambda url: {"mastra": {"url": url, "agent": "weatherAgent"}},
}
"""Targets written as mappings (docs/targets/http.md), given the agent server's base URL."""


def turn_inputs(i: int, turns: int) -> list[str]:
    return [f"Conversation {i}, turn {t}: what is the weather in Brooklyn?" for t in range(turns)]


def write_dataset(work: Workload, api_base: str | None = None, fmt: str = "jsonl") -> Path:
    """Write the workload's dataset under ``bench/out`` (reused when it already exists): JSONL, or with
    ``fmt="yaml"`` the same header and items as one YAML file (block style, as people write them)."""
    OUT.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"latency": work.latency}
    if api_base:
        options["api_base"] = api_base
    if not work.tools:
        options["tools"] = False
    gates, scorers = _checks(work.tools)
    turn_gate = gates[0]
    header: dict[str, Any] = {"target": f"bench.targets:{work.target}_agent", "target_options": options,
                              "concurrency": work.concurrency, "gates": gates, "scorers": scorers}
    if work.target in FORM_TARGETS:
        header["target"] = FORM_TARGETS[work.target](api_base or "")
        del header["target_options"]
    key = f"{work.target}-{'tools' if work.tools else 'text'}-{work.name}-l{work.latency:g}-c{work.concurrency}"
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()[:8]
    path = OUT / f"{key}-{digest}.{fmt}"
    if path.exists():
        return path
    items = []
    for i in range(work.n):
        inputs = turn_inputs(i, work.turns)
        if i % 2 == 0:
            items.append({"id": f"c{i}", "inputs": inputs})
        else:
            items.append({"id": f"c{i}", "turns": [{"input": text, "gates": [turn_gate]} for text in inputs]})
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        if fmt == "yaml":
            import yaml

            out.write(yaml.safe_dump({**header, "data": items}, sort_keys=False, allow_unicode=True, width=1000))
        else:
            out.write(json.dumps(header) + "\n")
            out.writelines(json.dumps(item) + "\n" for item in items)
    tmp.replace(path)
    return path


@dataclass
class Measure:
    """What one benchmarked subprocess took."""

    wall: float
    peak_rss_mb: float
    exit_code: int
    stdout: str
    stderr: str
    run_seconds: float | None = None
    """evalcli: the run itself (run started to verdict), read back from the store."""
    spawned_at: float = 0.0
    """``time.time()`` when the process was started."""
    startup_seconds: float | None = None
    """evalcli: process start to the run's start (imports, validation, opening the database)."""
    cpu_seconds: float = 0.0
    """The process's own CPU time, user + system (``os.wait4``)."""
    first_turn: float | None = None
    """Process start to its first turn (``FIRST_TURN``), when the benchmark asked for it."""

    @property
    def after_startup(self) -> float | None:
        """Wall time without start-up: the run, writing its last rows, and the report."""
        return None if self.startup_seconds is None else self.wall - self.startup_seconds


def measure(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> Measure:
    """Run a command to completion: wall time and the child's own peak RSS (``os.wait4``, not all children)."""
    started = time.perf_counter()
    spawned_at = time.time()
    # as installed: bytecode written and read (PYTHONDONTWRITEBYTECODE in the caller's shell would make every
    # changed module compile again in every measured run)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    process = subprocess.Popen(command, cwd=cwd, env={**environ, **(env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(name, stream))
               for name, stream in (("out", process.stdout), ("err", process.stderr))]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    for reader in readers:
        reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Measure(wall, usage.ru_maxrss / 1024, process.returncode,
                   chunks.get("out", b"").decode(errors="replace"), chunks.get("err", b"").decode(errors="replace"),
                   spawned_at=spawned_at, cpu_seconds=usage.ru_utime + usage.ru_stime)


def run_evalcli(dataset: Path, *, extra_args: list[str] | None = None, profile: Path | None = None,
                quiet: bool = True, backend: str = "auto", env: dict[str, str] | None = None,
                scorers: Path | None = None) -> Measure:
    """Run the real ``evalcli run`` CLI (``--quiet`` unless asked, a fresh ``--db`` in a temporary folder) with
    ``EVALCLI_LLM_BACKEND=backend``; ``{tmp}`` in ``extra_args`` is that temporary folder."""
    with tempfile.TemporaryDirectory(prefix="evalcli-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        prefix = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
        command = [*prefix, "-m", "evalcli", "run", str(dataset), "--db", str(db),
                   "--scorers", str(scorers or BENCH / "scorers.yaml"),
                   *(["--quiet"] if quiet else []), *(a.replace("{tmp}", tmp) for a in extra_args or [])]
        result = measure(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key",
                                                 "EVALCLI_LLM_BACKEND": backend, **(env or {})})
        record_run_times(result, db)
    return result


FIRST_TURN = "EVALCLI_BENCH_FIRST_TURN"
"""A file the benchmark's targets (and the floor) write ``time.time()`` of their process's first turn to."""


def first_turn_at(path: str | None) -> None:
    """Write the time of this process's first turn to ``path`` (the first call only; nothing without a path)."""
    if path and not _first_written:
        _first_written.append(True)
        Path(path).write_text(repr(time.time()), encoding="utf-8")


_first_written: list[bool] = []


def with_first_turn(run: Any) -> Measure:
    """``run(env)`` (a measured process) with ``FIRST_TURN`` set, and its ``first_turn`` read back."""
    with tempfile.TemporaryDirectory(prefix="evalcli-first-") as folder:
        path = Path(folder) / "first"
        result: Measure = run({FIRST_TURN: str(path)})
        if path.exists():
            result.first_turn = float(path.read_text(encoding="utf-8")) - result.spawned_at
    return result


def load_average() -> str:
    """The machine's 1, 5 and 15-minute load averages, for the figures beside them."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def record_run_times(result: Measure, db: Path) -> None:
    """The run's own seconds and the start-up before it, read from the run stored in ``db``."""
    times = _run_times(db)
    if times is not None:
        started, finished = times
        result.run_seconds = finished - started
        result.startup_seconds = started - result.spawned_at


def _run_times(db: Path) -> tuple[float, float] | None:
    """(started, finished) of the run stored in ``db``, as epoch seconds."""
    import sqlite3
    from datetime import datetime

    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT started_at, finished_at FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    if not row or not row[1]:
        return None
    return datetime.fromisoformat(row[0]).timestamp(), datetime.fromisoformat(row[1]).timestamp()


@contextmanager
def model_server(command: list[str], what: str) -> Iterator[str]:
    """A loopback model server run as ``command`` (it prints ``PORT <n>`` once it listens); yields its base URL."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit(f"{what} did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)
