"""Benchmark: the calls ``--repeat auto:10`` makes against ``--repeat 10`` (docs/verdicts.md#sequential-repeats).

A suite that is 90% stable: of N conversations (default 100), 60% pass every play, 30% fail every play and 10% pass
half the time (a seeded coin per conversation and play, so both runs see the same outcomes). The target counts its
calls. Each mode runs through the real CLI (``python -m evalcli run``) in a fresh folder and database, at the
default pass rate (1.0) and at ``--pass-rate 0.5``; the figures are the target calls of each, their ratio, and
whether every conversation gets the same stability label from both. Under ``--repeat 10`` the label is what the
ten plays did (all passed, none did, some did); under ``--repeat auto`` it is what the sequential rule settled on:
at P = 1.0 a conversation that passes some plays and then fails is settled ``stable-fail`` at its first failure,
so the half-the-time conversations whose first failure comes before the tenth play get another label there.

Run: ``python bench/repeats.py [--n 100] [--most 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

AGENT = '''
import pathlib, random
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    kind, seed = input.split()
    counter = HERE / "calls" / f"{kind}-{seed}"
    play = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(play + 1))
    passed = kind == "always" or (kind == "half" and random.Random(f"{seed}-{play}").random() < 0.5)
    return "ok" if passed else "no"
'''


def suite(n: int) -> list[tuple[str, int]]:
    """60% always, 30% never, 10% half the time (90% stable)."""
    always, never = round(n * 0.6), round(n * 0.3)
    return ([("always", i) for i in range(always)] + [("never", i) for i in range(never)]
            + [("half", i) for i in range(n - always - never)])


def run(conversations: list[tuple[str, int]], args: list[str]) -> tuple[int, dict[str, str | None], dict[str, int]]:
    """(target calls, stability by conversation, stability counts) of one run in a fresh folder."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "calls").mkdir()
        (work / "coin.py").write_text(AGENT)
        (work / "d.yaml").write_text("target: coin:agent\ngates: [{includes: ok}]\ndata:\n" + "".join(
            f"  - {{id: {kind}-{seed}, input: '{kind} {seed}'}}\n" for kind, seed in conversations))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "evalcli", "run", "d.yaml", "--json", "out.json", "-q", *args],
                              cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode not in (0, 1):
            raise SystemExit(f"evalcli run {' '.join(args)} exited {done.returncode}: {done.stderr}")
        calls = sum(int(p.read_text()) for p in (work / "calls").iterdir())
        result = json.loads((work / "out.json").read_text())
        labels = {item["id"]: item.get("stability") for item in result["items"]}
        return calls, labels, dict(Counter(label or "-" for label in labels.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="conversations in the suite")
    parser.add_argument("--most", type=int, default=10, help="MAX of --repeat auto, and N of --repeat N")
    options = parser.parse_args()
    conversations = suite(options.n)
    print(f"suite: {options.n} conversations, 90% stable (60% always pass, 30% never, 10% half the time)")
    for rate in ("1.0", "0.5"):
        fixed_calls, fixed_labels, fixed_counts = run(conversations, ["--repeat", str(options.most),
                                                                      "--pass-rate", rate])
        auto_calls, auto_labels, auto_counts = run(conversations, ["--repeat", f"auto:{options.most}",
                                                                   "--pass-rate", rate])
        same = sum(fixed_labels[c] == auto_labels[c] for c in fixed_labels)
        print(f"--pass-rate {rate}: --repeat {options.most} {fixed_calls} calls {fixed_counts}; "
              f"--repeat auto:{options.most} {auto_calls} calls {auto_counts}; "
              f"ratio {auto_calls / fixed_calls:.2f}; same stability label {same}/{len(fixed_labels)}")


if __name__ == "__main__":
    main()
