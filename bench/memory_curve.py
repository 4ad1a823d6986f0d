"""Peak resident memory of ``evalcli run`` against the number of conversations (docs/performance.md#memory).

Each size is one real ``evalcli run`` CLI in a subprocess (``--quiet``, a fresh database, a zero-latency target,
check-only scorers) on a generated JSONL ``data_file`` of N conversations x T turns; its peak RSS is the process's
own (``os.wait4``). The curve shows what memory grows with: the slope in KB per conversation between sizes.
Targets: under 150 MB at 20,000 conversations, under 300 MB at 100,000.

Usage: ``python bench/memory_curve.py [--sizes 2000,20000,100000] [--turns 3] [--workers 1]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import Workload, load_average, run_evalcli, write_dataset

TARGETS = {20_000: 150, 100_000: 300}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000", help="numbers of conversations, comma-separated")
    parser.add_argument("--turns", type=int, default=3, help="turns of each conversation")
    parser.add_argument("--workers", type=int, default=1, help="--workers of each run")
    args = parser.parse_args()
    print(f"{'conversations':>13}  {'turns':>5}  {'peak RSS MB':>11}  {'KB/conv (slope)':>15}  {'wall s':>7}  "
          f"{'CPU s':>6}  {'target MB':>9}  load")
    previous: tuple[int, float] | None = None
    for n in (int(x) for x in args.sizes.split(",")):
        result = run_evalcli(write_dataset(Workload(n, args.turns, 0.0, 64, tools=False)),
                             extra_args=["--workers", str(args.workers)])
        if result.exit_code != 0:
            raise SystemExit(f"evalcli run exited {result.exit_code}:\n{result.stderr[-2000:]}")
        slope = "" if previous is None else \
            f"{1024 * (result.peak_rss_mb - previous[1]) / (n - previous[0]):.2f}"
        target = TARGETS.get(n)
        print(f"{n:>13}  {args.turns:>5}  {result.peak_rss_mb:>11.0f}  {slope:>15}  {result.wall:>7.1f}  "
              f"{result.cpu_seconds:>6.1f}  {target or '':>9}  {load_average()}", flush=True)
        previous = (n, result.peak_rss_mb)


if __name__ == "__main__":
    main()
