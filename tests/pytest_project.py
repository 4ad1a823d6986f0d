"""Helpers for the pytest plugin's tests: a small project written by the test, real pytest run on it in a subprocess.

The subprocess loads the plugin with ``-p evalcli.pytest_plugin`` and no other installed plugin
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), so it tests this working tree whether or not the installed evalcli has
registered its entry point yet (``test_entry_point_*`` checks the entry point itself).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PLUGIN = ["-p", "evalcli.pytest_plugin"]
XDIST = ["-p", "xdist.plugin"]

AGENT = '''
import os, pathlib, time

LOG = pathlib.Path(__file__).with_name("calls.txt")


def weather(input, **options):
    """Sunny everywhere but Paris; raises on 'boom'; logs every call (one line per turn played)."""
    with open(LOG, "a") as f:
        f.write(input + "\\n")
    time.sleep(float(os.environ.get("AGENT_SECONDS", "0")))
    if "boom" in input:
        raise ValueError("kaboom from the agent")
    if "Paris" in input:
        return "I do not know."
    return f"It is sunny in {input.rstrip('?').split()[-1]}."


def needs_city(run):
    """A gate that can only judge conversations whose ground truth names a city."""
    import evalcli

    if not run.ground_truth:
        return evalcli.not_scorable("no city in the ground truth")
    return 1.0 if run.ground_truth["city"] in str(run.output) else 0.0
'''

WEATHER = '''
target: agent:weather
gates:
  - includes: sunny
scorers:
  - scorer: {includes: Brooklyn}
    threshold: 0.5
data:
  - id: brooklyn-now
    tags: [smoke, weather]
    input: What is the weather in Brooklyn?
  - id: paris
    tags: [weather]
    input: What is the weather in Paris?
  - id: london-two-days
    turns:
      - input: Weather in London?
        gates: [{includes: London}]
      - input: And tomorrow in Tokyo?
        gates: [{includes: London}]
  - id: boom
    input: boom
'''

GOOD = '''
target: agent:weather
gates:
  - includes: sunny
data:
  - {id: rome, input: 'Weather in Rome?'}
  - {id: oslo, tags: [smoke], input: 'Weather in Oslo?'}
'''


@dataclass
class Pytest:
    """A finished pytest run: exit code, its output (stdout and stderr), and where it ran."""

    code: int
    out: str
    cwd: Path

    def junit(self, name: str = "junit.xml") -> dict[str, tuple[str, str]]:
        """``classname::name`` -> (outcome, message) for every testcase of the JUnit file."""
        cases: dict[str, tuple[str, str]] = {}
        for case in ET.parse(self.cwd / name).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome, message = child.tag, child.get("message") or ""
            cases[f"{case.get('classname')}::{case.get('name')}"] = (outcome, message)
        return cases

    def runs(self, db: str = "evalcli.db") -> list[dict[str, Any]]:
        """The stored runs, oldest first."""
        return query(self.cwd / db, "SELECT * FROM runs ORDER BY id")

    def items(self, run_id: str, db: str = "evalcli.db") -> list[str]:
        """The item ids a stored run holds, in dataset order."""
        rows = query(self.cwd / db, "SELECT item_id FROM items WHERE run_id = ? ORDER BY item_index", (run_id,))
        return [row["item_id"] for row in rows]


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


def write_project(folder: Path, files: dict[str, str]) -> Path:
    """Write ``agent.py`` and the given files (dedented) into ``folder``."""
    for name, text in {"agent.py": AGENT, **files}.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return folder


def pytest_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "EVALCLI_")) and k != "CI"}
    env.update({"PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "120",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def pytest_command(args: tuple[str, ...], plugins: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *plugins, *args]


def run_pytest(cwd: Path, *args: str, plugins: list[str] | None = None, env: dict[str, str] | None = None,
               timeout: float = 180) -> Pytest:
    """Real pytest, in ``cwd``, with the plugin (``plugins`` replaces ``-p evalcli.pytest_plugin``)."""
    done = subprocess.run(pytest_command(args, PLUGIN if plugins is None else plugins), cwd=cwd,
                          env=env or pytest_env(), capture_output=True, text=True, timeout=timeout)
    return Pytest(done.returncode, done.stdout + done.stderr, cwd)


def start_pytest(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(pytest_command(args, PLUGIN), cwd=cwd, env=env or pytest_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def calls(cwd: Path) -> list[str]:
    """The user messages the agent received (one per turn played), in the order they arrived; then forgotten."""
    log = cwd / "calls.txt"
    if not log.exists():
        return []
    lines = log.read_text(encoding="utf-8").splitlines()
    log.unlink()
    return lines
