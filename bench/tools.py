"""Benchmark section ``tools``: what a mock costs per tool call (docs/hermetic.md), in CPU microseconds.

Measured in one process with ``time.process_time`` over many calls, fastest of ``--repeat`` rounds:

1. the wrapper alone: a plain ``await tool()``, the same call through ``evalcli.tools.acall`` with no plan (what
   every tool of a run without ``tools:`` pays), with a plan that lets it run live (matched, recorded), and
   answered by a mock (no tool runs);
2. a real framework's tool call: a LangGraph graph whose one node is a ``ToolNode`` running one tool call, the
   user's graph and evalcli's planned copy (live, and mocked), so the wrapper's cost is seen beside the
   framework's own.

The check: the plan's own work per call (the wrapper with a plan, live or mocked, minus a plain call) is at most
5 % of the framework's own cost of one tool call. On a loaded machine the graph rows vary by more than that from
round to round; the wrapper rows do not.

Run alone: ``python bench/tools.py [--calls 100000] [--node-calls 3000] [--repeat 3]``, or as the ``tools``
section of ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalcli.tools import CURRENT, Answer, Mock, ToolPlan, ToolsConfig, acall


async def weather(city: str, day: str = "today") -> dict[str, Any]:
    """Get the weather for a city."""
    return {"city": city, "day": day, "condition": "sunny", "temperature_f": 70}


def plan(mocked: bool) -> ToolPlan:
    mocks = {"get_weather": (Mock((Answer({"condition": "snowy", "temperature_f": 1}),), {"city": "London"}),)}
    return ToolPlan(ToolsConfig(mocks if mocked else {"other": mocks["get_weather"]}))


async def per_call(make: Callable[[], Awaitable[Any]], calls: int, with_plan: ToolPlan | None) -> float:
    """CPU microseconds per call of ``make()``, under ``with_plan``."""
    token = CURRENT.set(with_plan)
    try:
        for _ in range(min(calls, 1000)):
            await make()
        if with_plan is not None:
            with_plan.calls.clear()
        gc.collect()
        gc.disable()
        started = time.process_time()
        for _ in range(calls):
            await make()
        spent = time.process_time() - started
    finally:
        gc.enable()
        CURRENT.reset(token)
    return spent / calls * 1e6


async def wrapper_figures(calls: int) -> dict[str, float]:
    arguments = {"city": "London", "day": "today"}

    def wrapped() -> Awaitable[Any]:
        return acall("get_weather", arguments, lambda: weather(**arguments))

    return {
        "plain await tool()": await per_call(lambda: weather(**arguments), calls, None),
        "acall, no plan": await per_call(wrapped, calls, None),
        "acall, plan, runs live": await per_call(wrapped, calls, plan(mocked=False)),
        "acall, plan, mocked": await per_call(wrapped, calls, plan(mocked=True)),
    }


async def node_figures(calls: int) -> dict[str, float]:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from evalcli.targets.langgraph_tools import planned_graph

    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([tool("get_weather")(weather)]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    node = builder.compile()
    planned = planned_graph(node)

    async def passing(request: Any, execute: Any) -> Any:
        return await execute(request)

    hooked = StateGraph(MessagesState)
    hooked.add_node("tools", ToolNode([tool("get_weather")(weather)], awrap_tool_call=passing))
    hooked.add_edge(START, "tools")
    hooked.add_edge("tools", END)
    hook = hooked.compile()
    state = {"messages": [AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "London", "day": "today"},
                                                     "id": "call_1"}])]}
    return {
        "graph + ToolNode (the user's)": await per_call(lambda: node.ainvoke(state), calls, None),
        "the same, a pass-through awrap_tool_call": await per_call(lambda: hook.ainvoke(state), calls, None),
        "planned graph, no plan": await per_call(lambda: planned.ainvoke(state), calls, None),
        "planned graph, runs live": await per_call(lambda: planned.ainvoke(state), calls, plan(mocked=False)),
        "planned graph, mocked": await per_call(lambda: planned.ainvoke(state), calls, plan(mocked=True)),
    }


def fastest(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: min(r[key] for r in rounds) for key in rounds[0]}


def section(calls: int = 100_000, node_calls: int = 3_000, repeat: int = 3) -> dict[str, dict[str, float]]:
    """Measure and print both tables; return their figures."""
    wrapper = fastest([asyncio.run(wrapper_figures(calls)) for _ in range(repeat)])
    node = fastest([asyncio.run(node_figures(node_calls)) for _ in range(repeat)])
    print(f"\nTool mocks (docs/hermetic.md): CPU per tool call, fastest of {repeat} rounds")
    print(f"  {'case':42}  {'µs/call':>9}  {'vs the first row':>16}")
    for table, count in ((wrapper, calls), (node, node_calls)):
        base = next(iter(table.values()))
        for case, micros in table.items():
            print(f"  {case:42}  {micros:9.2f}  {micros - base:+16.2f}   ({count} calls)")
    framework = node["graph + ToolNode (the user's)"]
    plain = wrapper["plain await tool()"]
    own = max(wrapper["acall, plan, runs live"], wrapper["acall, plan, mocked"]) - plain
    print(f"  the plan's own work per tool call: at most {own:.2f} µs, {own / framework:.2%} of a LangGraph tool call "
          f"({framework:.0f} µs); without a plan {wrapper['acall, no plan'] - plain:+.2f} µs")
    print(f"  target: at most 5% of the framework's own cost per call: {'met' if own <= 0.05 * framework else 'NOT met'}")
    return {"wrapper": wrapper, "tool node": node}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100_000, help="calls per wrapper case")
    parser.add_argument("--node-calls", type=int, default=3_000, help="calls per ToolNode case")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    section(args.calls, args.node_calls, args.repeat)


if __name__ == "__main__":
    main()
