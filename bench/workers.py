"""``--workers N`` (docs/performance.md#workers): one run of a CPU-bound agent played by 1 and by N processes.

The agent spends 20 ms of its own CPU a turn (``bench.targets:cpu_agent``, a framework's Python work: it holds the
GIL, so one process plays on one core at most). Every figure is the real ``evalcli run`` CLI in a subprocess, a
fresh database each time; the wall of each worker count is the best of ``--repeat`` runs (the machine is shared:
the load average is printed beside each). The target: 2 workers take at most 0.55 of 1 worker's wall on 2 cores.

A second table plays a zero-latency agent, where the run's own process (reading the workers' results, folding
them, writing every row) is the bottleneck. CPU is that of every process of the run (``os.wait4``: the CLI and the
workers it waited for), start-up included.

Usage: ``python bench/workers.py [--size 400x3] [--cpu 0.02] [--workers 1,2] [--repeat 3] [--zero-size 4000x3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import Measure, Workload, load_average, run_evalcli, write_dataset


def play(work: Workload, workers: int, repeat: int) -> tuple[list[Measure], list[str]]:
    """``repeat`` runs of ``work`` with ``--workers workers`` and the load average after each."""
    found, loads = [], []
    for _ in range(repeat):
        result = run_evalcli(write_dataset(work), extra_args=["--workers", str(workers)])
        if result.exit_code != 0:
            raise SystemExit(f"evalcli run --workers {workers} exited {result.exit_code}:\n{result.stderr[-2000:]}")
        found.append(result)
        loads.append(load_average())
    return found, loads


def table(title: str, work: Workload, counts: list[int], repeat: int) -> dict[int, float]:
    print(f"\n{title}: {work.n} conversations x {work.turns} turns, concurrency {work.concurrency}, "
          f"{os.cpu_count()} cores")
    print(f"  {'workers':>7}  {'best wall s':>11}  {'median s':>8}  {'run s':>6}  {'CPU s (all)':>12}  "
          f"{'CPU ms/conv':>14}  load (1/5/15 min) per run")
    best: dict[int, float] = {}
    for workers in counts:
        runs, loads = play(work, workers, repeat)
        top = min(runs, key=lambda m: m.wall)
        best[workers] = top.wall
        print(f"  {workers:>7}  {top.wall:>11.2f}  {statistics.median(m.wall for m in runs):>8.2f}  "
              f"{top.run_seconds or 0:>6.2f}  {top.cpu_seconds:>12.2f}  {1000 * top.cpu_seconds / work.n:>14.3f}  "
              f"{', '.join(loads)}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="400x3", help="conversations x turns of the CPU-bound run")
    parser.add_argument("--cpu", type=float, default=0.02, help="CPU seconds the agent spends a turn")
    parser.add_argument("--workers", default="1,2", help="the worker counts to compare (the first is the base)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each count (the best wall is kept)")
    parser.add_argument("--zero-size", default="4000x3", help="the zero-latency run ('0': none)")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    n, turns = (int(x) for x in args.size.split("x"))
    work = Workload(n, turns, args.cpu, 4, target="cpu", tools=False)
    best = table(f"CPU-bound agent ({args.cpu * 1000:g} ms of CPU a turn)", work, counts, args.repeat)
    base = best[counts[0]]
    for workers in counts[1:]:
        print(f"  --workers {workers}: {best[workers] / base:.2f} of the {counts[0]}-worker wall (target <= 0.55 "
              "for 2 workers on 2 cores)")
    if args.zero_size != "0":
        n, turns = (int(x) for x in args.zero_size.split("x"))
        table("Zero-latency agent (the run's own process is the bottleneck)", Workload(n, turns, 0.0, 64,
              tools=False), counts, args.repeat)


if __name__ == "__main__":
    main()
