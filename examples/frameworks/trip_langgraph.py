"""A LangGraph graph with its own state and a tool that stops to ask the user:
``evalcli run datasets/frameworks/langgraph_trip.yaml``.

The state holds ``traveller`` (given by the dataset's ``target_options.input``) and ``city``, which the
``confirm_city`` tool writes with ``Command(update=...)`` once the user confirms. The tool calls
``interrupt()``: the turn ends waiting for the user, evalcli records the interrupt, and the user's next
message resumes it (``Command(resume=...)``). Each turn's final state without ``messages`` is recorded as
its ``structured`` result. The model is any Chat Completions endpoint (``OPENAI_BASE_URL``).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, model_name
from examples.frameworks.weather_langgraph import get_weather  # the same tool as the first example's


class TripState(TypedDict):
    messages: Annotated[list[Any], add_messages]
    traveller: str                # the graph reads it: the dataset supplies it (target_options.input)
    city: NotRequired[str]        # the graph writes it (confirm_city): not required in its input


@tool
def confirm_city(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Ask the user to confirm the city of the trip before planning it.

    Args:
        city: The city the user seems to mean.
    """
    answer = interrupt(f"Plan a trip to {city}? (yes/no)")
    confirmed = answer.get("confirm") is True if isinstance(answer, dict) else str(answer).strip().lower()[:1] == "y"
    if confirmed:
        return Command(update={"city": city, "messages": [ToolMessage(f"confirmed {city}", tool_call_id=tool_call_id)]})
    return Command(update={"messages": [ToolMessage(f"not confirmed: the user said {answer!r}",
                                                    tool_call_id=tool_call_id)]})


TOOLS = [confirm_city, get_weather]
chat = ChatOpenAI(model=model_name(), base_url=base_url(), api_key=api_key(),  # type: ignore[arg-type]
                  use_responses_api=False).bind_tools(TOOLS)


def planner(state: TripState) -> dict[str, Any]:
    prompt = SystemMessage(f"{INSTRUCTIONS} You plan trips for {state['traveller']}; confirm the city first.")
    return {"messages": [chat.invoke([prompt, *state["messages"]])]}


builder = StateGraph(TripState)
builder.add_node("planner", planner)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_edge(START, "planner")
builder.add_conditional_edges("planner", tools_condition)
builder.add_edge("tools", "planner")
graph = builder.compile()
