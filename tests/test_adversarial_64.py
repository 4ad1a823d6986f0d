"""Adversarial try 64 (docs/identity.md, docs/secrets.md, docs/reliability.md#secrets): the same conversation across
runs, the configuration a resume compares, and secrets, broken as users would, through the real CLI and real SQLite
files. Each test failed on the build it was written against (c9daa57)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import run_cli

AGENT = '''
def agent(input, **kw):
    return "hello " + input
'''

TENANTS = """
target: agent:agent
secrets: [TENANT_A, TENANT_B]
gates:
  - includes: hello
data:
  - {id: "${TENANT_A}-refund", input: "refund please"}
  - {id: "${TENANT_B}-refund", input: "refund please"}
"""


def test_two_ids_that_differ_only_in_their_secrets_stay_two_conversations(tmp_path: Path) -> None:
    """Per-tenant ids (`${TENANT_A}-refund`, `${TENANT_B}-refund`, both declared secrets) were both stored with the
    identity `id:[redacted]-refund`: `diff` of two runs of the same dataset paired one with the other and called it
    "changed" (1 changed, 1 only in A, 1 only in B). Their identities hold the secret as its reference
    (docs/identity.md), so the two runs pair whole, and no secret is stored."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(TENANTS)
    env = {"TENANT_A": "acme4242", "TENANT_B": "zeta9191"}
    for _ in range(2):
        done = run_cli(["run", "d.yaml", "--quiet"], tmp_path, env)
        assert done.code == 0, done.stdout + done.stderr
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    first, second = (row[0] for row in conn.execute("SELECT id FROM runs ORDER BY started_at, id"))
    identities = sorted(row[0] for row in conn.execute("SELECT identity FROM items WHERE run_id = ?", (first,)))
    assert identities == ["id:${TENANT_A}-refund", "id:${TENANT_B}-refund"]
    diff = run_cli(["diff", first, second, "--verbose"], tmp_path, env)
    assert diff.code == 0, diff.stdout + diff.stderr
    assert "changed" not in diff.stdout.replace("no gate or scorer changed", ""), diff.stdout
    assert "only in" not in diff.stdout, diff.stdout
    assert "pass/fail over 2 conversations in both runs" in diff.stdout, diff.stdout
    data = (tmp_path / "evalcli.db").read_bytes()
    assert b"acme4242" not in data and b"zeta9191" not in data


FLAKY = '''
import pathlib
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    (HERE / "plays.log").open("a").write(input + "\\n")
    if input == "boom":
        raise RuntimeError("the agent fell over")
    return "hello " + input
'''

TWO = """
target: agent:agent
gates:
  - includes: hello
data:
  - {id: a, input: hi}
  - {id: b, input: boom}
"""


def test_a_resume_after_the_agents_code_changed_says_so_naming_the_file(tmp_path: Path) -> None:
    """`--resume` compared the dataset, its files and the environment, but not the code of the target the dataset
    names (`target: agent:agent`): an edited agent.py resumed silently, the conversations it played scored under
    one verdict with those the old code played. The resume now says so, naming the file (docs/identity.md); with the
    file as it was, it says nothing."""
    (tmp_path / "agent.py").write_text(FLAKY)
    (tmp_path / "d.yaml").write_text(TWO)
    first = run_cli(["run", "d.yaml", "--quiet"], tmp_path)
    assert first.code == 4, first.stdout + first.stderr
    run_id = sqlite3.connect(tmp_path / "evalcli.db").execute("SELECT id FROM runs").fetchone()[0]
    same = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)
    assert same.code == 4 and "code changed" not in same.stderr, same.stdout + same.stderr
    (tmp_path / "agent.py").write_text(FLAKY.replace('if input == "boom"', 'if input == "never"'))
    resumed = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert (f"the target's code changed since run {run_id} started: target.source (changed: the content of "
            "agent.py)") in resumed.stderr, resumed.stderr
    assert f"--rerun-failed {run_id}" in resumed.stderr, resumed.stderr
    assert (tmp_path / "plays.log").read_text().split() == ["hi", "boom", "boom", "boom"]
