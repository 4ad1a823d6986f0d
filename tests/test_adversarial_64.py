"""Adversarial try 64 (docs/identity.md, docs/secrets.md, docs/reliability.md#secrets): the same conversation across
runs, the configuration a resume compares, and secrets, broken as users would, through the real CLI and real SQLite
files. Each test failed on the build it was written against (c9daa57)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli
from tests.llm_server import LLMServer, Reply, Request, text
from tests.pytest_project import pytest_env
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

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
    (docs/identity.md), so the two runs pair whole, JUnit has two testcases, and no secret is stored."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(TENANTS)
    env = {"TENANT_A": "acme4242", "TENANT_B": "zeta9191"}
    for _ in range(2):
        done = run_cli(["run", "d.yaml", "--quiet", "--junit", "r.xml"], tmp_path, env)
        assert done.code == 0, done.stdout + done.stderr
    junit = (tmp_path / "r.xml").read_text()
    assert 'name="${TENANT_A}-refund"' in junit and 'name="${TENANT_B}-refund"' in junit, junit  # two testcases
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


BOOM_B = '''
def agent(input, **kw):
    if input == "boom":
        raise RuntimeError("not now")
    return "hello " + input
'''


def test_show_finds_each_of_two_conversations_whose_ids_differ_only_in_their_secrets(tmp_path: Path) -> None:
    """The failing list said `evalcli show RUN '[redacted]-refund'` for a conversation whose id holds a secret, a
    name two conversations shared: `show` gave whichever came first, and could be given no other name. The list
    names it as its identity does (`'${TENANT_B}-refund'`), `show` finds it so, and an ambiguous name is refused
    with the names that are not (docs/identity.md)."""
    (tmp_path / "agent.py").write_text(BOOM_B)
    second = '{id: "${TENANT_B}-refund", input: "refund please"}'
    (tmp_path / "d.yaml").write_text(TENANTS.replace(second, second.replace("refund please", "boom")))
    env = {"TENANT_A": "acme4242", "TENANT_B": "zeta9191"}
    done = run_cli(["run", "d.yaml"], tmp_path, env)
    assert done.code == 4, done.stdout + done.stderr
    run_id = sqlite3.connect(tmp_path / "evalcli.db").execute("SELECT id FROM runs").fetchone()[0]
    assert f"evalcli show {run_id} '${{TENANT_B}}-refund'" in done.stdout, done.stdout
    shown = run_cli(["show", run_id, "${TENANT_B}-refund"], tmp_path, env)
    assert shown.code == 0 and "(item 1," in shown.stdout and "not now" in shown.stdout, shown.stdout + shown.stderr
    ambiguous = run_cli(["show", run_id, "[redacted]-refund"], tmp_path, env)
    assert ambiguous.code == 2, ambiguous.stdout + ambiguous.stderr
    assert "${TENANT_A}-refund, ${TENANT_B}-refund" in ambiguous.stderr, ambiguous.stderr


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
    assert sorted((tmp_path / "plays.log").read_text().split()) == ["boom", "boom", "boom", "hi"]


KEY = "zq9-live-KEYabc1234567890"
"""An API key evalcli sends to the judge's provider (``OPENAI_API_KEY``): a secret (docs/secrets.md)."""


def _starts(data: str, secret: str) -> int:
    """The length of the longest start of ``secret`` (6 characters or more) found in ``data``, 0 when none."""
    return max((n for n in range(6, len(secret) + 1) if secret[:n].lower() in data.lower()), default=0)


def _outputs(folder: Path, done_stdout: str, done_stderr: str) -> dict[str, str]:
    found = {"stdout": done_stdout, "stderr": done_stderr}
    for path in folder.iterdir():
        if path.is_file() and path.suffix in (".json", ".db", ".db-wal", ".html", ".md", ".xml"):
            found[path.name] = path.read_bytes().decode("latin-1")
    return found


JUDGED = """
target: agent:agent
gates:
  - scorer: {{judge: {{criterion: The assistant was polite., model: openai/judge, api_base: "{url}"}}}}
    id: polite
data:
  - {{id: a, input: hi}}
"""


