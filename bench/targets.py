"""Benchmark targets: a fixed simulated latency, either as ``asyncio.sleep`` or a real HTTP model call.

Both answer every turn with the same three response messages (a ``get_weather`` tool call, its
result, and a sentence naming the city), so the benchmark's checks (``called_tool``, ``includes``)
pass and the work per turn is the same whichever target runs. The latency comes from the dataset's
``target_options`` (``latency``, in seconds), so one module serves every size.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

_ids = itertools.count()


def reply(text: str, tools: bool = True) -> list[dict[str, Any]]:
    """The response of one turn: a tool call, its result, and the answer (only the answer without ``tools``)."""
    if not tools:
        return [{"role": "assistant", "content": f"It is 21°C and clear in Brooklyn. ({text[:20]})"}]
    call_id = f"call_{next(_ids)}"
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call_id, "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Brooklyn"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": '{"temp_c": 21, "sky": "clear"}'},
        {"role": "assistant", "content": f"It is 21°C and clear in Brooklyn. ({text[:20]})"},
    ]


_FIRST = os.environ.get("EVALCLI_BENCH_FIRST_TURN")
"""bench.workload.FIRST_TURN: where the first turn's time goes (the floor's timeline, bench/floor.py)."""
_marked: list[bool] = []


def _mark_first_turn() -> None:
    from bench.workload import first_turn_at

    _marked.append(True)
    first_turn_at(_FIRST)


class SleepAgent:
    """An async target that waits ``latency`` seconds per turn (no network at all)."""

    memory = True  # it "remembers" as far as evalcli is concerned: no memory warning in the benchmark

    async def generate(self, input: str, *, memory: dict[str, Any] | None = None, latency: float = 0.0,
                       tools: bool = True) -> Any:
        if _FIRST is not None and not _marked:
            _mark_first_turn()
        if latency > 0:
            await asyncio.sleep(latency)
        else:
            await asyncio.sleep(0)  # still yield to the loop, like any real awaitable target
        return reply(input, tools)


class HttpAgent:
    """An async target making one chat completion per turn through evalcli's LLM client (on the backend
    ``EVALCLI_LLM_BACKEND`` names: evalcli's own Chat Completions client by default, or litellm).

    The model is ``openai/bench`` at ``api_base`` (the benchmark's loopback server, which answers
    after the same fixed latency); the answer's text is wrapped in the same tool-call messages.
    """

    memory = True

    def __init__(self) -> None:
        self._client: Any = None

    async def generate(self, input: str, *, memory: dict[str, Any] | None = None, api_base: str = "",
                       latency: float = 0.0, tools: bool = True) -> Any:
        if self._client is None:
            from evalcli.llm.client import LLMClient, LLMSettings

            self._client = LLMClient(LLMSettings(retries=0, timeout=30))  # the backend: from the environment
        response = await self._client.complete(model="openai/bench", api_base=api_base, purpose="target",
                                               messages=[{"role": "user", "content": input}])
        text = response["choices"][0]["message"]["content"] or ""
        return reply(text, tools)


sleep_agent = SleepAgent()
http_agent = HttpAgent()


def cpu_agent(input: str, *, latency: float = 0.02, tools: bool = True, **options: Any) -> list[dict[str, Any]]:
    """A CPU-bound agent (a framework's own Python work): ``latency`` seconds of this thread's CPU a turn, spent
    holding the GIL, then the reply (``bench/workers.py``)."""
    import time

    start = time.thread_time()
    while time.thread_time() - start < latency:
        pass
    return reply(input, tools)
