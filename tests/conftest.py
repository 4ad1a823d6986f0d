"""Shared test helpers: write a dataset and an agent into a temp dir, run the real CLI there."""

from __future__ import annotations

import atexit
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests import cli_server as cli_server_module
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

pytest_plugins = ["tests.llm_fixtures", "tests.tool_agent"]

REPO = Path(__file__).resolve().parent.parent

# Hypothesis's 200 ms deadline per example measures the machine, not evalcli: ten xdist workers on two cores made a
# 3 ms example take 400 ms. Speed is measured in bench/, so no example has a deadline here.
settings.register_profile("evalcli", deadline=None)
settings.load_profile("evalcli")

# `make test-fast` runs `-m "not slow"`: the unit tests and the end-to-end tests on the callable and http targets.
# Slow are the modules that start framework agents, a browser, Node, the embedded model, pytest sessions of their
# own (the plugin's) or every docs example, the demo (its embedded judge), and every test run through litellm's path
# (importing litellm costs each CLI subprocess seconds of CPU); `make test` and CI run them all.
# FRAMEWORK_MODULES: the test modules whose CLI runs start framework agents; their runs fork from a server that
# imported the frameworks (tests/cli_server.py)
FRAMEWORK_MODULES = frozenset({
    "test_apps_adk_strands", "test_apps_guardrails", "test_apps_langgraph", "test_apps_openai_agents", "test_apps_pydantic_ai",
    "test_frameworks_cli", "test_otel_capture", "test_otel_ingest", "test_otel_phoenix", "test_recorded_frameworks",
    "test_registration", "test_tools_frameworks",
})

SLOW_MODULES = FRAMEWORK_MODULES | {"test_adapter_crewai", "test_adapter_llama_index", "test_adapter_smolagents",
    "test_docs_examples", "test_first_minutes", "test_hostile_transcripts", "test_html_report_browser",
    "test_llm_backends", "test_local_model", "test_pytest_plugin", "test_pytest_plugin_runs", "test_scripted_model",
    "test_target_mastra", "test_yaml_suite",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.stem
        if module in SLOW_MODULES or "litellm" in item.name:
            item.add_marker(pytest.mark.slow)

# Agents used by many end-to-end tests; a test writes this module next to its dataset.
AGENTS = '''
import asyncio, json

def echo(input, **kw):
    """Answers with the input."""
    return f"You said: {input}"

class Echo:
    memory = {"kind": "test"}
    def generate(self, input, *, memory=None, **options):
        return f"You said: {input}"

echo_agent = Echo()

class NoMemory:
    def generate(self, input, *, memory=None, **options):
        return f"You said: {input}"

forgetful = NoMemory()

class Recorder:
    """Records every call (input, memory, options) to calls.jsonl next to this file."""
    memory = True
    def generate(self, input, *, memory=None, **options):
        import pathlib
        with open(pathlib.Path(__file__).with_name("calls.jsonl"), "a") as f:
            f.write(json.dumps({"input": input, "memory": memory, "options": options}) + "\\n")
        return "recorded " + input

recorder = Recorder()

async def async_echo(input, *, memory=None):
    await asyncio.sleep(0)
    return [{"role": "user", "content": input}, {"role": "assistant", "content": "async " + input}]

def tool_agent(input, **kw):
    """Calls get_weather once per turn, then answers."""
    cid = "c" + str(abs(hash(input)) % 1000)
    return {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": cid, "content": json.dumps({"temp": 72})},
        {"role": "assistant", "content": "It is sunny and 72°F in Brooklyn."},
    ]}

def boom(input, **kw):
    if "boom" in input:
        raise ValueError("kaboom from the target")
    return "fine"

def scripted(input, **kw):
    """Replies with the text after '=>' in the input, or the input itself."""
    return input.split("=>", 1)[1].strip() if "=>" in input else input
'''


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str
    cwd: Path

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    def db(self, name: str = "evalcli.db") -> sqlite3.Connection:
        conn = sqlite3.connect(self.cwd / name)
        conn.row_factory = sqlite3.Row
        return conn


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = SUBPROCESS_TIMEOUT,
            fresh: bool = False, python: Path | None = None) -> CliResult:
    """Run the real ``evalcli`` as ``python -m evalcli`` in a separate process (no TTY, so no colour and no
    progress bar): forked from this process's CLI server (``tests/cli_server.py``), which has imported evalcli
    already, or a fresh interpreter when ``fresh`` or when the environment changes what was read at import.
    ``python``: a framework venv's interpreter (``tests/framework_venvs.py``), always a fresh one, the working tree
    first on its path."""
    full_env = {**cli_base_env(), **(env or {})}
    if env is None or "EVALCLI_JUDGE_MODEL" not in env:
        full_env.pop("EVALCLI_JUDGE_MODEL", None)
    server = None if fresh or python is not None else cli_server(server_profile())
    if server is not None and server.can_run(full_env, str(cwd)):
        code, out, err = server.run(list(args), str(cwd), full_env, timeout)
        return CliResult(code, out, err, cwd)
    done = subprocess.run([str(python or sys.executable), "-m", "evalcli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    return CliResult(done.returncode, done.stdout, done.stderr, cwd)


def cli_base_env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REPO), "COLUMNS": "200"}


def server_profile() -> str:
    """The fork server for the test running now: "frameworks" in FRAMEWORK_MODULES, else "base"."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "")
    return "frameworks" if Path(test.split("::")[0]).stem in FRAMEWORK_MODULES else "base"


_servers: dict[str, cli_server_module.Client | None] = {}
_server_lock = threading.Lock()


def cli_server(profile: str = "base") -> cli_server_module.Client | None:
    """This process's CLI fork server for a profile, started on first use; None if it could not start (then every
    run is fresh, with a warning) or with ``EVALCLI_TEST_FRESH=1``."""
    with _server_lock:
        if profile not in _servers:
            client = None
            if os.environ.get("EVALCLI_TEST_FRESH") != "1":
                try:
                    client = cli_server_module.Client(cli_base_env(), str(REPO), profile)
                    atexit.register(client.close)
                except RuntimeError as error:
                    warnings.warn(f"{error}; every CLI run starts a fresh interpreter", stacklevel=2)
            _servers[profile] = client
        return _servers[profile]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A temp dir holding ``agents.py`` (the test agents)."""
    (tmp_path / "agents.py").write_text(AGENTS)
    return tmp_path


@pytest.fixture
def write(workdir: Path) -> Callable[..., Path]:
    """``write("d.yaml", TEXT)``: write a dedented file into the work dir, return its path."""
    def _write(name: str, text: str) -> Path:
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path
    return _write


@pytest.fixture
def cli(workdir: Path) -> Callable[..., CliResult]:
    """``cli("run", "d.yaml", "--json", "-")`` in the work dir."""
    def _cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
        return run_cli(list(args), workdir, env)
    return _cli


@pytest.fixture(params=["libyaml", "pure"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The YAML loader's two event sources (docs/yaml.md): libyaml's, where pyyaml has it, and pyyaml's own (as where
    pyyaml has no libyaml)."""
    from evalcli.dataset import yamlnodes

    if request.param == "libyaml":
        if yamlnodes.CParser is None:
            pytest.skip("this pyyaml has no libyaml binding")
    else:
        monkeypatch.setattr(yamlnodes, "CParser", None)
    return str(request.param)