def test_a_judge_reply_quoted_in_part_never_keeps_the_start_of_a_secret(tmp_path: Path, llm_server: LLMServer,
                                                                        monkeypatch: object) -> None:
    """A judge that never gives a readable verdict is quoted in the error, its last reply cut to 200 characters:
    cut first, then redacted, a key that straddled the cut kept 22 of its 24 characters in the terminal and the
    JSON. A provider error quoting the key was cut at 500 characters the same way (23 of 24 kept). Both are
    redacted first now (docs/secrets.md)."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(JUDGED.format(url=llm_server.url))
    env = {"OPENAI_API_KEY": KEY, "EVALCLI_LLM_RETRIES": "0"}
    llm_server.responder = lambda request: text("ab " + " ".join([KEY] * 30))  # the cut at 200 falls in a key
    done = run_cli(["run", "d.yaml", "--json", "r.json", "--no-cache"], tmp_path, env)
    assert "no readable verdict" in done.stdout, done.stdout + done.stderr
    leaks = {where: n for where, data in _outputs(tmp_path, done.stdout, done.stderr).items()
             if (n := _starts(data, KEY))}
    assert not leaks, leaks

    for pad in (0, 6, 12):  # wherever the cut at 500 falls, it falls in a key for one of these
        def refused(request: Request, pad: int = pad) -> Reply:
            return Reply(status=400, body={"error": {"message": "bad key: " + "p" * pad + " " + " ".join([KEY] * 40),
                                                     "type": "invalid_request_error"}})
        llm_server.responder = refused
        done = run_cli(["run", "d.yaml", "--json", f"r{pad}.json", "--no-cache"], tmp_path, env)
        assert "BadRequestError" in done.stdout, done.stdout + done.stderr
        leaks = {where: n for where, data in _outputs(tmp_path, done.stdout, done.stderr).items()
                 if (n := _starts(data, KEY))}
        assert not leaks, (pad, leaks)


LONG_REPLY = '''
import os

def agent(input, **kw):
    if input == "pem":
        return "my key:\\n" + os.environ["SIGNING_KEY"] + "\\nkeep it"
    return "x" * 140 + " config: " + os.environ["SVC_TOKEN"] + " and more words after it"
'''

QUOTED = """
target: agent:agent
gates:
  - includes: hello
data:
  - {id: long, input: long}
  - {id: pem, input: pem}
"""


def test_a_reason_quoting_a_reply_never_keeps_part_of_a_secret(tmp_path: Path) -> None:
    """A gate's reason quotes the agent's reply on one line, cut to 160 characters: a token across the cut kept
    its start (`config: zz7TOKENv…`), and a secret of several lines (a PEM key in `SIGNING_KEY`) put on one line
    was no longer the secret, so it was kept whole, in the terminal, the JSON, `show` and the database."""
    (tmp_path / "agent.py").write_text(LONG_REPLY)
    (tmp_path / "d.yaml").write_text(QUOTED)
    token = "zz7TOKENvalue0123456789"
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
    env = {"SVC_TOKEN": token, "SIGNING_KEY": pem}
    done = run_cli(["run", "d.yaml", "--json", "r.json"], tmp_path, env)
    assert done.code == 1, done.stdout + done.stderr
    run_id = json.loads((tmp_path / "r.json").read_text())["run_id"]
    shown = run_cli(["show", run_id, "long"], tmp_path, env)
    outputs = _outputs(tmp_path, done.stdout + shown.stdout, done.stderr + shown.stderr)
    assert not {where: n for where, data in outputs.items() if (n := _starts(data, token))}
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    assert not [where for where, data in outputs.items() if body.lower() in data.lower()]


SYSTEM = """
secrets: [TENANT_KEY]
target:
  model: openai/scripted
  api_base: "{url}"
  system: "Tenant key {{TENANT}} is private."
gates:
  - includes: hello
data:
  - {{id: a, input: hi}}
  - {{id: b, input: boom}}
