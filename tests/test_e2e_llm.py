"""The judge through the real CLI against a loopback OpenAI-compatible server: cache, --no-cache, cache clear,
usage totals in the DB, and a judge error that is never a pass."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.llm_server import LLMServer, status, verdict

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

DATASET = """
target: agents:echo
scorers:
  - scorer: fair-judge
    threshold: 1
data:
  - {id: a, input: Brooklyn is sunny}
  - {id: b, inputs: [hello, Paris is rainy]}
"""
REGISTRY = """
scorers:
  fair-judge:
    multi_turn_judge:
      model: openai/judge-model
      api_base: {url}
      criterion: The assistant repeated what the user said.
"""


def _env(server: LLMServer) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "1"}


def test_judge_cache_hits_on_second_run_and_clears(llm_server: LLMServer, write: Callable[..., Path],
                                                    cli: Callable[..., CliResult]) -> None:
    llm_server.responder = lambda request: verdict(True, "It repeated the user.")
    write("scorers.yaml", REGISTRY.format(url=llm_server.url))
    write("d.yaml", DATASET)
    first = cli("run", "d.yaml", "--json", "-", env=_env(llm_server))
    assert first.code == 0, first.stderr
    assert first.json["scores"] == {"fair-judge": 1.0} and first.json["verdict"] == "passed"
    assert len(llm_server.requests) == 2
    sent = next(r.messages for r in llm_server.requests if "hello" in r.messages[-1]["content"])
    assert "Assistant turn 1: You said: hello" in sent[-1]["content"]
    assert "Assistant turn 2: You said: Paris is rainy" in sent[-1]["content"]
    assert [m["role"] for m in sent] == ["system", "user"]  # the judge's own prompt; no conversation turns
    second = cli("run", "d.yaml", env=_env(llm_server))
    assert second.code == 0 and len(llm_server.requests) == 2  # both answers came from the cache
    assert "cache hits: 2" in second.stdout
    row = second.db().execute("SELECT llm_calls, cache_hits FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    assert tuple(row) == (2, 2)
    assert cli("run", "d.yaml", "--no-cache", env=_env(llm_server)).code == 0
    assert len(llm_server.requests) == 4
    cleared = cli("cache", "clear")
    assert cleared.code == 0 and "removed 2" in cleared.stdout
    assert cli("run", "d.yaml", env=_env(llm_server)).code == 0 and len(llm_server.requests) == 6
    scores = second.db().execute("SELECT COUNT(*), MIN(score), MAX(reason) FROM scores WHERE scorer_id = 'fair-judge'")
    count, low, reason = scores.fetchone()
    assert count == 8 and low == 1.0 and reason.startswith("Criterion satisfied.")


def test_provider_failure_is_a_scorer_error_never_a_pass(llm_server: LLMServer, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    llm_server.responder = lambda request: status(500, message="provider down")
    write("scorers.yaml", REGISTRY.format(url=llm_server.url))
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--json", "-", env=_env(llm_server))
    assert result.code == 4
    out = result.json
    assert out["summary"]["scorer_errors"] == {"fair-judge": 2} and out["scores"] == {} and out["verdict"] is None
    assert all("provider down" in item["outcomes"]["scorers"]["fair-judge"]["error"] for item in out["items"])
    assert "sk-test-not-a-real-key" not in result.stdout + result.stderr
