"""``python bench/bigruns.py``: the read commands on two stored runs of 100,000 conversations each.

Two small runs of one dataset (20 conversations, two turns, a gate; the second agent fails some the first passed)
are made with the real CLI, then each is grown to ``--size`` conversations by copying its rows in SQL (new item
ids and identities, so the runs pair conversation by conversation as real ones do). Then each command is timed as a
whole process: wall seconds and its own peak RSS (``os.wait4``). Targets (docs/performance.md): each within 30 s
and 500 MB.

    python bench/bigruns.py                       # 100,000 conversations a run
    python bench/bigruns.py --size 20000 --keep /tmp/big   # keep the database
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import ROOT, Measure, measure
from tests.grown_runs import grow

SEED = 20
AGENT = """
import os

def answer(input, *, memory=None):
    n = int(input.split()[-1])
    sunny = os.environ.get("BIG_VARIANT") == "a" or n % 4 != 1
    return ("Sunny in Brooklyn, question " if sunny else "Rain, question ") + str(n)
"""


def seed_dataset(folder: Path) -> Path:
    (folder / "agent.py").write_text(AGENT)
    items = "".join(f"  - {{id: q{n}, inputs: ['hello {n}', 'weather {n}']}}\n" for n in range(SEED))
    (folder / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\n"
                                   "scorers: [{excludes: Rain}]\ndata:\n" + items)
    return folder / "d.yaml"


def _evalcli(args: list[str], folder: Path, env: dict[str, str] | None = None) -> Measure:
    return measure([sys.executable, "-m", "evalcli", *args], cwd=folder,
                   env={"PYTHONPATH": f"{ROOT}:{folder}", **(env or {})})


def make_runs(folder: Path, size: int) -> tuple[Path, str, str]:
    seed_dataset(folder)
    db = folder / "big.db"
    ids = []
    for variant in ("a", "b"):
        made = _evalcli(["run", "d.yaml", "--db", str(db), "--quiet", "--json", "-"], folder, {"BIG_VARIANT": variant})
        if made.exit_code not in (0, 1):
            raise SystemExit(made.stderr[-2000:])
        ids.append(__import__("json").loads(made.stdout)["run_id"])
    for run_id in ids:
        grow(db, run_id, SEED, size)
    return db, ids[0], ids[1]


def commands(db: Path, a: str, b: str, folder: Path) -> dict[str, list[str]]:
    d = ["--db", str(db)]
    return {
        "runs": ["runs", *d],
        "show RUN": ["show", b, *d],
        "show RUN ITEM": ["show", b, f"q5-{SEED * 2}", *d],
        "show -v": ["show", b, "-v", *d],
        "report --html": ["report", b, "--html", str(folder / "report.html"), *d],
        "diff": ["diff", a, b, *d],
        "compare": ["compare", a, b, *d],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="conversations a run")
    parser.add_argument("--keep", type=Path, help="make the database in this folder and keep it")
    parser.add_argument("--only", help="comma-separated command names to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalcli-bigruns-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        db, a, b = make_runs(folder, args.size)
        print(f"two runs of {args.size:,} conversations ({db.stat().st_size / 1e6:.0f} MB database)")
        for name, command in commands(db, a, b, folder).items():
            if args.only and name not in args.only.split(","):
                continue
            took = _evalcli(command, folder)
            extra = f", file {(folder / 'report.html').stat().st_size / 1e6:.1f} MB" if name == "report --html" else ""
            print(f"{name:16} {took.wall:6.1f} s  {took.cpu_seconds:6.1f} s CPU  {took.peak_rss_mb:6.0f} MB peak RSS  "
                  f"exit {took.exit_code}{extra}", flush=True)


if __name__ == "__main__":
    main()