"""


def test_a_model_target_whose_system_prompt_holds_a_secret_resumes(tmp_path: Path, llm_server: LLMServer) -> None:
    """A model target is named by its system prompt's first 40 characters, cut before they were redacted: a secret
    across the cut kept its start in the terminal and `runs.target`, and a secret inside them made the run
    impossible to resume ("run ... was of target model:... (system='Tenant key [redacted]...'), not
    model:... (system='Tenant key [redacted]...')", the same text on both sides)."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(SYSTEM.format(url=llm_server.url).replace("{TENANT}", "${TENANT_KEY}"))
    calls = {"n": 0}

    def answer(request: Request) -> Reply:
        calls["n"] += 1
        if "boom" in json.dumps(request.messages[-1]) and calls["n"] < 3:
            return Reply(status=400, body={"error": {"message": "not now", "type": "invalid_request_error"}})
        return text("hello")

    llm_server.responder = answer
    env = {"TENANT_KEY": "tk-88AA77BB66CC55", "EVALCLI_LLM_RETRIES": "0"}
    first = run_cli(["run", "d.yaml"], tmp_path, env)
    assert first.code == 4, first.stdout + first.stderr
    run_id, target = sqlite3.connect(tmp_path / "evalcli.db").execute("SELECT id, target FROM runs").fetchone()
    assert "Tenant key [redacted]" in target
    resumed = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path, env)
    assert resumed.code == 0, resumed.stdout + resumed.stderr

    cut = SYSTEM.format(url=llm_server.url).replace("{TENANT}", "x" * 20 + "${TENANT_KEY}")
    (tmp_path / "d.yaml").write_text(cut)
    across = run_cli(["run", "d.yaml", "--db", "other.db"], tmp_path, env)
    stored = sqlite3.connect(tmp_path / "other.db").execute("SELECT target FROM runs").fetchone()[0]
    for where in (across.stdout, across.stderr, stored):
        assert _starts(where, env["TENANT_KEY"]) == 0, where


PYTEST_TENANTS = """
target: agent:agent
secrets: [TENANT_A]
gates:
  - includes: hello
data:
  - {id: "${TENANT_A}-refund", input: "hello there"}
  - {id: "${TENANT_A}-cancel", input: "bye"}
"""

ECHO_HELLO = '''
def agent(input, **kw):
    return input
'''


def test_pytest_names_a_conversation_whose_id_holds_a_secret_by_its_reference(tmp_path: Path) -> None:
    """The pytest plugin named each conversation by its id as interpolated: a declared secret in an id
    (`${TENANT_A}-refund`) was in pytest's own lines (`PASSED d.yaml::acme4242-refund`), its JUnit XML and
    `.pytest_cache`, which evalcli never redacts. The node is named as its identity holds it
    (`d.yaml::${TENANT_A}-refund`, docs/pytest.md), and `--lf` and a node id still select it."""
    (tmp_path / "agent.py").write_text(ECHO_HELLO)
    (tmp_path / "d.yaml").write_text(PYTEST_TENANTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = pytest_env(TENANT_A="acme4242")

    def pytest(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "evalcli.pytest_plugin", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)

    played = pytest("d.yaml", "-v", "-rA", "--junitxml=pytest.xml")
    assert played.returncode == 1, played.stdout + played.stderr
    assert "d.yaml::${TENANT_A}-refund PASSED" in played.stdout, played.stdout
    written = [path for path in tmp_path.rglob("*") if path.is_file() and b"acme4242" in path.read_bytes()
               and path.suffix != ".yaml" and "__pycache__" not in path.parts]
    assert "acme4242" not in played.stdout + played.stderr and not written, written
    again = pytest("d.yaml", "--lf", "-v")
    assert "d.yaml::${TENANT_A}-cancel FAILED" in again.stdout and "-refund" not in again.stdout, again.stdout
    one = pytest("d.yaml::${TENANT_A}-refund", "-v")
    assert one.returncode == 0 and "1 passed" in one.stdout, one.stdout + one.stderr


TWO_GATES = """
target: agent:agent
secrets: [TENANT_A, TENANT_B]
gates:
  - includes: "${TENANT_A}"
  - includes: "${TENANT_B}"
scorers:
  - scorer: {includes: "${TENANT_A}"}
    id: "tenant-${TENANT_A}"
data:
  - {id: a, input: "for acme4242 only"}
"""


def test_two_gates_whose_arguments_differ_only_in_their_secrets_keep_two_scores(tmp_path: Path) -> None:
    """`includes: ${TENANT_A}` and `includes: ${TENANT_B}` were both `includes([redacted])`: the conversation counted
    1 gate of 2 (`gates 1/1` shown `0/1`), its stored scores kept one of the two (the JSON's `gate_scores` and the
    database lost the passing one), and a scorer with `id: tenant-${TENANT_A}` showed `-` for its score. An id
    holds a secret as its variable (`includes(${TENANT_A})`, docs/secrets.md)."""
    (tmp_path / "agent.py").write_text(ECHO_HELLO)
    (tmp_path / "d.yaml").write_text(TWO_GATES)
    env = {"TENANT_A": "acme4242", "TENANT_B": "zeta9191"}
    done = run_cli(["run", "d.yaml", "--json", "r.json"], tmp_path, env)
    assert done.code == 1, done.stdout + done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["items"][0]["gate_scores"] == {"includes(${TENANT_A})": 1.0, "includes(${TENANT_B})": 0.0}
    assert result["items"][0]["scores"] == {"tenant-${TENANT_A}": 1.0}
    stored = sqlite3.connect(tmp_path / "evalcli.db").execute("SELECT gate_scores FROM items").fetchone()[0]
    assert json.loads(stored) == {"includes(${TENANT_A})": 1.0, "includes(${TENANT_B})": 0.0}
    assert "1/2" in done.stdout, done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("│ a "))
    assert row.split("│")[4].strip() == "1", row  # the tenant-... scorer's score
    assert "acme4242" not in done.stdout + done.stderr + (tmp_path / "r.json").read_text()


