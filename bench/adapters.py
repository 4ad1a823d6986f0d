"""Adapter overhead: each framework's agent driven directly and through evalcli's adapter, same server, same loop.

``python bench/adapters.py --serve [--latency S]`` starts the model: a loopback OpenAI-compatible server (aiohttp)
that plays the weather assistant from each request's own messages (``examples/frameworks/scripted_model.py``):
every turn is a ``get_weather`` call, the tool's result, then the answer (two model requests). It prints
``PORT <n>``.

``python bench/adapters.py --framework pydantic_ai --api-base URL [--n 1000 --turns 3 --concurrency 32]`` builds
one agent object and plays N conversations of T turns, ``concurrency`` at a time, twice over: directly with the
framework (``bench/framework_agents.py``: its own thread per conversation and a fresh deps/context object) and
through evalcli as a run plays one (the conversation's ``setup`` generator, then the adapter's session: ``open``,
``send`` per turn, ``close``, the setup's cleanup; evalcli's ``TargetCalls``; for the Agents SDK
``continue_with: last_agent``). Both in one event loop, warmed up, in interleaved batches (``--batches``),
``--repeat`` rounds (fastest kept). Prints one JSON line: both walls (and CPU seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.framework_agents import Conversation, build, direct, smolagents_message
from examples.frameworks.scripted_model import completion, next_message, tool_names
from examples.loopback import sse

TURNS = ["What is the weather in Brooklyn?", "What about tomorrow?", "What is the weather in Paris?"]


def through_adapter(agent: Any, framework: str) -> Conversation:
    """One conversation through evalcli, as the runner plays it: the setup, the adapter's session, the cleanup."""
    from bench import framework_agents
    from evalcli.targets import ConversationInfo, ConversationOptions, Setup, make_adapter, merge_options
    from evalcli.targets.calls import TargetCalls, TargetThreads

    options: dict[str, Any] = {"setup": "bench.framework_agents:setup"}
    if framework == "openai_agents":
        options["continue_with"] = "last_agent"
    adapter = make_adapter("bench", agent, options)
    calls = TargetCalls(TargetThreads())
    count = iter(range(10**9))

    async def conversation(turns: list[str]) -> list[Any]:
        thread = adapter.thread(adapter.options, multi_turn=True)
        setup = Setup(options["setup"], framework_agents.setup, calls)
        returned = await setup.enter(ConversationInfo(thread.thread, thread.resource, f"c{next(count)}"))
        if adapter.returned_problems(returned):
            raise SystemExit(f"the setup returned options the agent does not take: {returned}")
        merged = merge_options(adapter.options, returned)
        try:
            session = adapter.open(multi_turn=True, calls=calls,
                                   conversation=ConversationOptions(thread, merged, frozenset(returned)))
            try:
                return [(await session.send(text)).messages for text in turns]
            finally:
                await session.close()
        finally:
            await setup.exit()

    return conversation


async def timed(conversation: Conversation, n: int, turns: int, concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds to play ``n`` conversations, ``concurrency`` at a time; checks each last answer."""
    pending = iter(range(n))
    texts = (TURNS * turns)[:turns]

    async def worker() -> None:
        for _ in pending:
            outputs = await conversation(texts)
            if len(outputs) != turns or "°F" not in json.dumps(outputs[-1], default=str, ensure_ascii=False):
                raise SystemExit(f"a conversation did not get its forecast: {outputs[-1]!r}"[:2000])

    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, time.process_time() - cpu


async def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Both ways over N conversations, played in interleaved batches (the machine's load drifts: each batch of one
    way runs next to a batch of the other, in alternating order); the sums, fastest of ``--repeat`` rounds."""
    agent = build(args.framework, args.api_base)
    ways = {"direct": direct(args.framework, agent), "adapter": through_adapter(agent, args.framework)}
    for conversation in ways.values():  # warm-up: imports, connection pools, caches
        await timed(conversation, args.concurrency, args.turns, args.concurrency)
    batches = max(1, min(args.batches, args.n // args.concurrency))
    sizes = [args.n // batches + (1 if i < args.n % batches else 0) for i in range(batches)]
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        totals = {name: [0.0, 0.0] for name in ways}
        for i, size in enumerate(sizes):
            for name in (list(ways) if i % 2 == 0 else list(reversed(ways))):
                wall, cpu = await timed(ways[name], size, args.turns, args.concurrency)
                totals[name][0] += wall
                totals[name][1] += cpu
        for name, (wall, cpu) in totals.items():
            rounds[name].append((wall, cpu))
    best = {name: min(values) for name, values in rounds.items()}
    return {"framework": args.framework, "n": args.n, "turns": args.turns, "concurrency": args.concurrency,
            "direct": best["direct"][0], "adapter": best["adapter"][0],
            "direct_cpu": best["direct"][1], "adapter_cpu": best["adapter"][1], "rounds": rounds}


def serve(latency: float) -> None:
    from aiohttp import web

    from bench import openai_server

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        if latency > 0:
            await asyncio.sleep(latency)
        messages = body.get("messages") or []
        smolagents = "final_answer" in tool_names(body)  # a smolagents agent: its own message shapes
        answer = completion(smolagents_message(messages) if smolagents else next_message(messages),
                            str(body.get("model", "bench")))
        if body.get("stream"):  # Strands' OpenAI model always streams
            return web.Response(body=sse(answer), content_type="text/event-stream")
        return web.json_response(answer)

    openai_server.serve(completions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help="run the scripted model server")
    parser.add_argument("--latency", type=float, default=0.0, help="server: seconds before each answer")
    parser.add_argument("--framework", choices=["pydantic_ai", "openai_agents", "langgraph", "llama_index",
                                                "google_adk", "strands", "crewai", "smolagents"])
    parser.add_argument("--api-base", help="the server's base URL (http://127.0.0.1:PORT/v1)")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of both ways; the fastest is kept")
    parser.add_argument("--batches", type=int, default=10, help="interleaved batches per round")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
    elif not args.framework or not args.api_base:
        parser.error("--framework and --api-base are needed (or --serve)")
    else:
        print(json.dumps(asyncio.run(compare(args))), flush=True)


if __name__ == "__main__":
    main()
