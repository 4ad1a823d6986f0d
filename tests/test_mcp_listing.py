"""An agent's MCP servers are listed at once, under one timeout (docs/hermetic.md, "MCP tools"), through the real CLI.

The hung servers are real processes: a Python script that reads its stdin and never answers, started by the real MCP
stdio client, for ``evalcli.Agent``'s ``mcp:`` and for the Agents SDK's ``MCPServerStdio`` (listed by
``evalcli.targets.framework_mcp``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

HUNG = "import sys, time\nsys.stdin.readline()\ntime.sleep(600)\n"

AGENTS = f'''
import evalcli
from agents import Agent
from agents.mcp import MCPServerStdio

HUNG = [{{"command": [{sys.executable!r}, "hung.py", name], "name": name}} for name in ("alpha", "beta", "gamma")]
agent = evalcli.Agent(model="openai/scripted", mcp=HUNG)
sdk = Agent(name="hung", mcp_servers=[MCPServerStdio(params={{"command": {sys.executable!r}, "args": ["hung.py", s["name"]]}},
                                                     name=s["name"]) for s in HUNG])
'''

TIMEOUT = 8
"""Seconds the servers have: listed one after another, three hung servers take at least three times this."""


@pytest.mark.timing
@pytest.mark.parametrize("target", ["agent", "sdk"])
def test_hung_mcp_servers_cost_one_timeout_and_are_all_named(target: str, write: Callable[..., Path],
                                                             cli: Callable[..., CliResult], workdir: Path) -> None:
    (workdir / "hung.py").write_text(HUNG)
    (workdir / "hung_agents.py").write_text(AGENTS)
    (workdir / "agents.py").unlink(missing_ok=True)  # the workdir's sample targets would shadow the SDK's package
    write("d.yaml", f"# three servers that never answer\ntarget: hung_agents:{target}\ndata:\n  - input: hi\n")
    unusable = cli("validate", "d.yaml", env={"EVALCLI_MCP_TIMEOUT": "soon"})  # (and the CLI's server started)
    assert unusable.code == 2 and "Traceback" not in unusable.stderr
    assert "EVALCLI_MCP_TIMEOUT='soon' is not a number of seconds above 0 (default 60)" in unusable.stderr
    started = time.monotonic()
    result = cli("validate", "d.yaml", env={"EVALCLI_MCP_TIMEOUT": str(TIMEOUT)})
    took = time.monotonic() - started
    assert result.code == 2, result.stderr
    assert "d.yaml:2:9: 3 MCP servers did not start or list their tools (listed together, within 8s)" in result.stderr
    for name in ("alpha", "beta", "gamma"):
        assert f"the MCP server '{sys.executable} hung.py {name}': no answer within 8s" in result.stderr
    assert "Traceback" not in result.stderr
    assert TIMEOUT <= took < 3 * TIMEOUT, f"{took:.1f}s: the servers were listed one after another"
