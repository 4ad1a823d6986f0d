"""``make bench``: evalcli's throughput, overhead and memory, against the ideal and against Mastra's runEvals.

Every figure comes from the real ``evalcli run`` CLI in a subprocess (``--quiet``, a fresh ``--db``),
on generated JSONL datasets of N conversations x T turns with check-only gates and scorers:

1. throughput against a target with a fixed latency (``asyncio.sleep``), and against a loopback
   OpenAI-compatible server with the same latency, called through evalcli's LLM client on both backends
   (its own Chat Completions client, and litellm); efficiency = ideal / wall where
   ideal = N*T*latency/concurrency (wall includes start-up, loading and the final report);
2. overhead per turn with a zero-latency target (SQLite writes included);
3. peak RSS of a 20,000-conversation run (and of a 10x smaller one, to show it stays flat);
   and docs/targets/http.md ``http`` target against a loopback agent endpoint (bench/agent_server.py), with evalcli's
   CPU per turn and its floor: aiohttp's own CPU per request beside evalcli's http session (``bench/http_floor.py``);
4. Mastra's ``runEvals`` (Node, ``@mastra/core`` from npm, installed into ``bench/mastra/node_modules``
   on first use) on the identical workload, with evalcli/Mastra wall-time ratios; and docs/targets/http.md ``mastra``
   target against the real Mastra server of tests/mastra/ (its own CPU shown apart);
5. the HTML report of a stored 1,000 x 3 run: time to write it, its size, and its load time in headless
   Chromium (``bench/report.py``);
6. simulated users (``bench/simulate.py``): simulator and agent each one model call per turn to a loopback
   server, against the serial turn chain of each conversation, on both backends;
7. the framework adapters' overhead: each framework's agent played directly and through evalcli's adapter (with a
   per-conversation setup, and continue_with for the Agents SDK) on the same loopback server (``bench/adapters.py``),
   both walls and their ratio;
8. the pytest plugin (``bench/pytest_plugin.py``): what it adds to an unrelated suite's start-up, and a dataset of
   8 conversations of 1 s at concurrency 4 played under pytest;
9. repeated judging (``bench/samples.py``): recorded conversations judged with ``samples: 1`` and ``samples: 3``,
   against N x samples x latency / judge concurrency;
10. docs/models.md (``bench/llm_bench.py``): CPU per LLM call on each backend (``cpu``), a judge's start-up cost
    (``judge``), and whole runs from a YAML file with start-up taken as a 1-conversation run's wall (``yaml``);
11. rate limits (``bench/ratelimits.py``, docs/budgets.md): against a server allowing 8 calls in flight (429 above), a run
    at concurrency 64 against one at 8, their walls and ratio;
12. docs/hermetic.md (``bench/tools.py``): CPU per tool call of the tool plan's wrapper (no plan, live, mocked) and of a
    LangGraph ToolNode with and without it (``tools``).
13. the per-turn floor (``bench/floor.py``, ``floor``): evalcli's marginal CPU per turn at zero latency beside bare
    asyncio writing the same rows, and both whole-run efficiencies at the run's latency.

Usage: ``python bench/run.py [--quick] [--sizes 1000x3,3000x3] [--latency 0.05] [--concurrency 64]
[--only startup,sleep,http,zero,memory,mastra,report,simulate,adapters,pytest,samples,cpu,judge,yaml,ratelimits,tools,floor]
[--mastra-sizes 100x3,1000x3] [--mastra-target-sizes 100x3,1000x3,3000x3]
[--report-size 1000x3] [--simulate-cases 256x8@0.05,128x8@0.5] [--adapter-size 1000x3] [--adapter-concurrency 32]
[--adapter-repeat 3] [--judge-size 1000] [--judge-latency 1.0] [--judge-concurrency 16] [--cpu-calls 2000]
[--yaml-sizes 3000x3,10000x3] [--backends auto,litellm] [--ratelimit-size 600] [--repeat K]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import floor, http_floor, llm_bench, pytest_plugin, ratelimits, samples, simulate, tools
from bench.report import report_section
from bench.workload import BENCH, Measure, Workload, load_average, measure, model_server, run_evalcli, write_dataset

MASTRA = BENCH / "mastra"
SECTIONS = ("startup", "sleep", "http", "zero", "memory", "mastra", "report", "simulate", "adapters", "pytest",
            "samples", "cpu", "judge", "yaml", "ratelimits", "tools", "floor")
BACKEND_NAMES = llm_bench.BACKEND_NAMES
FRAMEWORKS = ("pydantic_ai", "openai_agents", "langgraph", "smolagents")


@dataclass
class Row:
    """One line of a results table."""

    case: str
    work: Workload
    result: Measure

    @property
    def conversations_per_second(self) -> float:
        return self.work.n / self.result.wall

    @property
    def efficiency(self) -> float | None:
        return self.work.ideal / self.result.wall if self.work.latency else None

    @property
    def run_efficiency(self) -> float | None:
        run = self.result.run_seconds
        return self.work.ideal / run if self.work.latency and run else None

    @property
    def efficiency_after_startup(self) -> float | None:
        """Ideal over the wall time without start-up (the run, its last writes and the report)."""
        rest = self.result.after_startup
        return self.work.ideal / rest if self.work.latency and rest else None


def sizes(text: str) -> list[tuple[int, int]]:
    """``1000x3,3000x3`` -> [(1000, 3), (3000, 3)]."""
    out = []
    for part in text.split(","):
        n, _, t = part.strip().lower().partition("x")
        out.append((int(n), int(t or 1)))
    return out


def best(runs: int, once: Callable[[], Measure]) -> Measure:
    """The fastest of ``runs`` measurements (the machine's noise only ever adds time)."""
    results = [once() for _ in range(max(1, runs))]
    return min(results, key=lambda m: m.wall)


def check(result: Measure, what: str) -> Measure:
    if result.exit_code != 0:
        raise SystemExit(f"{what} failed (exit {result.exit_code}):\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return result


def evalcli_row(case: str, work: Workload, repeat: int, api_base: str | None = None, backend: str = "auto") -> Row:
    dataset = write_dataset(work, api_base)
    result = best(repeat, lambda: check(run_evalcli(dataset, backend=backend), f"evalcli run {dataset.name}"))
    return Row(case, work, result)


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    sys.stdout.flush()


def throughput_table(title: str, rows: list[Row]) -> None:
    print_table(title, ["case", "conv x turns", "conc", "latency", "ideal s", "wall s", "start-up s", "run s",
                        "conv/s", "peak RSS MB", "efficiency", "excl. start-up", "(run only)"],
                [[r.case, r.work.name, str(r.work.concurrency), f"{r.work.latency * 1000:g} ms", fmt(r.work.ideal),
                  fmt(r.result.wall), fmt(r.result.startup_seconds), fmt(r.result.run_seconds),
                  f"{r.conversations_per_second:.0f}", f"{r.result.peak_rss_mb:.0f}", fmt(r.efficiency, 3),
                  fmt(r.efficiency_after_startup, 3), fmt(r.run_efficiency, 3)] for r in rows])


def openai_server(latency: float) -> AbstractContextManager[str]:
    """The loopback OpenAI-compatible server (a subprocess) answering after ``latency``; yields its base URL."""
    return model_server([sys.executable, str(BENCH / "openai_server.py"), "--latency", str(latency)],
                        "the benchmark's OpenAI-compatible server")


# -- sections ------------------------------------------------------------------------------------


def startup_section(args: argparse.Namespace) -> None:
    command = [shutil.which("evalcli") or sys.executable, *([] if shutil.which("evalcli") else ["-m", "evalcli"]), "--help"]
    result = best(5, lambda: check(measure(command, cwd=BENCH), "evalcli --help"))
    print(f"\nStart-up: 'evalcli --help' {result.wall:.3f} s (best of 5; target < 0.5 s), peak RSS "
          f"{result.peak_rss_mb:.0f} MB; litellm is never imported by --help or check-only runs "
          "(tests/test_startup.py)")


def sleep_section(args: argparse.Namespace) -> list[Row]:
    rows = [evalcli_row("sleep", Workload(n, t, args.latency, args.concurrency), args.repeat)
            for n, t in sizes(args.sizes)]
    throughput_table(f"evalcli run, async target sleeping {args.latency * 1000:g} ms per turn", rows)
    print("  target: efficiency excluding start-up >= 0.95 at 3000x3, concurrency 64 (start-up: process start to the "
          "run's start, i.e. imports, validation and opening the database)")
    cpu_by_size(rows, args)
    return rows


def cpu_by_size(rows: list[Row], args: argparse.Namespace) -> None:
    """evalcli's CPU per turn at each size: the run's process CPU less a 1-conversation run's of the same shape
    (start-up), over its turns. Flat across sizes when nothing done per conversation grows with the dataset."""
    shapes = {(r.work.turns, r.work.latency, r.work.concurrency) for r in rows}
    one = {shape: best(args.repeat, lambda s=shape: check(run_evalcli(write_dataset(Workload(1, *s))), "evalcli run"))
           for shape in shapes}
    cells = []
    for r in rows:
        start = one[(r.work.turns, r.work.latency, r.work.concurrency)].cpu_seconds
        cells.append(f"{r.work.name} {(r.result.cpu_seconds - start) / (r.work.n * r.work.turns) * 1000:.3f}")
    print(f"  evalcli CPU per turn, ms (start-up, a 1-conversation run's CPU, excluded; load average {load_average()}): "
          + ", ".join(cells) + " (target: flat, <= 0.1 ms)")


def http_section(args: argparse.Namespace) -> list[Row]:
    with openai_server(args.latency) as api_base:
        rows = [evalcli_row(BACKEND_NAMES[backend], Workload(n, t, args.latency, args.concurrency, target="http"),
                            args.repeat, api_base, backend)
                for n, t in sizes(args.http_sizes) for backend in args.backends.split(",")]
    throughput_table(f"evalcli run, target calling a loopback OpenAI-compatible server ({args.latency * 1000:g} ms) "
                     f"through evalcli's LLM client, on each backend (load average {load_average()})", rows)
    agent = [sys.executable, str(BENCH / "agent_server.py"), "--latency", str(args.latency)]
    with model_server(agent, "the benchmark's agent endpoint") as base:
        targets = [evalcli_row("http target", Workload(n, t, args.latency, args.concurrency, target="http-target"),
                               args.repeat, base.removesuffix("/v1")) for n, t in sizes(args.http_sizes)]
    throughput_table(f"evalcli run, target: {{http: ...}} (docs/targets/http.md) against a loopback agent endpoint "
                     f"(bench/agent_server.py) answering after {args.latency * 1000:g} ms", targets)
    ends = [targets[0].work, targets[-1].work]
    sleeping = [evalcli_row("sleep", Workload(w.n, w.turns, w.latency, w.concurrency), args.repeat) for w in ends]
    base = cpu_per_turn("sleep target (the same sizes, for comparison)", sleeping, "no HTTP at all")
    cpu_per_turn("http target", targets, "the agent endpoint's own CPU is not counted: it is another process", base)
    http_floor.report(args.latency, args.concurrency, base)
    return rows + targets


def cpu_per_turn(case: str, rows: list[Row], note: str, base: float | None = None) -> float | None:
    """The evalcli process's CPU per turn between the smallest and the largest case (start-up cancels out);
    with ``base`` (the same for a target without HTTP), also the difference: what the HTTP turn itself costs."""
    if len(rows) < 2:
        return None
    small, big = rows[0], rows[-1]
    turns = big.work.n * big.work.turns - small.work.n * small.work.turns
    if turns <= 0:  # one size only (--quick): no marginal to take
        return None
    marginal = (big.result.cpu_seconds - small.result.cpu_seconds) / turns * 1000
    own = f"; the HTTP request itself {marginal - base:.3f} ms of it" if base is not None else ""
    print(f"  {case}: evalcli CPU per turn {marginal:.3f} ms ({small.work.name} -> {big.work.name}, start-up excluded, "
          f"SQLite writes and scoring included{own}; target <= 0.5 ms); {note}")
    if big.work.latency:
        print(f"  {case}: efficiency excluding start-up at {big.work.name}: {fmt(big.efficiency_after_startup, 3)} "
              "(target >= 0.95)")
    return marginal


def zero_section(args: argparse.Namespace) -> None:
    (small_n, turns), (big_n, _) = sizes(args.zero_sizes)
    small = evalcli_row("zero", Workload(small_n, turns, 0.0, args.concurrency), args.repeat)
    big = evalcli_row("zero", Workload(big_n, turns, 0.0, args.concurrency), args.repeat)
    rows = []
    for row in (small, big):
        turns_total = row.work.n * row.work.turns
        run = row.result.run_seconds or row.result.wall
        rows.append([row.work.name, fmt(row.result.wall), fmt(run), f"{row.conversations_per_second:.0f}",
                     f"{row.result.wall / turns_total * 1000:.3f}", f"{run / turns_total * 1000:.3f}",
                     f"{row.result.peak_rss_mb:.0f}"])
    marginal = (big.result.wall - small.result.wall) / ((big.work.n - small.work.n) * turns) * 1000
    print_table(f"Overhead with a zero-latency target (concurrency {args.concurrency}; SQLite writes included)",
                ["conv x turns", "wall s", "run s", "conv/s", "ms/turn (wall)", "ms/turn (run)", "peak RSS MB"], rows)
    print(f"  marginal cost per turn ({small.work.name} -> {big.work.name}, start-up excluded): {marginal:.3f} ms "
          f"(target <= 0.15 ms, SQLite writes included); start-up + load + report of a tiny run: "
          f"{small.result.wall:.2f} s")


def memory_section(args: argparse.Namespace) -> None:
    big_n, turns = sizes(args.memory_size)[0]
    rows = [evalcli_row("--quiet", Workload(n, turns, 0.0, args.concurrency), 1) for n in (big_n // 10, big_n)]
    big = rows[1].work
    rows.append(Row("full report", big, check(run_evalcli(write_dataset(big), quiet=False), "evalcli run (report)")))
    print_table("Memory: peak RSS of the evalcli process (zero-latency target)",
                ["conv x turns", "output", "wall s", "conv/s", "peak RSS MB"],
                [[r.work.name, r.case, fmt(r.result.wall), f"{r.conversations_per_second:.0f}",
                  f"{r.result.peak_rss_mb:.0f}"] for r in rows])
    print(f"  {big.n} conversations: {rows[1].result.peak_rss_mb:.0f} MB quiet, {rows[2].result.peak_rss_mb:.0f} MB "
          f"with the terminal report (target < 300 MB); 10x fewer: {rows[0].result.peak_rss_mb:.0f} MB")


def mastra_ready() -> str | None:
    """None when Mastra can run, else why not (Node missing, npm install failed)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node/npm not found on PATH"
    if not (MASTRA / "node_modules" / "@mastra" / "core").is_dir():
        print("\ninstalling @mastra/core, @mastra/evals and the AI SDK into bench/mastra/node_modules (npm) ...",
              flush=True)
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=MASTRA,
                              capture_output=True, text=True)
        if done.returncode != 0:
            return f"npm install failed: {(done.stderr or done.stdout).strip()[-500:]}"
    return None


def run_mastra(work: Workload, api_base: str | None) -> Measure:
    command = ["node", str(MASTRA / "run.mjs"), "--n", str(work.n), "--turns", str(work.turns),
               "--latency", str(work.latency), "--concurrency", str(work.concurrency),
               "--model", work.target, *(["--api-base", api_base] if api_base else [])]
    result = check(measure(command, cwd=MASTRA), f"Mastra runEvals {work.name}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    if figures.get("verdict") != "passed" or figures.get("totalItems") != work.n:
        raise SystemExit(f"Mastra runEvals did not pass every item: {figures}")
    result.run_seconds = figures["runSeconds"]
    return result


def mastra_section(args: argparse.Namespace) -> None:
    why = mastra_ready()
    if why:
        print(f"\nMastra comparison skipped: {why}")
        return
    rows = []
    for target in ("sleep", "http"):
        server = openai_server(args.latency) if target == "http" else None
        api_base = server.__enter__() if server else None
        backends = args.backends.split(",") if target == "http" else ["auto"]
        try:
            for n, t in sizes(args.mastra_sizes):
                work = Workload(n, t, args.latency, args.concurrency, target=target, tools=False)
                theirs = best(args.repeat, lambda w=work, a=api_base: run_mastra(w, a))
                for backend in backends:
                    ours = evalcli_row(target, work, args.repeat, api_base, backend).result
                    rows.append([target, BACKEND_NAMES[backend] if target == "http" else "-", work.name,
                                 str(work.concurrency), f"{work.latency * 1000:g} ms", fmt(work.ideal),
                                 fmt(ours.wall), fmt(theirs.wall), f"{ours.wall / theirs.wall:.2f}",
                                 fmt(ours.run_seconds), fmt(theirs.run_seconds),
                                 f"{(ours.run_seconds or ours.wall) / theirs.run_seconds:.2f}",
                                 f"{ours.peak_rss_mb:.0f}", f"{theirs.peak_rss_mb:.0f}"])
        finally:
            if server:
                server.__exit__(None, None, None)
    print_table("evalcli vs Mastra runEvals (@mastra/core on Node " + _node_version() + "), identical workload; "
                f"ratio < 1 means evalcli is faster (load average {load_average()})",
                ["model", "evalcli backend", "conv x turns", "conc", "latency", "ideal s", "evalcli s", "Mastra s",
                 "ratio", "evalcli run s", "Mastra run s", "run ratio", "evalcli MB", "Mastra MB"], rows)
    print("  wall = whole process (start-up, imports, run, report); run = runEvals() call / evalcli's run phase")
    mastra_target_table(args)


def mastra_target_table(args: argparse.Namespace) -> None:
    """evalcli's ``mastra`` target (docs/targets/http.md) against the real Mastra server of tests/mastra/ (a Memory on LibSQL, a
    tool, a mock model answering after ``latency / 2`` per call: two calls per turn, so ``latency`` per reply)."""
    from tests.mastra_server import MastraServer, Unavailable

    rows, server_cpu = [], []
    try:
        with MastraServer(latency=args.latency / 2) as server:
            for n, t in sizes(args.mastra_target_sizes):
                before = server.cpu_seconds
                work = Workload(n, t, args.latency, args.concurrency, target="mastra-target")
                rows.append(evalcli_row("mastra target", work, 1, server.url))
                server_cpu.append(server.cpu_seconds - before)
    except Unavailable as exc:
        print(f"\nmastra target skipped: {exc}")
        return
    throughput_table(f"evalcli run, target: {{mastra: ...}} (docs/targets/http.md) against the real Mastra server "
                     f"(@mastra/core, Memory on LibSQL; {args.latency * 1000:g} ms per reply)", rows)
    for row, cpu in zip(rows, server_cpu, strict=True):
        turns = row.work.n * row.work.turns
        print(f"  Mastra server's own CPU at {row.work.name}: {cpu:.2f} s ({cpu / turns * 1000:.2f} ms per turn), "
              f"evalcli's {row.result.cpu_seconds:.2f} s")
    cpu_per_turn("mastra target", rows, "the Mastra server's CPU is shown apart above")


def _node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def adapters_section(args: argparse.Namespace) -> None:
    (n, turns), = sizes(args.adapter_size)
    rows = []
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    with model_server([sys.executable, str(BENCH / "adapters.py"), "--serve"], "the adapters' model server") as api_base:
        for framework in FRAMEWORKS:
            command = [sys.executable, str(BENCH / "adapters.py"), "--framework", framework, "--api-base", api_base,
                       "--n", str(n), "--turns", str(turns), "--concurrency", str(args.adapter_concurrency),
                       "--repeat", str(args.adapter_repeat)]
            result = check(measure(command, cwd=BENCH.parent, env={"OPENAI_AGENTS_DISABLE_TRACING": "1"}),
                           f"adapter benchmark ({framework})")
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            direct, adapter = figures["direct"], figures["adapter"]
            direct_cpu, adapter_cpu = figures["direct_cpu"], figures["adapter_cpu"]
            rows.append([framework, f"{n}x{turns}", str(args.adapter_concurrency), fmt(direct), fmt(adapter),
                         f"{adapter / direct:.3f}", fmt(direct_cpu), fmt(adapter_cpu), f"{adapter_cpu / direct_cpu:.3f}",
                         f"{(adapter_cpu - direct_cpu) / (n * turns) * 1000:+.3f}"])
    load_after = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print_table("Framework adapters: the same agent object played directly and through evalcli's adapter (one "
                "loopback model server, a get_weather call per turn; interleaved batches, fastest of "
                f"{args.adapter_repeat} round{'s' if args.adapter_repeat > 1 else ''}; load average before: "
                f"{load_before}, after: {load_after})",
                ["framework", "conv x turns", "conc", "direct s", "adapter s", "ratio", "direct CPU s", "adapter CPU s",
                 "CPU ratio", "CPU ms/turn added"], rows)
    print("  ratio = adapter wall / direct wall (target <= 1.05); CPU = the agent process's own CPU time, which the "
          "machine's other load disturbs less; direct = the framework's own thread per conversation "
          "(message_history, SQLiteSession, checkpointer thread_id) and a fresh deps/context object; adapter = the "
          "same through evalcli with a per-conversation setup (and continue_with: last_agent for the Agents SDK)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes only: a smoke run of every section")
    parser.add_argument("--sizes", default="100x3,1000x3,3000x3,10000x3", help="sleep-target sizes, NxT,...")
    parser.add_argument("--http-sizes", default="100x3,1000x3,3000x3", help="HTTP-target sizes (each backend)")
    parser.add_argument("--zero-sizes", default="100x3,3000x3", help="two zero-latency sizes (small,big)")
    parser.add_argument("--memory-size", default="20000x3", help="the large run whose peak RSS is reported")
    parser.add_argument("--mastra-sizes", default="100x3,1000x3", help="sizes run on both evalcli and Mastra")
    parser.add_argument("--mastra-target-sizes", default="100x3,1000x3,3000x3",
                        help="sizes of evalcli's mastra target against the real Mastra server")
    parser.add_argument("--report-size", default="1000x3", help="the stored run whose HTML report is measured")
    parser.add_argument("--simulate-cases", default=simulate.DEFAULT_CASES,
                        help="simulated-user cases, NxT@latency,... (simulator and agent each take the latency)")
    parser.add_argument("--simulate-concurrency", type=int, default=32, help="conversations in flight (simulate)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per turn (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=64, help="conversations in flight (default 64)")
    parser.add_argument("--repeat", type=int, default=1, help="measure each case K times and keep the fastest")
    parser.add_argument("--adapter-size", default="1000x3", help="conversations x turns per adapter measurement")
    parser.add_argument("--adapter-concurrency", type=int, default=32, help="conversations in flight (adapters)")
    parser.add_argument("--adapter-repeat", type=int, default=1, help="adapters: rounds of both ways, fastest kept")
    parser.add_argument("--cpu-calls", type=int, default=2000, help="calls per CPU-per-call measurement (cpu)")
    parser.add_argument("--yaml-sizes", default="3000x3,10000x3", help="whole runs from a YAML file (yaml)")
    parser.add_argument("--backends", default="auto,litellm",
                        help="EVALCLI_LLM_BACKEND values measured side by side (http, mastra, simulate)")
    parser.add_argument("--judge-size", type=int, default=1000, help="recorded conversations judged (samples)")
    parser.add_argument("--judge-latency", type=float, default=1.0, help="seconds per judge call (samples)")
    parser.add_argument("--judge-concurrency", type=int, default=16, help="judge calls in flight (samples)")
    parser.add_argument("--ratelimit-size", type=int, default=600, help="conversations per run (ratelimits)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run: {','.join(SECTIONS)}")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.http_sizes, args.zero_sizes = "50x3,300x3", "50x3", "20x3,300x3"
        args.memory_size, args.mastra_sizes, args.report_size = "2000x3", "20x3", "200x3"
        args.mastra_target_sizes = "20x3,100x3"
        args.simulate_cases = "32x8@0.05"
        args.adapter_size, args.adapter_repeat = "100x3", 1
        args.cpu_calls, args.yaml_sizes = 300, "300x3"
        args.judge_size, args.judge_latency = 100, 0.2
        args.ratelimit_size = 200
    only = {s.strip() for s in args.only.split(",")}
    unknown = only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    started = time.perf_counter()
    print(f"evalcli benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"latency {args.latency * 1000:g} ms, concurrency {args.concurrency}; datasets in {BENCH / 'out'}")
    if "startup" in only:
        startup_section(args)
    if "sleep" in only:
        sleep_section(args)
    if "http" in only:
        http_section(args)
    if "zero" in only:
        zero_section(args)
    if "memory" in only:
        memory_section(args)
    if "mastra" in only:
        mastra_section(args)
    if "report" in only:
        report_section(sizes(args.report_size)[0], args.concurrency, args.repeat)
    if "simulate" in only:
        simulate.section(simulate.cases(args.simulate_cases), args.simulate_concurrency, args.repeat,
                         args.backends.split(","))
    if "adapters" in only:
        adapters_section(args)
    if "cpu" in only:
        llm_bench.cpu_section(args.cpu_calls, max(args.repeat, 1 if args.quick else 3))
    if "judge" in only:
        llm_bench.judge_section(1 if args.quick else max(args.repeat, 3))
    if "yaml" in only:
        llm_bench.yaml_section(sizes(args.yaml_sizes), args.latency, args.concurrency, max(args.repeat, 1))
    if "samples" in only:
        samples.section(args.judge_size, args.judge_latency, args.judge_concurrency, args.concurrency, [1, 3],
                        args.repeat)
    if "pytest" in only:
        pytest_plugin.section(max(5, args.repeat * 5))
    if "ratelimits" in only:
        ratelimits.section(args.ratelimit_size, 0.1, 8, 0.2, args.repeat)
    if "tools" in only:
        tools.section(20_000 if args.quick else 100_000, 500 if args.quick else 3_000, max(args.repeat, 3))
    if "floor" in only:
        floor.report(*((30, 300) if args.quick else (300, 3000)), repeat=max(args.repeat, 3), latency=args.latency,
                     concurrency=args.concurrency)
    print(f"\nbenchmark done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
