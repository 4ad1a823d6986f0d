"""The HTTP target's floor: CPU per request of aiohttp itself beside evalcli's ``http`` session, in one process.

Both make the benchmark's requests (the same body, the same reply) to the same loopback agent endpoint
(``bench/agent_server.py``) at the same latency, ``concurrency`` at a time: ``raw aiohttp`` is one pooled
``ClientSession`` posting bytes and parsing the JSON reply, nothing else; ``evalcli session`` is the real
``HttpAdapter`` session of ``target: {http: ...}`` (templates, the request, JMESPath, messages, usage). The
difference is what evalcli adds to a request; the rest of a turn (the conversation, scoring, SQLite) is
the sleeping target's cost per turn, printed beside it by the ``http`` section.

Run alone: ``python bench/http_floor.py [--latency 0.05] [--concurrency 64] [--requests 3840]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import BENCH, FORM_TARGETS, model_server


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _measure(base: str, concurrency: int, requests: int) -> tuple[float, float]:
    import aiohttp
    from yarl import URL

    from evalcli.targets import FormContext, form_class, make_form_adapter
    from evalcli.targets.calls import TargetCalls, TargetThreads
    from evalcli.targets.session import ItemInfo

    cls = form_class("http")
    config = cls.config_model.model_validate(FORM_TARGETS["http-target"](base)["http"])
    adapter: Any = make_form_adapter(cls, "http", cls.build(config, FormContext(Path("."), lambda *_: None)), {})
    calls = TargetCalls(TargetThreads())
    url = URL(f"{base}/chat")

    async def evalcli_turns(chain: int, turns: int) -> None:
        session = adapter.open(multi_turn=True, calls=calls, item=ItemInfo(f"c{chain}", {}))
        for t in range(turns):
            await session.send(f"Conversation {chain}, turn {t}: what is the weather in Brooklyn?")
        await session.close()

    async def raw_turns(client: aiohttp.ClientSession, chain: int, turns: int) -> None:
        for t in range(turns):
            body = json.dumps({"message": f"Conversation {chain}, turn {t}: what is the weather in Brooklyn?",
                               "session_id": str(chain)}).encode()
            async with client.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
                json.loads(await response.read())

    per_chain = max(1, requests // concurrency)
    turns = per_chain * concurrency
    await asyncio.gather(*(evalcli_turns(c, 2) for c in range(concurrency)))  # warm: connections, imports
    started = _cpu()
    await asyncio.gather(*(evalcli_turns(c, per_chain) for c in range(concurrency)))
    session_ms = (_cpu() - started) / turns * 1000
    await adapter.aclose()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:
        await asyncio.gather(*(raw_turns(client, c, 2) for c in range(concurrency)))
        started = _cpu()
        await asyncio.gather(*(raw_turns(client, c, per_chain) for c in range(concurrency)))
        raw_ms = (_cpu() - started) / turns * 1000
    return raw_ms, session_ms


def floor(latency: float, concurrency: int, requests: int = 3840) -> tuple[float, float]:
    """(raw aiohttp, evalcli's http session) CPU ms per request against a fresh agent endpoint."""
    agent = [sys.executable, str(BENCH / "agent_server.py"), "--latency", str(latency)]
    with model_server(agent, "the benchmark's agent endpoint") as base:
        return asyncio.run(_measure(base.removesuffix("/v1"), concurrency, requests))


def report(latency: float, concurrency: int, sleep_turn_ms: float | None) -> None:
    raw, session = floor(latency, concurrency)
    print(f"  http target's floor (one process, {concurrency} in flight, {latency * 1000:g} ms): aiohttp alone "
          f"{raw:.3f} ms CPU per request, evalcli's http session {session:.3f} ms (+{session - raw:.3f} ms for "
          "templates, JMESPath, messages, usage)" +
          (f"; aiohttp's request plus the sleeping target's turn ({sleep_turn_ms:.3f} ms): {raw + sleep_turn_ms:.3f} ms "
           "per http turn before evalcli's http code" if sleep_turn_ms is not None else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=3840)
    args = parser.parse_args()
    raw, session = floor(args.latency, args.concurrency, args.requests)
    print(f"aiohttp alone {raw:.3f} ms CPU per request; evalcli's http session {session:.3f} ms")


if __name__ == "__main__":
    main()
