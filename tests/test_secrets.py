"""Planted secrets never reach anything evalcli writes: the DB file (and its WAL), the JSON, JUnit and
Markdown reports, the GitHub step summary, stdout/stderr, ``evalcli show``. The target echoes them in
its replies, tool calls and exceptions; a judge and a provider error repeat them too."""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.secrets import Redactor
from tests.llm_server import LLMServer, Reply, Request, status, verdict
from tests.reliability_helpers import cli_env, load_json, run_cli, write_project

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

AGENT = """
import json, os

def generate(input, *, api_token=None, deploy=None, **options):
    key = os.environ["OPENAI_API_KEY"]
    if input == "raise":
        raise RuntimeError(f"upstream refused key {key} and token {api_token}")
    if input == "tool":
        return {"messages": [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "login", "arguments": json.dumps({"key": key, "token": api_token})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": f"logged in with {api_token}", "is_error": True},
            {"role": "assistant", "content": f"done with {deploy} and the key"}]}
    return f"{input}: my key is {key}, my token is {api_token}, deploy value {deploy}"
"""

DATASET = """
target: agent:generate
target_options:
  api_token: ${MY_TOKEN}
  deploy: ${DEPLOY_VALUE}
gates:
  - says-key
scorers:
  - leaky-judge
data:
  - {id: echo, input: "repeat ${MY_TOKEN} please", ground_truth: {token: "${MY_TOKEN}"}}
  - {id: raise, input: raise}
  - {id: tool, input: tool}
  - {id: judge-fails, input: judge-fails}
  - id: multi
    turns:
      - input: first
      - input: second
        scorers: [says-key]
"""

SCORERS = """
scorers:
  says-key:
    includes: key
  leaky-judge:
    multi_turn_judge:
      model: openai/judge-model
      api_base: {url}
      criterion: The assistant kept its credentials to itself.
"""


def test_planted_secrets_are_in_no_output(llm_server: LLMServer, tmp_path: Path) -> None:
    key = f"sk-planted-{secrets.token_hex(12)}"
    token = f"tok-planted-{secrets.token_hex(12)}"
    deploy = f"sk_live_{secrets.token_hex(12)}"  # a key by its shape, under a harmless-looking name
    planted = {"OPENAI_API_KEY": key, "MY_TOKEN": token, "DEPLOY_VALUE": deploy}

    def judge(request: Request) -> Reply:
        prompt = request.messages[1]["content"]
        if "judge-fails" in prompt:
            return status(401, message=f"Incorrect API key provided: {key}")
        return verdict(False, f"It revealed {key}, {token} and {deploy}.")

    llm_server.responder = judge
    write_project(tmp_path, agent=AGENT, dataset=DATASET, scorers=SCORERS.format(url=llm_server.url))
    env = cli_env(**planted, EVALCLI_LLM_RETRIES="0", GITHUB_STEP_SUMMARY=str(tmp_path / "step-summary.md"))
    done = run_cli(["run", "ds.yaml", "--json", "out.json", "--junit", "junit.xml", "--markdown", "report.md",
                    "--verbose"], tmp_path, env)
    assert done.returncode == 4, done.stderr  # 'raise' is an item error, 'judge-fails' its judge's error
    result = load_json((tmp_path / "out.json").read_text())
    shown = run_cli(["show", result["run_id"]], tmp_path, env)
    runs = run_cli(["runs"], tmp_path, env)
    assert shown.returncode == 0 and runs.returncode == 0, shown.stderr + runs.stderr

    # the target really did see and echo the secrets (so redaction, not luck, keeps them out)
    prompts = " ".join(json.dumps(r.body) for r in llm_server.requests)
    assert key in prompts and token in prompts and deploy in prompts

    wal = tmp_path / "evalcli.db-wal"
    outputs: dict[str, bytes] = {
        "stdout": done.stdout.encode(), "stderr": done.stderr.encode(),
        "show": (shown.stdout + shown.stderr).encode(), "runs": (runs.stdout + runs.stderr).encode(),
        "db-wal before checkpoint": wal.read_bytes() if wal.exists() else b"",
    }
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for name in ("evalcli.db", "out.json", "junit.xml", "report.md", "step-summary.md"):
        outputs[name] = (tmp_path / name).read_bytes()
    for name, data in outputs.items():
        for variable, value in planted.items():
            assert value.encode() not in data, f"{variable} leaked into {name}"
            assert value[-12:].encode() not in data, f"part of {variable} leaked into {name}"

    # and the places they would have been show the redaction
    errors = {item["id"]: item["error"] for item in result["items"] if item["status"] == "error"}
    assert set(errors) == {"raise"}
    assert errors["raise"] == "turn 0: the target raised RuntimeError: upstream refused key [redacted] and token [redacted]"
    failed = next(item for item in result["items"] if item["id"] == "judge-fails")
    assert "[redacted]" in failed["outcomes"]["scorers"]["leaky-judge"]["error"]
    echo = next(item for item in result["items"] if item["id"] == "echo")
    assert echo["turns"][0]["input"] == "repeat [redacted] please"
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    reasons = [r for (r,) in conn.execute("SELECT reason FROM scores WHERE scorer_id = 'leaky-judge'")]
    tracebacks = [t for (t,) in conn.execute("SELECT traceback FROM items WHERE traceback IS NOT NULL")]
    conn.close()
    assert reasons and all("It revealed [redacted], [redacted] and [redacted]." in r for r in reasons)
    assert any("RuntimeError: upstream refused key [redacted]" in t for t in tracebacks)


SECRETS = ["sk-live-0123456789abcdef", 'quote"back\\slash-secret', "pässwörd-ünïcode-secret", "tab\there-secret-value"]


@given(st.recursive(st.one_of(st.none(), st.integers(), st.booleans(),
                              st.builds(lambda a, s, b: a + s + b, st.text(max_size=8), st.sampled_from(["", *SECRETS]),
                                        st.text(max_size=8))),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.text(max_size=6) | st.sampled_from(SECRETS), inner,
                                                            max_size=4)), max_leaves=12),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_redacted_json_is_the_same_whether_or_not_the_value_is_walked(value: object, ascii_only: bool) -> None:
    redact = Redactor(extra=SECRETS, env={})
    fast = redact.dumps(value, ensure_ascii=ascii_only, default=str)
    assert fast == json.dumps(redact.value(value), ensure_ascii=ascii_only, default=str)
    assert not any(secret in fast for secret in SECRETS)
