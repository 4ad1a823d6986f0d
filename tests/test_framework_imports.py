"""Frameworks are imported only when used (docs/targets/frameworks.md): a run of a plain target imports none, a run of one
framework's agent imports no other, and a dataset whose framework package is missing fails validation
(exit 2) naming the extra to install. Checked in subprocesses through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.framework_agents import KEY
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

FRAMEWORK_MODULES = ["pydantic_ai", "agents", "langgraph", "langchain", "langchain_core", "langchain_openai", "smolagents"]

# Runs the CLI like the console script does, then reports which framework modules were imported.
PROBE = f"""
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps({{m: m in sys.modules for m in {FRAMEWORK_MODULES!r}}}),
                              file=sys.stderr))
sys.argv = ["evalcli", *sys.argv[1:]]
from evalcli.cli import main
main()
"""


def imported(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, bool], str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT)
    line = next(line for line in done.stderr.splitlines() if line.startswith("MODULES "))
    return done.returncode, json.loads(line.removeprefix("MODULES ")), done.stderr


def test_a_run_of_a_plain_target_imports_no_framework(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("def answer(input, *, memory=None):\n    return 'Sunny in Brooklyn.'\n")
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\n"
                                     "data: [{input: 'Weather?'}, {inputs: [Hi, 'Weather?']}]\n")
    code, modules, _ = imported(["run", "d.yaml", "--db", str(tmp_path / "x.db")], tmp_path)
    assert code == 0
    assert not any(modules.values()), modules


def test_a_pydantic_ai_run_imports_no_other_framework(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "from pydantic_ai import Agent\nfrom pydantic_ai.models.test import TestModel\n"
        "agent = Agent(TestModel(custom_output_text='Sunny in Brooklyn.'))\n")
    (tmp_path / "d.yaml").write_text("target: agent:agent\ngates: [{includes: Sunny}]\ndata: [{input: 'Weather?'}]\n")
    code, modules, stderr = imported(["run", "d.yaml", "--db", str(tmp_path / "x.db")], tmp_path)
    assert code == 0, stderr
    assert modules["pydantic_ai"] and not any(v for k, v in modules.items() if k != "pydantic_ai"), modules


@pytest.mark.parametrize(("module", "extra"), [("pydantic_ai", "pydantic-ai"), ("agents", "openai-agents"),
                                               ("langgraph", "langgraph"), ("langchain_openai", "langgraph")])
def test_a_missing_framework_package_is_a_validation_error_naming_the_extra(module: str, extra: str,
                                                                            tmp_path: Path) -> None:
    hidden = tmp_path / "hide"
    hidden.mkdir()
    # the package is "not installed": importing it raises ModuleNotFoundError, as when it is absent
    (hidden / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    (tmp_path / "agent.py").write_text(f"import {module}\nagent = {module}\n")
    (tmp_path / "d.yaml").write_text("target: agent:agent\ngates: [used_no_tools]\ndata: [{input: hi}]\n")
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "x.db")], tmp_path,
                   {"PYTHONPATH": f"{hidden}{os.pathsep}{REPO}", "OPENAI_API_KEY": KEY})
    assert done.code == 2, done.stderr
    assert f"pip install 'evalcli[{extra}]'" in done.stderr and "d.yaml:1:" in done.stderr
    assert not (tmp_path / "x.db").exists()  # nothing was run or stored
