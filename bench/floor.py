"""The per-turn floor: evalcli's CPU per turn beside bare asyncio doing the same work, measured in one benchmark run.

The floor is a process of its own (``python bench/floor.py --play DATASET DB``) that reads the same JSONL dataset,
plays every turn against the same reply (``bench.targets.reply``, after ``asyncio.sleep(latency)``), ``concurrency``
conversations at a time, applies the same three checks and writes the same rows (an item row, its turns and its
scores, their JSON texts) with sqlite3 ``executemany``, 256 conversations a transaction. Nothing of evalcli is
imported there. Both processes are measured the same way (``bench.workload.measure``: wall, and CPU seconds user +
system from ``os.wait4``), and the per-turn CPU is marginal, (CPU of the big run - CPU of the small) / the turns
between them, so start-up (the interpreter, imports, the database) drops out.

Run alone: ``python bench/floor.py [--small 300] [--big 3000] [--turns 3] [--repeat 3]``, or ``bench/run.py --only
floor``; ``--instructions`` counts instructions instead of CPU seconds (valgrind, a figure load does not
move). Figures and ratios are printed (docs/performance.md "Runs of many conversations"), never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import reply
from bench.workload import (
    FIRST_TURN,
    ROOT,
    Measure,
    Workload,
    first_turn_at,
    load_average,
    measure,
    run_evalcli,
    with_first_turn,
    write_dataset,
)

SCHEMA = """
CREATE TABLE items (run_id TEXT, item_index INTEGER, item_id TEXT, tags TEXT, form TEXT, status TEXT, passed INTEGER,
  thread_id TEXT, input TEXT, gate_scores TEXT, scores TEXT, outcomes TEXT, duration_ms REAL, finished_at TEXT,
  PRIMARY KEY (run_id, item_index));
CREATE TABLE turns (run_id TEXT, item_index INTEGER, item_id TEXT, turn_index INTEGER, input TEXT, output TEXT,
  thread_id TEXT, duration_ms REAL, passed INTEGER, gate_scores TEXT, scores TEXT, outcomes TEXT,
  PRIMARY KEY (run_id, item_index, turn_index));
CREATE TABLE scores (run_id TEXT, item_index INTEGER, turn_index INTEGER, scorer_id TEXT, role TEXT, score REAL,
  reason TEXT);
