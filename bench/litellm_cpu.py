"""CPU per model call through evalcli's LLM client, on each of its backends and on variants of them (docs/models.md).

A loopback server (``bench/openai_server.py``'s handler, plus a tool call when the request offers tools)
answers at once; each variant runs in a fresh process that makes N sequential calls, then N calls with
32 in flight, through ``LLMClient.complete`` and reports CPU milliseconds per call (``time.process_time``,
so other load on the machine barely matters). ``--check`` compares what each variant returns (content,
tool calls, usage, cost) with litellm's, for a priced and an unpriced model.

Variants: ``direct`` is evalcli's own Chat Completions client (raw aiohttp, the default path of OpenAI-compatible
models); ``openai_sdk_aiohttp`` the same client sending through the ``openai`` SDK on aiohttp instead (the
alternative docs/models.md names); ``litellm`` is ``EVALCLI_LLM_BACKEND=litellm``, and the rest are litellm settings
and upper bounds, measured to show that none of them brings litellm near the direct path.

Run: ``python bench/litellm_cpu.py [--calls 2000] [--repeat 3] [--variants direct,litellm,...] [--profile VARIANT]``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import load_average, model_server

PRICED = "openai/gpt-4o-mini"
UNPRICED = "openai/bench"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def serve() -> None:
    """The loopback server at 0 ms: ``openai_server``'s answer, or a ``get_weather`` tool call when offered tools."""
    from aiohttp import web

    from bench import openai_server

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("tools"):
            return await openai_server.completions(request)
        return web.json_response({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city": "Brooklyn"}'}}]}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}})

    openai_server.serve(completions)


def server() -> AbstractContextManager[str]:
    return model_server([sys.executable, __file__, "--serve"], "the loopback server")


# --- variants: each sets litellm up (after import) and may wrap the call ------------------------------------

class _Litellm:
    """litellm as evalcli sees it, with ``acompletion`` replaced."""

    def __init__(self, litellm: Any, acompletion: Callable[..., Any]) -> None:
        self._litellm = litellm
        self.acompletion = acompletion

    def __getattr__(self, name: str) -> Any:
        return getattr(self._litellm, name)


def _replace_acompletion(litellm: Any, acompletion: Callable[..., Any]) -> None:
    """Make evalcli's LLM layer call ``acompletion`` instead of ``litellm.acompletion`` (litellm itself unchanged)."""
    import evalcli.llm.litellm_backend

    wrapped = _Litellm(litellm, acompletion)
    evalcli.llm.litellm_backend.import_litellm = lambda: wrapped  # type: ignore[assignment]


def _wrap_acompletion(litellm: Any, change: Callable[[dict[str, Any]], None]) -> None:
    """Make evalcli's calls go through ``change`` (which edits the kwargs) on their way to ``litellm.acompletion``."""

    async def acompletion(**kwargs: Any) -> Any:
        change(kwargs)
        return await litellm.acompletion(**kwargs)

    _replace_acompletion(litellm, acompletion)


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs what is submitted at once, in the caller's thread (litellm's ``run_in_executor`` without a thread)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            future.set_exception(exc)
        return future


def _inline_executor(litellm: Any) -> None:
    asyncio.get_running_loop().set_default_executor(InlineExecutor())


def _no_log(litellm: Any) -> None:
    _wrap_acompletion(litellm, lambda kwargs: kwargs.update({"no-log": True}))


def _message_logging_off(litellm: Any) -> None:
    litellm.turn_off_message_logging = True


def _httpx(litellm: Any) -> None:
    litellm.disable_aiohttp_transport = True


def _shared_client(litellm: Any) -> None:
    import openai

    clients: dict[str | None, Any] = {}

    def add(kwargs: dict[str, Any]) -> None:
        base = kwargs.get("api_base")
        if base not in clients:
            clients[base] = openai.AsyncOpenAI(base_url=base, api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
        kwargs["client"] = clients[base]

    _wrap_acompletion(litellm, add)


def _no_drop_params(litellm: Any) -> None:
    _wrap_acompletion(litellm, lambda kwargs: kwargs.pop("drop_params", None))


def _no_cost(litellm: Any) -> None:
    """Upper bound, not a setting: litellm's per-response pricing replaced by nothing."""
    from litellm.litellm_core_utils.litellm_logging import Logging

    Logging.response_cost_calculator = lambda self, *args, **kwargs: None  # type: ignore[method-assign]


def _no_success_logging(litellm: Any) -> None:
    """Upper bound, not a setting: litellm's success logging (callbacks, logging payload) skipped."""
    import litellm.utils

    litellm.utils.dispatch_success_logging = lambda **kwargs: None


def _internal_call(litellm: Any) -> None:
    """Each call made as a litellm-internal sub-call (``is_internal_call``): litellm skips its success logging."""
    from litellm._internal_context import is_internal_call

    async def acompletion(**kwargs: Any) -> Any:
        token = is_internal_call.set(True)
        try:
            return await litellm.acompletion(**kwargs)
        finally:
            is_internal_call.reset(token)

    _replace_acompletion(litellm, acompletion)


def _router(litellm: Any) -> None:
    routers: dict[tuple[str, str | None], Any] = {}

    async def acompletion(**kwargs: Any) -> Any:
        key = (kwargs["model"], kwargs.get("api_base"))
        if key not in routers:
            params = {k: kwargs[k] for k in ("model", "api_base") if k in kwargs}
            routers[key] = litellm.Router(model_list=[{"model_name": kwargs["model"], "litellm_params": params}],
                                          num_retries=0)
        return await routers[key].acompletion(**kwargs)

    _replace_acompletion(litellm, acompletion)


def _openai_sdk() -> None:
    """evalcli's direct path, each request sent with the ``openai`` SDK on aiohttp instead of raw aiohttp."""
    import openai

    from evalcli.llm import openai_compat

    clients: dict[tuple[str, int], Any] = {}

    async def post(self: Any, route: Any, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        key = (route.api_base, id(asyncio.get_running_loop()))
        if key not in clients:
            clients[key] = openai.AsyncOpenAI(base_url=route.api_base, api_key=os.environ["OPENAI_API_KEY"],
                                              max_retries=0, http_client=openai.DefaultAioHttpClient())
        response = await clients[key].chat.completions.create(**body, timeout=timeout)
        return response.model_dump()  # type: ignore[no-any-return]

    openai_compat.Transport.post = post  # type: ignore[method-assign]


DIRECT: dict[str, Callable[[], None]] = {"direct": lambda: None, "openai_sdk_aiohttp": _openai_sdk}
"""Variants of evalcli's own Chat Completions path (no litellm imported)."""
DEFAULT_VARIANTS = "direct,openai_sdk_aiohttp,litellm"

VARIANTS: dict[str, Callable[[Any], None]] = {
    "litellm": lambda litellm: None,
    "LITELLM_LOG=ERROR": lambda litellm: None,
    "inline_executor": _inline_executor,
    "no-log": _no_log,
    "turn_off_message_logging": _message_logging_off,
    "httpx_transport": _httpx,
    "shared_openai_client": _shared_client,
    "no_drop_params": _no_drop_params,
    "router": _router,
    "internal_sub_call": _internal_call,
    "no_cost_calc(upper bound)": _no_cost,
    "no_success_logging(upper bound)": _no_success_logging,
}
ENV = {"LITELLM_LOG=ERROR": {"LITELLM_LOG": "ERROR"}}


def _client(variant: str) -> Any:
    from evalcli.llm.client import LLMClient, LLMSettings

    if variant in DIRECT:
        DIRECT[variant]()
        return LLMClient(LLMSettings(retries=0, timeout=30, backend="auto"))
    from evalcli.llm.litellm_backend import import_litellm

    litellm = import_litellm()
    VARIANTS[variant](litellm)
    return LLMClient(LLMSettings(retries=0, timeout=30, backend="litellm"))


def _call(client: Any, api_base: str, model: str, tools: bool = False) -> Any:
    return client.complete(model=model, api_base=api_base, purpose="target", tools=TOOLS if tools else None,
                           messages=[{"role": "user", "content": "What is the weather in Brooklyn?"}])


async def _measure(variant: str, api_base: str, model: str, calls: int) -> dict[str, float]:
    from evalcli.llm.client import UsageSink, current_usage

    client = _client(variant)
    current_usage.set(UsageSink())
    for _ in range(50):  # warm up: imports, the connection pool, litellm's caches
        await _call(client, api_base, model)
    started = time.process_time()
    for _ in range(calls):
        await _call(client, api_base, model)
    sequential = (time.process_time() - started) * 1000 / calls
    slots = asyncio.Semaphore(32)

    async def one() -> None:
        async with slots:
            await _call(client, api_base, model)

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    concurrent = (time.process_time() - started) * 1000 / calls
    return {"sequential": sequential, "concurrent": concurrent, "litellm imported": "litellm" in sys.modules}


async def _outputs(variant: str, api_base: str) -> list[Any]:
    from evalcli.llm.client import UsageSink

    client = _client(variant)
    out = []
    for model in (PRICED, UNPRICED):
        for tools in (False, True):
            for _ in range(2):  # the second call of an unpriced model takes the remembered-unpriced path
                sink = UsageSink()
                response = await client.complete(model=model, api_base=api_base, purpose="target", usage_sink=sink,
                                                 tools=TOOLS if tools else None,
                                                 messages=[{"role": "user", "content": "Weather in Brooklyn?"}])
                message = response["choices"][0]["message"]
                rec = sink.records[0]
                usage = response.get("usage") or {}
                calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
                out.append({"model": model, "tools": tools, "content": message.get("content"), "tool_calls": calls,
                            "usage": [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")],
                            "record": [rec.prompt_tokens, rec.completion_tokens, rec.cost]})
    return out


def child(args: argparse.Namespace) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    if args.check:
        print(json.dumps(asyncio.run(_outputs(args.child, args.api_base))))
        return
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(_measure(args.child, args.api_base, args.model, args.calls))
        profiler.disable()
        if args.profile_out:
            profiler.dump_stats(args.profile_out)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        return
    print(json.dumps(asyncio.run(_measure(args.child, args.api_base, args.model, args.calls))))


def _run_child(variant: str, api_base: str, *extra: str) -> str:
    command = [sys.executable, __file__, "--child", variant, "--api-base", api_base, *extra]
    env = {**os.environ, "OPENAI_API_KEY": "bench-not-a-key", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           **ENV.get(variant, {})}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--child")
    parser.add_argument("--api-base")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-out", help="with --profile: also save the stats to this file")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default=UNPRICED)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"any of {', '.join([*DIRECT, *VARIANTS])} (default {DEFAULT_VARIANTS}; 'all' for every one)")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.child:
        child(args)
        return
    table(args.variants, args.calls, args.repeat, args.profile, args.profile_out)


def table(variants_text: str, calls: int, repeat: int, profile: bool = False, profile_out: str | None = None) -> None:
    """Measure the variants and print the table (``bench/run.py``'s ``cpu`` section calls this)."""
    all_variants = [*DIRECT, *VARIANTS]
    variants = all_variants if variants_text == "all" else variants_text.split(",")
    unknown = set(variants) - set(all_variants)
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(sorted(unknown))}; choose from {', '.join(all_variants)}")
    with server() as api_base:
        if profile:
            for variant in variants:
                print(f"=== profile {variant} ({UNPRICED}) ===")
                out = ["--profile-out", f"{profile_out}.{variant}"] if profile_out else []
                print(_run_child(variant, api_base, "--profile", "--calls", str(calls), "--model", UNPRICED, *out))
            return
        reference = _run_child("litellm", api_base, "--check")
        rows = []
        for variant in variants:
            same = _run_child(variant, api_base, "--check") == reference
            runs = [json.loads(_run_child(variant, api_base, "--calls", str(calls), "--model", model))
                    for model in (UNPRICED, PRICED) for _ in range(repeat)]
            half = len(runs) // 2
            best = {f"{kind} {label}": min(r[kind] for r in part)
                    for label, part in (("unpriced", runs[:half]), ("priced", runs[half:]))
                    for kind in ("sequential", "concurrent")}
            rows.append((variant, best, same, any(r["litellm imported"] for r in runs)))
    print(f"\nCPU ms per call through LLMClient.complete (best of {repeat}, {calls} calls each; unpriced {UNPRICED}, "
          f"priced {PRICED}; load average {load_average()}); target <= 1.0 ms on the direct path")
    keys = list(rows[0][1])
    print(f"{'variant':32}" + "".join(f"{k:>22}" for k in keys) + "  litellm  outputs vs litellm's")
    for variant, best, same, imported in rows:
        print(f"{variant:32}" + "".join(f"{best[k]:22.2f}" for k in keys)
              + f"  {'yes' if imported else 'no':>7}  {'same' if same else 'DIFFER'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
