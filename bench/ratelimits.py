"""Benchmark section ``ratelimits``: adaptive concurrency against a provider's rate limit (docs/budgets.md).

A loopback OpenAI-compatible server allows ``--allowed`` calls in flight (8); a call above that is answered at
once with a 429 and ``Retry-After`` (``retry-after-ms`` too, as OpenAI sends it). N single-turn conversations
of a ``model`` target (one call each, answered after ``--latency``) are run at concurrency 8 (what the
provider allows: no 429 at all) and at concurrency 64 (evalcli halves its calls in flight on each round of
429s and settles under the limit). Target: the run at 64 finishes within 15% of the run at 8, with no error.

Run alone: ``python bench/ratelimits.py [--n 600] [--latency 0.1] [--allowed 8] [--retry-after 0.2]`` or as the
``ratelimits`` section of ``bench/run.py``; ``python bench/ratelimits.py --serve`` is the server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import BENCH, OUT, ROOT, Measure, load_average, measure, model_server

MODEL = "openai/bench-limited"


def serve(latency: float, allowed: int, retry_after: float) -> None:
    from aiohttp import web

    from bench.openai_server import serve as serve_handler

    state = {"now": 0, "calls": 0, "rejected": 0}

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state["calls"] += 1
        if state["now"] >= allowed:
            state["rejected"] += 1
            return web.json_response({"error": {"message": "Rate limit reached", "type": "requests"}}, status=429,
                                     headers={"Retry-After": f"{retry_after:g}",
                                              "retry-after-ms": f"{retry_after * 1000:g}"})
        state["now"] += 1
        try:
            await asyncio.sleep(latency)
        finally:
            state["now"] -= 1
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        return web.json_response({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"ok: {users[-1] if users else ''}"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
            "x_calls": state["calls"], "x_rejected": state["rejected"],
        })

    serve_handler(completions, latency)


def write_dataset(n: int, concurrency: int, api_base: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"ratelimits-{n}-c{concurrency}.jsonl"
    header = {"target": {"model": MODEL, "api_base": api_base}, "concurrency": concurrency,
              "scorers": ["bench-no-error"]}
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for i in range(n):
            out.write(json.dumps({"id": f"r{i}", "input": f"question {i}"}) + "\n")
    return path


def run(n: int, concurrency: int, api_base: str) -> tuple[Measure, dict[str, int]]:
    """``evalcli run`` at ``concurrency`` (fresh database); its wall and the calls the server saw."""
    dataset = write_dataset(n, concurrency, api_base)
    with tempfile.TemporaryDirectory(prefix="evalcli-bench-rl-") as tmp:
        db = Path(tmp) / "bench.db"
        command = [sys.executable, "-m", "evalcli", "run", str(dataset), "--db", str(db), "--quiet",
                   "--scorers", str(BENCH / "scorers.yaml")]
        result = measure(command, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key",
                                                 "NO_PROXY": "127.0.0.1,localhost"})
        if result.exit_code != 0:
            raise SystemExit(f"evalcli run at concurrency {concurrency} failed (exit {result.exit_code}):\n"
                             f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
        import sqlite3

        with sqlite3.connect(db) as conn:
            calls = conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
            errors = conn.execute("SELECT errors FROM runs").fetchone()[0]
    return result, {"calls": int(calls), "errors": int(errors)}


def section(n: int, latency: float, allowed: int, retry_after: float, repeat: int = 1) -> float:
    """Both runs (the fastest of ``repeat`` each), printed; returns the ratio of their walls."""
    command = [sys.executable, str(BENCH / "ratelimits.py"), "--serve", "--latency", str(latency),
               "--allowed", str(allowed), "--retry-after", str(retry_after)]
    rows = []
    with model_server(command, "the rate-limited model server") as api_base:
        for concurrency in (allowed, 64):
            results = [run(n, concurrency, api_base) for _ in range(max(1, repeat))]
            rows.append((concurrency, *min(results, key=lambda r: r[0].wall)))
    ideal = n * latency / allowed
    print(f"\nRate limits (docs/budgets.md): {n} conversations, one call each ({latency * 1000:g} ms), against a loopback server "
          f"allowing {allowed} in flight (429 with Retry-After {retry_after:g} s above it; load average "
          f"{load_average()})")
    print(f"  {'concurrency':>11}  {'wall s':>7}  {'ideal s':>7}  {'calls stored':>12}  {'errors':>6}")
    for concurrency, result, seen in rows:
        print(f"  {concurrency:>11}  {result.wall:>7.2f}  {ideal:>7.2f}  {seen['calls']:>12}  {seen['errors']:>6}")
    ratio = rows[1][1].wall / rows[0][1].wall
    print(f"  wall at 64 / wall at {allowed}: {ratio:.3f} (target <= 1.15)")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="be the server (prints PORT <n>)")
    parser.add_argument("--n", type=int, default=600, help="conversations per run")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per answered call")
    parser.add_argument("--allowed", type=int, default=8, help="calls in flight the server allows")
    parser.add_argument("--retry-after", type=float, default=0.2, help="the 429's Retry-After, seconds")
    parser.add_argument("--repeat", type=int, default=1, help="measure each run K times, keep the fastest")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.allowed, args.retry_after)
        return
    section(args.n, args.latency, args.allowed, args.retry_after, args.repeat)


if __name__ == "__main__":
    main()
