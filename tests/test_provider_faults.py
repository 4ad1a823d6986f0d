"""Provider faults caused for real by a loopback server that misbehaves on purpose (429 with Retry-After,
500s, timeouts, connection refused, malformed JSON, empty replies), through the real CLI: once in a
judge scorer, once inside an ``evalcli.Agent`` target. Retries are bounded; what still fails is the judge's error
or the conversation's (exit 4), never a pass and never a crash (``--max-errors`` is covered in test_target_faults)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.llm_server import LLMServer, Reply, Request, empty, malformed, slow, status, text, verdict
from tests.reliability_helpers import cli_env, closed_port, load_json, query, run_cli, write_project

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

ECHO_AGENT = """
def generate(input, **options):
    return f"answer to {input}"
"""

JUDGE_KEYS = ["ok", "rate", "flaky", "down", "slow", "garbled", "silent", "stringy", "refused"]
JUDGE_ERRORS = {
    "down": "failed after 2 attempts: InternalServerError",
    "slow": "failed after 2 attempts: Timeout",
    "garbled": "failed after 2 attempts",
    "silent": "no readable verdict from openai/judge-model after 3 attempts; last reply: (empty reply)",
    "stringy": "no readable verdict",
    "refused": "judge dead-judge: model openai/judge-model failed after 2 attempts",
}


def judge_dataset() -> str:
    lines = ["target: agent:generate", "concurrency: 9", "scorers:", "  - scorer: fair-judge", "    threshold: 1",
             "data:"]
    for key in JUDGE_KEYS:
        if key == "refused":
            lines += [f"  - id: {key}", "    turns:", f"      - input: {key}",
                      "        scorers: [{scorer: dead-judge, threshold: 1}]"]
        else:
            lines.append(f"  - {{id: {key}, input: {key}}}")
    return "\n".join(lines) + "\n"


JUDGE_REGISTRY = """
scorers:
  fair-judge:
    multi_turn_judge: {{model: openai/judge-model, api_base: "{url}", criterion: The assistant answered.}}
  dead-judge:
    multi_turn_judge: {{model: openai/judge-model, api_base: "{dead}", criterion: The assistant answered.}}
"""


class Script:
    """Answers each request by the keyword it is about, counting requests per keyword."""

    def __init__(self, pattern: str, plan: dict[str, Any]) -> None:
        self.pattern = re.compile(pattern)
        self.plan = plan
        self.counts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        found = self.pattern.search(" ".join(str(m.get("content")) for m in request.messages))
        key = found.group(1) if found else "?"
        with self.lock:
            self.counts[key] += 1
            self.times.setdefault(key, []).append(request.at)
            n = self.counts[key]
        answer = self.plan.get(key, status(400, message=f"unexpected request about {key!r}"))
        reply: Reply = answer(n) if callable(answer) else answer
        return reply


def test_judge_faults_are_bounded_item_errors_never_passes(llm_server: LLMServer, tmp_path: Path) -> None:
    script = Script(r"answer to (\w+)", {
        "ok": verdict(True),
        "rate": lambda n: status(429, retry_after=1) if n == 1 else verdict(True),
        "flaky": lambda n: status(500) if n == 1 else text("no json here") if n == 2 else verdict(True),
        "down": status(500),
        "slow": slow(verdict(True), 12.0),
        "garbled": malformed(),
        "silent": empty(),
        "stringy": text('{"satisfied": "true", "reasoning": "I insist this passes"}'),
        "refused": verdict(True),
    })
    llm_server.responder = script
    write_project(tmp_path, agent=ECHO_AGENT, dataset=judge_dataset(),
                  scorers=JUDGE_REGISTRY.format(url=llm_server.url, dead=f"http://127.0.0.1:{closed_port()}/v1"))
    # 8 s, not less: litellm's first call builds its models and imports (0.3 s of CPU idle) and a CI machine running
    # 16 test workers on 2 cores stretched it past a 2 s timeout, and once past 5 s, a spurious retry that broke the
    # counts below (the slow reply, 12 s, still times out)
    env = cli_env(EVALCLI_LLM_RETRIES="1", EVALCLI_LLM_TIMEOUT="8")

    done = run_cli(["run", "ds.yaml", "--json", "-", "--no-cache"], tmp_path, env)
    assert done.returncode == 4, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    result = load_json(done.stdout)
    items = {item["id"]: item for item in result["items"]}
    assert all(item["status"] == "ok" for item in items.values())  # a judge's failure is its own error
    for key, message in JUDGE_ERRORS.items():
        # the judge that failed has no score, only its error (never counted in a mean)
        level = items[key]["turns"][0] if key == "refused" else items[key]
        failed = level["outcomes"]["scorers"]["dead-judge" if key == "refused" else "fair-judge"]
        assert failed["score"] is None and message in failed["error"], (key, failed)
    assert all(items[k]["scores"] == {"fair-judge": 1.0} for k in ("ok", "rate", "flaky", "refused"))
    assert result["summary"]["errors"] == 0
    assert result["summary"]["scorer_errors"] == {"fair-judge": len(JUDGE_ERRORS) - 1, "dead-judge": 1}
    assert result["scores"] == {"fair-judge": 1.0}  # only what was judged counts

    # retries are bounded: 1 attempt + EVALCLI_LLM_RETRIES=1 per call, 3 parse attempts per verdict
    assert script.counts["down"] == script.counts["garbled"] == script.counts["slow"] == 2
    assert script.counts["silent"] == script.counts["stringy"] == 3
    assert script.counts["flaky"] == 3 and script.counts["rate"] == 2
    first, second = script.times["rate"]
    assert second - first >= 0.9, "Retry-After: 1 was not honoured"

    db = tmp_path / "evalcli.db"
    stored = dict(query(db, "SELECT item_id, status FROM items"))
    assert stored == {k: i["status"] for k, i in items.items()}
    scored = {i for (i,) in query(db, "SELECT DISTINCT item_id FROM scores")}
    assert scored == {"ok", "rate", "flaky", "refused"}
    assert query(db, "SELECT status, exit_code, errors FROM runs") == [("completed", 4, 0)]



AGENT_MODULE = """
import os
import evalcli

