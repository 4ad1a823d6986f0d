"""A scripted stand-in for the simulated user's model, to try ``datasets/simulated.yaml`` with no API key and no network.

``python -m examples.frameworks.scripted_user --port 8766`` serves ``POST /v1/chat/completions`` on 127.0.0.1
(OpenAI's Chat Completions format); point the simulator at it with
``EVALCLI_SIMULATOR_MODEL=openai/scripted-user OPENAI_API_BASE=http://127.0.0.1:8766/v1``. Like
``scripted_model``, it remembers nothing itself: each reply is worked out from the request's own messages, as
evalcli sends them to a simulator (docs/simulated-users.md): the instructions (goal, persona, facts), the user's earlier
messages (as ``assistant`` messages: roles are flipped) and the agent's words, fenced between transcript markers.

It plays the users of ``datasets/simulated.yaml`` the way a patient person would: it asks about its goal without
giving away what it knows (the city), answers a question about a fact it holds ("Which city do you mean?" ->
"Paris."), asks once more when the answer is for another day than its goal ("And tomorrow?"), then thanks the
agent and stops (``###STOP###``). A question about something it does not know gets "I don't know.", which a
real user would say too; asked again, that repeat ends the conversation as a ``loop``.
"""

from __future__ import annotations

import argparse
import re
import time
from http.server import ThreadingHTTPServer
from typing import Any

from evalcli.llm.fence import TRANSCRIPT_END, TRANSCRIPT_START
from examples.loopback import json_server

STOP = "###STOP###"
DAYS = ("tomorrow", "today", "tonight")


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def section(instructions: str, heading: str) -> str:
    """The lines under one heading of the simulator's instructions (up to the next blank line)."""
    _, found, rest = instructions.partition(heading)
    return rest.split("\n\n", 1)[0].strip() if found else ""


def facts_of(instructions: str) -> dict[str, str]:
    """``- name: value`` lines under "What you know" (none when it says nothing in particular)."""
    block = section(instructions, "What you know")
    pairs = (re.match(r"-\s*([^:]+):\s*(.+)", line.strip()) for line in block.splitlines()[1:])
    return {m.group(1).strip(): m.group(2).strip() for m in pairs if m}


def agent_said(message: dict[str, Any]) -> str | None:
    """The agent's words inside the fence of the last request message, or ``None`` before the agent spoke."""
    content = text_of(message)
    if TRANSCRIPT_START not in content:
        return None
    return content.split(TRANSCRIPT_START, 1)[1].split(TRANSCRIPT_END, 1)[0].strip()


def first_question(goal: str, facts: dict[str, str]) -> str:
    """The goal asked as a question, with what the user knows left out (the agent has to ask for it)."""
    text = re.sub(r"^(find out|learn|ask)\s+", "", goal.strip().rstrip("."), flags=re.IGNORECASE)
    for value in facts.values():
        text = re.sub(rf"\s+(?:in|for|at|of)\s+{re.escape(value)}\b", "", text)
    text = re.sub(r"\byour\b", "my", re.sub(r"\byou\b", "I", text))
    if text.startswith("whether "):
        return "Do " + text.removeprefix("whether ") + "?"
    if text.startswith("the "):
        return "What is " + text + "?"
    return text[:1].upper() + text[1:] + "?"


def next_user_message(messages: list[dict[str, Any]]) -> str:
    """The simulated user's next message, from the request alone."""
    instructions = text_of(messages[0]) if messages else ""
    goal = section(instructions, "Your goal in this conversation:") or "get some help"
    facts = facts_of(instructions)
    said = [text_of(m) for m in messages if m.get("role") == "assistant"]
    heard = agent_said(messages[-1]) if messages else None
    if heard is None:
        return first_question(goal, facts)
    lowered = heard.lower()
    if heard.rstrip().endswith("?"):
        for name, value in facts.items():
            if any(word in lowered for word in name.lower().replace("_", " ").split()):
                return f"{value}."
        return "I don't know."
    for day in DAYS:
        asked = f"And {day}?"
        if day in goal.lower() and day not in lowered and asked not in said:
            return asked
    return f"Great, thanks! {STOP}"


def completion(content: str, model: str) -> dict[str, Any]:
    """A Chat Completions response body holding the user's message."""
    return {"id": "chatcmpl-scripted-user", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def answer(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response body for a chat completion request: the user's next message."""
    return completion(next_user_message(body.get("messages") or []), str(body.get("model", "scripted-user")))


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The server on 127.0.0.1 (``port`` 0: any free one), not yet serving: call ``serve_forever``."""
    return json_server(answer, port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8766)
    server = serve(parser.parse_args().port)
    print(f"scripted simulated user on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
