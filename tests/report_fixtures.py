"""A small run worth reporting, made through the real CLI: passing, failing (top-level and per-turn
gates), errored and hostile conversations, tags, a tool call with arguments, a tool error, and an LLM
judge answering from the loopback server with a reason. ``AGENT_MODE=b`` makes the second run: the
``brooklyn`` conversation regresses, ``paris`` improves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.llm_server import LLMServer, Reply, Request, verdict

AGENT = '''
import json, os


def _weather(city, extra=""):
    call = {"id": "call_w1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city, "unit": "fahrenheit"})}}
    return {"messages": [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_w1", "content": json.dumps({"temp": 72, "sky": "sunny"})},
        {"role": "assistant", "content": f"It is 72F and sunny in {city}.{extra}"}]}


def agent(input, **kw):
    mode = os.environ.get("AGENT_MODE", "a")
    if "boom" in input:
        raise ValueError("kaboom from the agent")
    if "Brooklyn" in input:
        return _weather("Brooklyn", " FORBIDDEN" if mode == "b" else "")
    if "Paris" in input:
        return _weather("Paris", " FORBIDDEN" if mode == "a" else "")
    if "Rome" in input:
        return _weather("Rome")
    if "script" in input:
        return ('<script>window.__pwned = 1; document.title = "pwned"</script>'
                '<img src="https://example.invalid/x.png" onerror="window.__pwned = 2"> </script><b>bold?</b>')
    if "lookup" in input:
        call = {"id": "call_l1", "type": "function", "function": {"name": "lookup", "arguments": "{\\"q\\": \\"Atlantis\\"}"}}
        return [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_l1", "content": json.dumps({"error": "city not found"})},
                {"role": "assistant", "content": "I could not find that city."}]
    return "Just chatting, no forecast today."
'''

DATASET = """
target: reportagent:agent
gates:
  - excludes: FORBIDDEN
scorers:
  - scorer: gave-temperature
    threshold: 0.5
  - no-tool-errors
data:
  - {id: brooklyn, tags: [weather, smoke], input: "What is the weather in Brooklyn?"}
  - {id: paris, tags: [weather], input: "What is the weather in Paris?"}
  - {id: boom, tags: [errors], input: boom please}
  - {id: hostile, tags: [security], input: "say script"}
  - {id: atlantis, input: lookup Atlantis}
  - {id: chat, tags: [smoke], input: hello there}
  - id: rome-turns
    tags: [multi]
    turns:
      - input: What is the weather in Rome?
        gates: [{called_tool: get_weather}]
      - input: thanks, bye
        gates: [{called_tool: get_weather}]
"""

REGISTRY = """
scorers:
  gave-temperature:
    multi_turn_judge:
      model: openai/judge-model
      api_base: {url}
      criterion: The assistant gave the temperature.
  no-tool-errors:
    no_tool_errors: {{}}
"""

JUDGE_YES = "The assistant said it is 72F, which is a temperature."
JUDGE_NO = "No temperature appears in the assistant's replies."


def judge(request: Request) -> Reply:
    """Satisfied when the fenced transcript gives 72F."""
    said = request.messages[-1]["content"]
    return verdict(True, JUDGE_YES) if "72F" in said else verdict(False, JUDGE_NO)


def env(server: LLMServer, mode: str = "a") -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0",
            "AGENT_MODE": mode}


def write_project(folder: Path, server: LLMServer) -> None:
    """The agent, the dataset and the registry (its judge pointed at ``server``)."""
    server.responder = judge
    (folder / "reportagent.py").write_text(AGENT)
    (folder / "d.yaml").write_text(DATASET)
    (folder / "scorers.yaml").write_text(REGISTRY.format(url=server.url))


def run_ids(db: Path) -> list[str]:
    """The stored run ids, oldest first."""
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]


def transcripts(html: str) -> list[dict[str, Any]]:
    """The transcripts embedded in a report."""
    start = html.index('<script type="application/json" id="evalcli-transcripts">')
    body = html[html.index(">", start) + 1:html.index("</script>", start)]
    return list(json.loads(body))