live = evalcli.Agent(model="openai/agent-model", instructions="Be brief.", api_base=os.environ["AGENT_BASE"])
dead = evalcli.Agent(model="openai/agent-model", api_base=os.environ["DEAD_BASE"])

async def generate(input, **options):
    return await (dead if "refused" in input else live).generate(input, **options)
"""

AGENT_ERRORS = {
    "down": "the target raised LLMError: model openai/agent-model failed after 2 attempts: ServiceUnavailableError",
    "garbled": "the target raised LLMError: model openai/agent-model failed after 2 attempts",
    "blank": "the target raised LLMError: model openai/agent-model failed after 2 attempts",
    "nochoice": "the target raised AgentError: the model returned no message",
    "badreq": "the target raised LLMError: model openai/agent-model failed after 1 attempt: BadRequestError",
    "refused": "the target raised LLMError: model openai/agent-model failed after 2 attempts",
}


def test_agent_target_faults_are_item_errors_with_tracebacks(llm_server: LLMServer, tmp_path: Path) -> None:
    script = Script(r"ask (\w+)", {
        "fine": text("fine thanks"),
        "rate": lambda n: status(429, retry_after=0.5) if n == 1 else text("fine after waiting"),
        "down": status(503),
        "garbled": malformed(),
        "blank": Reply(body=""),
        "nochoice": Reply(body={"id": "x", "object": "chat.completion", "choices": []}),
        "badreq": status(400),
    })
    llm_server.responder = script
    keys = ["fine", "rate", *AGENT_ERRORS]
    dataset = "target: agent:generate\nconcurrency: 8\ngates:\n  - includes: fine\ndata:\n" + "".join(
        f"  - {{id: {k}, input: ask {k}}}\n" for k in keys)
    write_project(tmp_path, agent=AGENT_MODULE, dataset=dataset)
    # a timeout long enough for litellm's first call on a loaded machine: a timed-out first try would be a second attempt
    env = cli_env(EVALCLI_LLM_RETRIES="1", EVALCLI_LLM_TIMEOUT="10", AGENT_BASE=llm_server.url,
                  DEAD_BASE=f"http://127.0.0.1:{closed_port()}/v1")

    done = run_cli(["run", "ds.yaml", "--json", "-", "--max-errors", str(len(AGENT_ERRORS) - 1)], tmp_path, env)
    assert done.returncode == 4, done.stderr
    assert "internal error" not in done.stderr
    result = load_json(done.stdout)
    items = {item["id"]: item for item in result["items"]}
    assert {k for k, i in items.items() if i["status"] == "ok"} == {"fine", "rate"}
    assert result["verdict"] == "passed" and result["summary"]["errors"] == len(AGENT_ERRORS)
    for key, message in AGENT_ERRORS.items():
        assert message in items[key]["error"], (key, items[key]["error"])
    assert script.counts["down"] == script.counts["garbled"] == script.counts["blank"] == 2
    assert script.counts["badreq"] == 1, "a 400 is not retried"
    tracebacks = dict(query(tmp_path / "evalcli.db", "SELECT item_id, traceback FROM items WHERE status = 'error'"))
    assert set(tracebacks) == set(AGENT_ERRORS)
    assert all(tb and "Traceback (most recent call last)" in tb for tb in tracebacks.values())
