"""Benchmark section ``samples``: a judge asked N times (``samples: N``, docs/recorded.md) costs N calls at the same
concurrency, not N rounds.

N recorded conversations (no target is called: all of the run phase is judging), each scored by one
``multi_turn_judge`` (``openai/bench-judge`` through evalcli's LLM client) on a loopback server that answers a
verdict after a fixed latency. The same dataset runs with ``samples: 1`` and ``samples: 3`` (a fresh database
each time, so nothing comes from the cache), ``--judge-concurrency C``.

Ideal judge time = N x samples x latency / C. The check: the run phase with ``samples: 3`` within 1.2x of
three times the ``samples: 1`` ideal (N x 3 x latency / C), and its ratio to the measured ``samples: 1`` run x 3.

Run alone: ``python bench/samples.py [--n 1000] [--latency 0.25] [--judge-concurrency 16] [--samples 1,3]``, or
as the ``samples`` section of ``bench/run.py``; ``python bench/samples.py --serve`` is the server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import OUT, ROOT, Measure, measure, model_server, record_run_times

JUDGE_MODEL = "openai/bench-judge"


@dataclass(frozen=True)
class JudgeWorkload:
    n: int
    samples: int
    latency: float
    judge_concurrency: int
    concurrency: int

    @property
    def ideal(self) -> float:
        """Seconds a perfect runner needs: every judge call's latency, ``judge_concurrency`` at a time."""
        return self.n * self.samples * self.latency / self.judge_concurrency


def write_dataset(work: JudgeWorkload, api_base: str) -> Path:
    """A JSONL dataset without a target: a header with the judge, then one recorded conversation a line."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"samples-{work.n}-s{work.samples}.jsonl"
    judge = {"criterion": "The assistant gave a forecast.", "model": JUDGE_MODEL, "api_base": api_base,
             "samples": work.samples}
    header = {"concurrency": work.concurrency, "scorers": [{"scorer": {"judge": judge}, "id": "judge"}]}
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for i in range(work.n):
            messages = [{"role": "user", "content": f"Conversation {i}: the weather in Brooklyn?"},
                        {"role": "assistant", "content": f"Conversation {i}: sunny and 21°C in Brooklyn."}]
            out.write(json.dumps({"id": f"r{i}", "messages": messages}) + "\n")
    return path


def run(work: JudgeWorkload, api_base: str) -> Measure:
    dataset = write_dataset(work, api_base)
    with tempfile.TemporaryDirectory(prefix="evalcli-bench-samples-") as tmp:
        db = Path(tmp) / "bench.db"
        command = [sys.executable, "-m", "evalcli", "run", str(dataset), "--db", str(db), "--quiet",
                   "--judge-concurrency", str(work.judge_concurrency)]
        result = measure(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key"})
        record_run_times(result, db)
        if result.exit_code == 0:
            import sqlite3

            conn = sqlite3.connect(db)
            try:
                calls, = conn.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'judge'").fetchone()
            finally:
                conn.close()
            if calls != work.n * work.samples:
                raise SystemExit(f"expected {work.n * work.samples} judge calls, the run made {calls}")
    if result.exit_code != 0:
        raise SystemExit(f"evalcli run (samples {work.samples}) failed (exit {result.exit_code}):\n{result.stderr[-4000:]}")
    return result


def server(latency: float) -> AbstractContextManager[str]:
    return model_server([sys.executable, __file__, "--serve", "--latency", str(latency)], "the judge benchmark's server")


def section(n: int, latency: float, judge_concurrency: int, concurrency: int, samples: list[int],
            repeat: int = 1) -> list[list[str]]:
    rows: list[list[str]] = []
    runs: dict[int, float] = {}
    with server(latency) as api_base:
        for count in samples:
            work = JudgeWorkload(n, count, latency, judge_concurrency, concurrency)
            best = min((run(work, api_base) for _ in range(max(1, repeat))), key=lambda r: r.run_seconds or r.wall)
            run_s = best.run_seconds or best.wall
            runs[count] = run_s
            one = JudgeWorkload(n, 1, latency, judge_concurrency, concurrency).ideal
            against_measured = f"{run_s / (count * runs[1]):.3f}" if 1 in runs else "-"
            rows.append([str(n), str(count), str(judge_concurrency), f"{latency * 1000:g} ms", f"{work.ideal:.2f}",
                         f"{best.wall:.2f}", f"{run_s:.2f}", f"{n * count / run_s:.0f}", f"{work.ideal / run_s:.3f}",
                         f"{run_s / (count * one):.3f}", against_measured])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = ["conversations", "samples", "judge conc", "latency", "ideal s", "wall s", "judge (run) s", "calls/s",
              "efficiency", "run / (samples x ideal 1)", "run / (samples x run 1)"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\nRepeated judging: one multi_turn_judge per recorded conversation ({JUDGE_MODEL} on a loopback server, no "
          f"target), --judge-concurrency {judge_concurrency}, concurrency {concurrency} (load average after: {load})")
    for line in (header, ["-" * w for w in widths], *rows):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    print("  target: samples 3 within 1.2x of samples: 1 x 3 / concurrency (run / (samples x ideal 1) <= 1.2)")
    sys.stdout.flush()
    return rows


def serve(latency: float) -> None:
    """Answer every chat completion after ``latency`` with a satisfied verdict."""
    from aiohttp import web

    from bench import openai_server

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency)
        content = json.dumps({"satisfied": True, "reasoning": f"seed {body.get('seed')}: a forecast was given."})
        return web.json_response({
            "id": "chatcmpl-bench-judge", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model", "bench")),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 180, "completion_tokens": 20, "total_tokens": 200}})

    openai_server.serve(completions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="be the loopback server")
    parser.add_argument("--n", type=int, default=1000, help="recorded conversations (default 1000)")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds before each verdict (default 0.25)")
    parser.add_argument("--judge-concurrency", type=int, default=16, help="judge calls in flight (default 16)")
    parser.add_argument("--concurrency", type=int, default=64, help="conversations in flight (default 64)")
    parser.add_argument("--samples", default="1,3", help="sample counts to compare (default 1,3)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return
    section(args.n, args.latency, args.judge_concurrency, args.concurrency,
            [int(s) for s in args.samples.split(",")], args.repeat)


if __name__ == "__main__":
    main()
