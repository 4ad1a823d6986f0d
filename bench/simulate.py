"""Benchmark section ``simulate``: simulated conversations (docs/simulated-users.md) against the serial turn chain.

N conversations of T turns each, every user message written by the simulator (``openai/bench-sim``) and
every reply by an agent making one model call per turn (``bench.targets:http_agent``), both through evalcli's
LLM client on the backend measured (its own Chat Completions client, or litellm with
``EVALCLI_LLM_BACKEND=litellm``); both reach one loopback OpenAI-compatible server that answers after a fixed
latency. The simulator's answer names how many messages it was sent, so no two user messages of a
conversation are the same (no loop stop) and each conversation runs to ``max_turns``.

Ideal wall = N x T x (simulator latency + agent latency) / concurrency: each conversation is a serial
chain of calls, ``concurrency`` chains at a time. Efficiency = ideal / wall (the whole process: start-up,
loading, the run and the report) and ideal / run (the run phase alone).

Run alone: ``python bench/simulate.py [--cases 256x8@0.05,128x8@0.5] [--concurrency 32] [--backends auto,litellm]``,
or as the ``simulate`` section of ``bench/run.py``; ``python bench/simulate.py --serve`` is the server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import BENCH, OUT, ROOT, Measure, load_average, measure, model_server, record_run_times

SIM_MODEL = "openai/bench-sim"
DEFAULT_CASES = "256x8@0.05,128x8@0.5"


@dataclass(frozen=True)
class SimWorkload:
    """N simulated conversations of T turns, each turn one simulator call and one agent call."""

    n: int
    turns: int
    latency: float
    concurrency: int

    @property
    def ideal(self) -> float:
        return self.n * self.turns * 2 * self.latency / self.concurrency

    @property
    def name(self) -> str:
        return f"{self.n}x{self.turns}"


def write_dataset(work: SimWorkload, api_base: str) -> Path:
    """A JSONL dataset: a header, then one ``simulate`` item a line."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"simulate-{work.name}-l{work.latency:g}-c{work.concurrency}.jsonl"
    header = {"target": "bench.targets:http_agent", "concurrency": work.concurrency,
              "target_options": {"latency": work.latency, "api_base": api_base},
              "gates": ["bench-called-weather"], "scorers": ["bench-mentions-brooklyn"]}
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for i in range(work.n):
            simulate = {"goal": f"Learn the weather in Brooklyn (conversation {i}).", "max_turns": work.turns,
                        "model": SIM_MODEL}
            out.write(json.dumps({"id": f"s{i}", "simulate": simulate}) + "\n")
    return path


def run(work: SimWorkload, api_base: str, backend: str = "auto") -> Measure:
    """``evalcli run`` on the workload (fresh database, so nothing comes from the cache) with ``EVALCLI_LLM_BACKEND``."""
    dataset = write_dataset(work, api_base)
    with tempfile.TemporaryDirectory(prefix="evalcli-bench-sim-") as tmp:
        db = Path(tmp) / "bench.db"
        command = [sys.executable, "-m", "evalcli", "run", str(dataset), "--db", str(db), "--quiet",
                   "--scorers", str(BENCH / "scorers.yaml")]
        result = measure(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key",
                                                 "OPENAI_API_BASE": api_base, "EVALCLI_LLM_BACKEND": backend})
        record_run_times(result, db)
        if result.exit_code == 0:
            result.stdout += _turns_played(db, work)
    return result


def _turns_played(db: Path, work: SimWorkload) -> str:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        simulated, = conn.execute("SELECT COUNT(*) FROM turns WHERE simulated = 1").fetchone()
        reasons = dict(conn.execute("SELECT stop_reason, COUNT(*) FROM items GROUP BY stop_reason").fetchall())
    finally:
        conn.close()
    if simulated != work.n * work.turns or reasons != {"max_turns": work.n}:
        raise SystemExit(f"expected {work.n * work.turns} simulated turns ending at max_turns; got {simulated}, "
                         f"{reasons}")
    return f"\n{simulated} simulated turns"


