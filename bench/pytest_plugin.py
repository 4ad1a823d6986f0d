"""The pytest plugin's costs (docs/pytest.md): what it adds to pytest's start-up, and a dataset played under pytest.

1. An unrelated test suite (200 trivial tests, no dataset): real pytest with and without
   ``-p evalcli.pytest_plugin``, interleaved, best of N each (no other plugin: ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``);
   and the import of the plugin itself inside an interpreter that has already imported pytest (median of N).
   Byte code is cached (in a temporary ``PYTHONPYCACHEPREFIX``, warmed first), as it is for an installed package,
   even where ``PYTHONDONTWRITEBYTECODE`` is set.
2. A dataset of 8 conversations of 1 s at concurrency 4 under pytest: the stored run's duration (ideal 2 s) and
   the whole pytest process.

Usage: ``python bench/pytest_plugin.py [--repeat 15]`` (also ``python bench/run.py --only pytest``).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

AGENT = "import time\n\ndef slow(input, **options):\n    time.sleep(1)\n    return 'ok ' + input\n"
DATASET = "target: agent:slow\nconcurrency: 4\ngates: [{includes: ok}]\ndata:\n" + "".join(
    f"  - {{id: c{n}, input: 'question {n}'}}\n" for n in range(8))
IMPORT = ("import time, pytest, _pytest.main, _pytest.python\nstarted = time.perf_counter()\n"
          "import evalcli.pytest_plugin\nprint(time.perf_counter() - started)\n")


CACHE = Path(tempfile.gettempdir()) / "evalcli-bench-pycache"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPYCACHEPREFIX": str(CACHE)}


def _wall(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall


def startup(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder)
        (suite / "test_many.py").write_text("import pytest\n\n@pytest.mark.parametrize('n', range(200))\n"
                                            "def test_n(n):\n    assert n >= 0\n")
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        without, with_plugin = [], []
        _wall([*base, "-p", "evalcli.pytest_plugin"], suite)  # byte code compiled once, as an install does
        for _ in range(repeat):  # interleaved, so the machine's load falls on both alike
            without.append(_wall(base, suite))
            with_plugin.append(_wall([*base, "-p", "evalcli.pytest_plugin"], suite))
        imports = []
        for _ in range(repeat):
            done = subprocess.run([sys.executable, "-c", IMPORT], env=_env(), capture_output=True, text=True, check=True)
            imports.append(float(done.stdout))
    print(f"\npytest plugin, an unrelated suite of 200 tests (best of {repeat}, interleaved): pytest "
          f"{min(without):.3f} s without the plugin, {min(with_plugin):.3f} s with it "
          f"(medians {statistics.median(without):.3f} s / {statistics.median(with_plugin):.3f} s); importing "
          f"evalcli.pytest_plugin after pytest: {statistics.median(imports) * 1000:.1f} ms (median of {repeat})")


def dataset() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "agent.py").write_text(AGENT)
        (project / "slow.yaml").write_text(DATASET)
        wall = _wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "evalcli.pytest_plugin",
                      "slow.yaml"], project)
        conn = sqlite3.connect(project / "evalcli.db")
        started, finished = conn.execute("SELECT started_at, finished_at FROM runs").fetchone()
        conn.close()
    run = (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    print(f"pytest plugin, 8 conversations of 1 s at concurrency 4 (ideal 2 s): the run {run:.2f} s, the whole pytest "
          f"process {wall:.2f} s")


def section(repeat: int) -> None:
    startup(repeat)
    dataset()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each start-up measurement")
    section(parser.parse_args().repeat)
