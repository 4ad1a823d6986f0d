"""The Makefile's installing targets on a Python whose packages are the system's (PEP 668: Debian's and Ubuntu's
``python3`` refuse ``pip install``): a venv is made for evalcli, ``.venv``, and everything runs with its Python;
anywhere else the Python given runs everything, the demo's ``evalcli`` included (docs/development.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.conftest import REPO
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

MANAGED_STUB = """#!/bin/sh
# a python3 that answers the Makefile's question as Debian's does (its standard library holds EXTERNALLY-MANAGED)
case "$2" in *EXTERNALLY-MANAGED*) echo 1; exit 0;; esac
exec {python} "$@"
"""


def planned(target: str, python: str) -> list[str]:
    """The commands ``make -n TARGET PYTHON=python`` would run (nothing is run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    done = subprocess.run(["make", "-n", target, f"PYTHON={python}"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT, check=True)
    return done.stdout.splitlines()


def test_a_system_managed_python_gets_a_venv_for_evalcli(tmp_path: Path) -> None:
    stub = tmp_path / "python3"
    stub.write_text(MANAGED_STUB.format(python=sys.executable))
    stub.chmod(0o755)
    venv = f"{REPO}/.venv/bin/python"
    for target in ("demo", "test"):
        lines = planned(target, str(stub))
        assert lines[0].startswith(f"test -x {venv} || ") and f"{stub} -m venv .venv" in lines[0], lines[:2]
        pip = [line for line in lines if " -m pip install " in line]
        assert pip and all(line.startswith(f"{venv} -m pip install ") for line in pip), pip
        assert not [line for line in lines if line.startswith(f"{stub} ")], lines
        assert any(". .venv/bin/activate" in line for line in lines)
    assert f"{venv} -m evalcli run datasets/weather.yaml" in planned("demo", str(stub))


def test_any_other_python_installs_and_runs_the_demo_itself() -> None:
    # before: the demo ran a bare `evalcli`: command not found under PYTHON=venv/bin/python, or another install's
    lines = planned("demo", sys.executable)
    assert f"{sys.executable} -m evalcli run datasets/weather.yaml" in lines, lines
    assert lines.index(f"{sys.executable} -m evalcli run datasets/weather.yaml") == len(lines) - 2  # then what next
    assert not [line for line in lines if ".venv" in line], lines


def test_the_question_is_answered_as_a_system_python_answers_it() -> None:
    # this machine's own Python, and Debian's python3 where there is one: managed exactly when its standard library
    # holds EXTERNALLY-MANAGED outside a venv
    managed = sys.prefix == sys.base_prefix and Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").is_file()
    assert any(".venv" in line for line in planned("demo", sys.executable)) == managed
    debian = Path("/usr/bin/python3")
    if debian.exists():
        answer = subprocess.run([str(debian), "-c", "import os, sys, sysconfig; print(int(sys.prefix == sys.base_prefix "
                                 "and os.path.isfile(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'))))"],
                                capture_output=True, text=True, check=True).stdout.strip()
        assert any(".venv" in line for line in planned("demo", str(debian))) == (answer == "1")