def server(latency: float) -> AbstractContextManager[str]:
    """The loopback server (a subprocess of this file); yields its base URL."""
    return model_server([sys.executable, __file__, "--serve", "--latency", str(latency)],
                        "the simulation benchmark's server")


def cases(text: str) -> list[SimWorkload]:
    """``256x8@0.05,128x8@0.5`` -> workloads (concurrency filled in by the caller)."""
    out = []
    for part in text.split(","):
        size, _, latency = part.strip().lower().partition("@")
        n, _, turns = size.partition("x")
        out.append(SimWorkload(int(n), int(turns or 8), float(latency or 0.05), 0))
    return out


BACKEND_NAMES = {"auto": "direct (evalcli)", "litellm": "litellm"}


def section(workloads: list[SimWorkload], concurrency: int, repeat: int = 1,
            backends: list[str] | None = None) -> list[list[str]]:
    """Measure each workload on each backend (best of ``repeat``), one loopback server per latency; print and
    return the rows."""
    rows = []
    for shape in workloads:
        work = SimWorkload(shape.n, shape.turns, shape.latency, concurrency)
        with server(work.latency) as api_base:
            for backend in backends or ["auto", "litellm"]:
                results = [run(work, api_base, backend) for _ in range(max(1, repeat))]
                failed = next((r for r in results if r.exit_code != 0), None)
                if failed is not None:
                    raise SystemExit(f"evalcli run (simulate {work.name}, {backend}) failed (exit {failed.exit_code}):\n"
                                     f"{failed.stderr[-4000:]}")
                best = min(results, key=lambda r: r.wall)
                run_s = best.run_seconds or best.wall
                calls = 2 * work.n * work.turns
                rows.append([work.name, BACKEND_NAMES.get(backend, backend), str(concurrency),
                             f"{work.latency * 1000:g}+{work.latency * 1000:g} ms", f"{work.ideal:.2f}",
                             f"{best.wall:.2f}", f"{run_s:.2f}", f"{calls / run_s:.0f}", f"{work.ideal / best.wall:.3f}",
                             f"{work.ideal / run_s:.3f}", f"{best.cpu_seconds:.1f}", f"{best.peak_rss_mb:.0f}"])
    _print(f"Simulated users: {SIM_MODEL} and an agent, each one call per turn to a loopback server through evalcli's "
           f"LLM client on each backend; ideal = serial turn chain per conversation (load average after: "
           f"{load_average()}); targets on the direct path: 256x8 at 50 ms >= 0.8, 128x8 at 500 ms >= 0.9", rows)
    return rows


def _print(title: str, rows: list[list[str]]) -> None:
    header = ["conv x turns", "backend", "conc", "sim+agent", "ideal s", "wall s", "run s", "calls/s", "efficiency",
              "(run only)", "CPU s", "peak RSS MB"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    for line in (header, ["-" * w for w in widths], *rows):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    sys.stdout.flush()


def serve(latency: float) -> None:
    """Answer every chat completion after ``latency`` with a text naming how many messages it was sent."""
    from aiohttp import web

    from bench import openai_server

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency)
        content = f"Message {len(body.get('messages') or [])}: what about Brooklyn?"
        return web.json_response({
            "id": "chatcmpl-bench-sim", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model", "bench")),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}})

    openai_server.serve(completions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="be the loopback server")
    parser.add_argument("--cases", default=DEFAULT_CASES, help=f"NxT@latency,... (default {DEFAULT_CASES})")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.05, help="with --serve: seconds before each answer")
    parser.add_argument("--backends", default="auto,litellm", help="EVALCLI_LLM_BACKEND values, side by side")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return
    section(cases(args.cases), args.concurrency, args.repeat, args.backends.split(","))


if __name__ == "__main__":
    main()