FILTERED = """
target: agent:agent
secrets: [TENANT_A]
gates:
  - includes: hello
data:
  - {id: "${TENANT_A}-one", input: "hello one"}
  - {id: "${TENANT_A}-two", input: "boom"}
  - {id: "other-three", input: "hello three"}
"""

BOOM_UNTIL_FIXED = '''
import pathlib

def agent(input, **kw):
    if input == "boom" and not (pathlib.Path(__file__).parent / "fixed").exists():
        raise RuntimeError("not yet")
    return "hello" if input == "boom" else input
'''


def test_a_resume_selects_what_a_filter_holding_a_secret_selected(tmp_path: Path) -> None:
    """A run started with `--filter acme4242` (a declared secret: the tenant in the ids) kept its filter redacted, and
    `--resume` restored `[redacted]` as the regex, a character class that matched `other-three` too: the resumed run
    played a conversation its selection never had, silently. The filter is kept with the secret as `${TENANT_A}` and
    put back (docs/secrets.md); without the variable the resume is refused."""
    (tmp_path / "agent.py").write_text(BOOM_UNTIL_FIXED)
    (tmp_path / "d.yaml").write_text(FILTERED)
    env = {"TENANT_A": "acme4242"}
    first = run_cli(["run", "d.yaml", "--filter", "acme4242", "--quiet"], tmp_path, env)
    assert first.code == 4, first.stdout + first.stderr
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    run_id, options = conn.execute("SELECT id, options FROM runs").fetchone()
    assert "acme4242" not in options
    (tmp_path / "fixed").write_text("")
    resumed = run_cli(["run", "d.yaml", "--resume", run_id, "--quiet"], tmp_path, env)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    played = sorted(row[0] for row in conn.execute("SELECT identity FROM items WHERE run_id = ?", (run_id,)))
    assert played == ["id:${TENANT_A}-one", "id:${TENANT_A}-two"]
    unset = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path, {"TENANT_A": ""})
    assert unset.code == 2 and "--filter held the secret ${TENANT_A}" in unset.stderr, unset.stdout + unset.stderr


ESCAPING = '''
import os
from xml.sax.saxutils import escape

from markupsafe import escape as jinja_escape

def agent(input, **kw):
    secret = os.environ["DB_PASSWORD"]
    if input == "jinja":
        return "<p>password: " + str(jinja_escape(secret)) + "</p>"
    return "<pw>" + escape(secret, {"'": "&apos;", '"': "&quot;"}) + "</pw>"
'''


def test_a_secret_html_escaped_as_jinja_or_xml_writes_it_is_redacted(tmp_path: Path) -> None:
    """A secret holding quotes, escaped as Jinja2/markupsafe writes HTML (`it&#39;s&#34;pw123`) or as XML does
    (`&apos;`, `&quot;`) in an agent's reply, was stored and reported as it was: only Python's `html.escape` form
    (`&#x27;`) was known (docs/secrets.md promises HTML-encoded forms)."""
    (tmp_path / "agent.py").write_text(ESCAPING)
    (tmp_path / "d.yaml").write_text("target: agent:agent\ngates: [{includes: hello}]\n"
                                     "data:\n  - {id: jinja, input: jinja}\n  - {id: xml, input: xml}\n")
    done = run_cli(["run", "d.yaml", "--json", "r.json"], tmp_path, {"DB_PASSWORD": "it\'s\"pw123"})
    assert done.code == 1, done.stdout + done.stderr
    outputs = _outputs(tmp_path, done.stdout, done.stderr)
    assert "[redacted]" in outputs["r.json"]
    assert not [where for where, data in outputs.items() if "pw123" in data], outputs["r.json"]
