"""Usage and cost per purpose (docs/budgets.md): the target's, the simulated user's and the judges' calls counted apart
in the JSON, the terminal's summary, ``show``, ``compare`` and the HTML report, through the real CLI against the
loopback OpenAI-compatible server (each purpose's model answers with its own token counts)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, completion

TOKENS = {"target-m": (100, 10), "sim-m": (20, 2), "judge-m": (7, 1)}


def by_model(request: Request) -> Reply:
    model = str(request.body.get("model"))
    prompt, out = TOKENS[model]
    if model == "judge-m":
        text = json.dumps({"satisfied": True, "reasoning": "It answered."})
    elif model == "sim-m":
        users = [m for m in request.messages if m["role"] == "user"]
        text = f"tell me more ({len(users)})"
    else:
        text = f"ok, about {request.messages[-1]['content']}"
    return Reply(body=completion(text, prompt_tokens=prompt, completion_tokens=out))


DATASET = """
target:
  model: openai/target-m
scorers:
  - judge: {criterion: The assistant answered., model: openai/judge-m}
data:
  - {id: scripted, inputs: [one, two]}
  - id: simulated
    simulate: {goal: Learn things., opening: hello, max_turns: 2, model: openai/sim-m}
"""


def test_usage_is_reported_per_purpose_everywhere(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                  llm_server: LLMServer) -> None:
    llm_server.responder = by_model
    write("d.yaml", DATASET)
    env = {"OPENAI_API_BASE": llm_server.url}
    first = cli("run", "d.yaml", "--json", "-", env=env)
    assert first.code == 0, first.stderr
    usage = first.json["usage"]
    # 4 target turns (2 scripted, 2 simulated), 1 simulator call (the opening is scripted), 2 judge calls
    assert usage["purposes"]["target"] == {"calls": 4, "cache_hits": 0, "prompt_tokens": 400, "completion_tokens": 40,
                                           "cost": 0.0}
    assert usage["purposes"]["simulator"]["calls"] == 1 and usage["purposes"]["simulator"]["prompt_tokens"] == 20
    assert usage["purposes"]["judge"]["calls"] == 2 and usage["purposes"]["judge"]["prompt_tokens"] == 14
    assert usage["calls"] == 7 and usage["prompt_tokens"] == 434 and usage["completion_tokens"] == 44
    assert "by purpose: target 4 calls, 400 in / 40 out, $0.0000; simulator 1 call, 20 in / 2 out, $0.0000; " \
           "judge 2 calls, 14 in / 2 out, $0.0000" in first.stderr
    shown = cli("show", "latest", "--json", "-", env=env).json
    assert shown["usage"] == usage

    second = cli("run", "d.yaml", "--json", "-", "--html", "r.html", env=env)  # simulator and judge from the cache
    assert second.code == 0, second.stderr
    assert second.json["usage"]["purposes"]["judge"]["cache_hits"] == 2
    page = (second.cwd / "r.html").read_text()
    assert "target 4 calls, 400 in / 40 out" in page and "judge 2 calls, 0 in / 0 out" in page
    compared = cli("compare", first.json["run_id"], second.json["run_id"], "--html", "c.html", env=env)
    assert compared.code == 0, compared.stderr
    lines = {line.split("│")[1].strip(): line for line in compared.stdout.splitlines() if line.count("│") > 2}
    assert "440" in lines["target tokens"] and "22" in lines["simulator tokens"] and "16" in lines["judge tokens"]
    assert "judge tokens" in (compared.cwd / "c.html").read_text()