"""
BATCH = 256


def _checks(output: list[dict[str, Any]]) -> dict[str, float]:
    """The benchmark's three checks (bench/scorers.yaml) on one turn's messages."""
    calls = [c for m in output for c in m.get("tool_calls") or ()]
    text = " ".join(m.get("content") or "" for m in output if m.get("role") == "assistant")
    return {"bench-called-weather": float(any(c["function"]["name"] == "get_weather" for c in calls)),
            "bench-mentions-brooklyn": float("Brooklyn" in text), "bench-few-tool-calls": float(len(calls) <= 3)}


async def _play(dataset: Path, db: Path) -> None:
    lines = dataset.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    items = [json.loads(line) for line in lines[1:]]
    latency = float(header.get("target_options", {}).get("latency", 0.0))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    rows: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
    pending = 0
    loop = asyncio.get_running_loop()

    def flush() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO items VALUES ({', '.join('?' * 14)})", rows[0])
        conn.executemany(f"INSERT INTO turns VALUES ({', '.join('?' * 12)})", rows[1])
        conn.executemany("INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?, ?)", rows[2])
        conn.execute("COMMIT")
        for r in rows:
            r.clear()

    first = os.environ.get(FIRST_TURN)

    async def conversation(index: int, item: dict[str, Any]) -> None:
        nonlocal pending
        inputs = item.get("inputs") or [t["input"] for t in item["turns"]]
        thread = f"thread-{index}"
        passed = True
        for t, text in enumerate(inputs):
            if first:
                first_turn_at(first)
            started = loop.time()
            await asyncio.sleep(latency)
            output = reply(text)
            scores = _checks(output)
            ok = all(v >= 1 for v in scores.values())
            passed = passed and ok
            rows[1].append(("run", index, item["id"], t, text, json.dumps(output), thread,
                            (loop.time() - started) * 1000, int(ok), json.dumps(scores), json.dumps(scores),
                            json.dumps({k: {"score": v} for k, v in scores.items()})))
            rows[2].extend(("run", index, t, k, "scorer", v, None) for k, v in scores.items())
        rows[0].append(("run", index, item["id"], "[]", "inputs" if "inputs" in item else "turns", "ok", int(passed),
                        thread, inputs[0], "{}", "{}", "{}", 0.0, "now"))
        pending += 1
        if pending >= BATCH:
            pending = 0
            flush()

    queue = iter(enumerate(items))

    async def worker() -> None:
        for index, item in queue:
            await conversation(index, item)

    await asyncio.gather(*(worker() for _ in range(int(header.get("concurrency", 1)))))
    flush()
    conn.close()


def floor_process(dataset: Path, tmp: Path, env: dict[str, str] | None = None) -> Measure:
    db = tmp / "floor.db"
    db.unlink(missing_ok=True)
    return measure([sys.executable, str(Path(__file__).resolve()), "--play", str(dataset), str(db)], cwd=ROOT, env=env)


def _median(runs: list[Measure], key: str) -> float:
    return float(statistics.median(float(getattr(m, key)) for m in runs))


def _both(work: Workload, repeat: int, tmp: Path) -> tuple[list[Measure], list[Measure]]:
    """``repeat`` runs of the floor and of ``evalcli run --quiet`` on one workload, interleaved (the machine's load
    changes both alike)."""
    dataset = write_dataset(work)
    floors, evalclis = [], []
    for _ in range(repeat):
        floors.append(with_first_turn(lambda env: floor_process(dataset, tmp, env)))
        result = with_first_turn(lambda env: run_evalcli(dataset, env=env))
        if result.exit_code != 0:
            raise SystemExit(f"evalcli run failed ({result.exit_code}): {result.stderr[-2000:]}")
        evalclis.append(result)
    return floors, evalclis


def report(small: int = 300, big: int = 3000, turns: int = 3, repeat: int = 3, latency: float = 0.05,
           concurrency: int = 64) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="evalcli-floor-") as folder:
        tmp = Path(folder)
        before = load_average()
        cpu: dict[str, dict[int, float]] = {"floor": {}, "evalcli": {}}
        for n in (small, big):
            floors, evalclis = _both(Workload(n, turns, 0.0, concurrency), repeat, tmp)
            cpu["floor"][n], cpu["evalcli"][n] = _median(floors, "cpu_seconds"), _median(evalclis, "cpu_seconds")
        work = Workload(big, turns, latency, concurrency)
        floors, evalclis = _both(work, repeat, tmp)
        after = load_average()
    between = (big - small) * turns
    per_turn = {k: (v[big] - v[small]) / between * 1000 for k, v in cpu.items()}
    print(f"\nPer-turn CPU at zero latency and whole-run efficiency at {latency * 1000:g} ms (concurrency {concurrency}, "
          f"medians of {repeat}; load average {before} before, {after} after)")
    for who in ("floor", "evalcli"):
        print(f"  {who:8} CPU {small}x{turns} {cpu[who][small]:.2f} s, {big}x{turns} {cpu[who][big]:.2f} s -> "
              f"{per_turn[who]:.3f} ms per turn (marginal)")
    print(f"  ratio evalcli / floor: {per_turn['evalcli'] / per_turn['floor']:.2f}x (target <= 2x)")
    eff = {"floor": work.ideal / _median(floors, "wall"), "evalcli": work.ideal / _median(evalclis, "wall")}
    for who, runs in (("floor", floors), ("evalcli", evalclis)):
        print(f"  {who:8} {work.name} at {latency * 1000:g} ms: wall {_median(runs, 'wall'):.2f} s (ideal "
              f"{work.ideal:.2f} s), CPU {_median(runs, 'cpu_seconds'):.2f} s, whole-run efficiency {eff[who]:.3f}; "
              f"start to first turn {_median(runs, 'first_turn'):.2f} s")
    print(f"  evalcli's efficiency / the floor's: {eff['evalcli'] / eff['floor']:.3f} (target >= 0.97)")


def startup(repeat: int = 7) -> None:
    """Medians of ``repeat``: CPU seconds of ``evalcli validate`` and of ``evalcli run`` on one conversation, and the
    microseconds ``python -X importtime`` counts in the imports of each (what they import: tests/test_startup.py)."""
    import tempfile

    dataset = write_dataset(Workload(1, 3, 0.0, 1))
    env = {"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key"}
    with tempfile.TemporaryDirectory(prefix="evalcli-startup-") as folder:
        commands = {"validate": ["validate", str(dataset), "--scorers", str(ROOT / "bench" / "scorers.yaml")],
                    "run": ["run", str(dataset), "--db", f"{folder}/s.db", "--scorers",
                            str(ROOT / "bench" / "scorers.yaml"), "--quiet"]}
        print(f"\nStart-up (medians of {repeat}; load average {load_average()})")
        for name, args in commands.items():
            cpu = [measure([sys.executable, "-m", "evalcli", *args], cwd=ROOT, env=env).cpu_seconds
                   for _ in range(repeat)]
            imports = [_import_us(measure([sys.executable, "-X", "importtime", "-m", "evalcli", *args], cwd=ROOT,
                                          env=env).stderr) for _ in range(repeat)]
            print(f"  evalcli {name:8} CPU {statistics.median(cpu):.2f} s, imports {statistics.median(imports) / 1e6:.2f} s "
                  "(-X importtime, top-level cumulative)")


def _instructions(command: list[str], env: dict[str, str]) -> int:
    """Instructions a command executes (``valgrind --tool=cachegrind``'s "I refs"): a count the machine's load does not
    move, for a noisy or shared machine. The interpreter binary itself, not a wrapper script (pyenv's ``python`` is
    one), so that the count is the run's."""
    import os
    import re
    import subprocess

    binary = os.path.realpath(sys.executable)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           binary, *command], cwd=ROOT, env={**environ, **env}, capture_output=True, text=True,
                          check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"valgrind {' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instructions(small: int = 300, big: int = 1000, turns: int = 3, concurrency: int = 64) -> None:
    """The per-turn ratio counted in instructions: the floor and ``evalcli run`` each run under cachegrind on
    ``small`` and ``big`` conversations at zero latency, marginal instructions a turn ((big - small) / the turns
    between). Needs valgrind; each run is about 50x slower than without it."""
    import shutil
    import tempfile

    if shutil.which("valgrind") is None:
        print("\nInstructions per turn: valgrind is not installed (apt install valgrind)")
        return
    env = {"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench-not-a-key"}
    # every module compiled first: a stale .pyc is compiled (and written) by whichever run imports it first, which made
    # the small run count the compilation and the marginal figure a third too low after an edit
    import compileall

    compileall.compile_dir(ROOT / "evalcli", quiet=1)
    counts: dict[str, dict[int, int]] = {"floor": {}, "evalcli": {}}
    with tempfile.TemporaryDirectory(prefix="evalcli-instructions-") as folder:
        for n in (small, big):
            dataset = write_dataset(Workload(n, turns, 0.0, concurrency))
            counts["floor"][n] = _instructions([str(Path(__file__).resolve()), "--play", str(dataset),
                                                f"{folder}/floor-{n}.db"], env)
            counts["evalcli"][n] = _instructions(["-m", "evalcli", "run", str(dataset), "--db", f"{folder}/e-{n}.db",
                                                  "--scorers", str(ROOT / "bench" / "scorers.yaml"), "--quiet"], env)
    between = (big - small) * turns
    per_turn = {k: (v[big] - v[small]) / between for k, v in counts.items()}
    print(f"\nInstructions per turn at zero latency (valgrind cachegrind, marginal {small}x{turns} -> {big}x{turns}, "
          f"concurrency {concurrency})")
    for who in ("floor", "evalcli"):
        print(f"  {who:8} {counts[who][small] / 1e9:.2f} G, {counts[who][big] / 1e9:.2f} G -> "
              f"{per_turn[who]:,.0f} instructions a turn")
    print(f"  ratio evalcli / floor: {per_turn['evalcli'] / per_turn['floor']:.2f}x (target <= 2x; CPU seconds also "
          "count cache misses and the two threads' contention, which instructions do not)")


def _import_us(stderr: str) -> int:
    """The sum of the top-level modules' cumulative import times in ``python -X importtime`` output."""
    total = 0
    for line in stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[2].startswith(" ") \
                and not parts[2].startswith("  ") and parts[1].strip().isdigit():
            total += int(parts[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--play", nargs=2, metavar=("DATASET", "DB"), help="be the floor process (internal)")
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--big", type=int, default=3000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--startup", action="store_true", help="only the start-up of validate and run")
    parser.add_argument("--instructions", action="store_true",
                        help="only the per-turn ratio in instructions (valgrind; --small 300 --big 1000 by default)")
    args = parser.parse_args()
    if args.startup:
        startup()
        return
    if args.instructions:
        instructions(args.small, 1000 if args.big == 3000 else args.big, args.turns, args.concurrency)
        return
    if args.play:
        asyncio.run(_play(Path(args.play[0]), Path(args.play[1])))
        return
    report(args.small, args.big, args.turns, args.repeat, args.latency, args.concurrency)
    startup()


if __name__ == "__main__":
    main()
