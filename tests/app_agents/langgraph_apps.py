"""LangGraph graphs in the shapes of its tutorials: a custom-state graph whose tool calls ``interrupt()`` and returns
``Command(update=...)``, a ``create_react_agent`` whose ``state_schema`` requires ``user_id``, and a functional-API
``@entrypoint`` over a list of messages with a checkpointer."""

from __future__ import annotations

import warnings
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from evalcli import ConversationInfo
from tests.app_agents import KEY, URL, record

chat = ChatOpenAI(model="graph-model", base_url=URL, api_key=KEY, use_responses_api=False, max_retries=0)  # type: ignore[arg-type]


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]
    name: str
    birthday: str


@tool
def human_assistance(name: str, birthday: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Ask a human to check a name and a birthday."""
    answer = interrupt({"question": "Is this correct?", "name": name, "birthday": birthday})
    record(event="resumed", answer=answer)
    if isinstance(answer, dict):
        correct = str(answer.get("correct", "")).lower().startswith("y")
        name, birthday = answer.get("name", name), answer.get("birthday", birthday)
    else:
        correct = str(answer).lower().startswith("y")
    text = "Correct" if correct else f"Made a correction: {answer}"
    return Command(update={"name": name, "birthday": birthday, "messages": [ToolMessage(text, tool_call_id=tool_call_id)]})


tools = [human_assistance]
bound = chat.bind_tools(tools)


def chatbot(state: State) -> dict[str, Any]:
    return {"messages": [bound.invoke(state["messages"])]}


builder = StateGraph(State)
builder.add_node("chatbot", chatbot)
builder.add_node("tools", ToolNode(tools=tools))
builder.add_conditional_edges("chatbot", tools_condition)
builder.add_edge("tools", "chatbot")
builder.add_edge(START, "chatbot")
state_graph = builder.compile()


@tool
def my_orders(state: Annotated[dict[str, Any], InjectedState], config: RunnableConfig) -> str:
    """The user's open orders."""
    user = state.get("user_id")
    record(event="orders", user_id=user, configured=(config.get("configurable") or {}).get("user_id"))
    return f"orders of {user}: 2 open"


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's create_agent
    from langgraph.prebuilt import create_react_agent
    from langgraph.prebuilt.chat_agent_executor import AgentState

    class ShopState(AgentState):  # type: ignore[misc]
        user_id: str

    react_agent = create_react_agent(chat, tools=[my_orders], state_schema=ShopState)


def shop_user(info: ConversationInfo) -> dict[str, Any]:
    """The graph's ``user_id`` for the conversation, from the item's metadata."""
    return {"input": {"user_id": info.metadata.get("user", info.resource)}}


@task
def call_model(messages: list[BaseMessage]) -> BaseMessage:
    return chat.invoke(messages)


@entrypoint(checkpointer=InMemorySaver())
def functional(inputs: list[BaseMessage], *, previous: list[BaseMessage] | None) -> Any:
    messages = add_messages(previous or [], inputs)
    response = call_model(messages).result()
    return entrypoint.final(value=response, save=add_messages(messages, response))


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


@tool
def refund_order(order_id: str) -> str:
    """Refund an order."""
    raise RuntimeError("the refunds service is down")


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.graph import MessagesState

    orders_agent = create_react_agent(chat, tools=[lookup_order, refund_order], name="orders_agent")

support_builder = StateGraph(MessagesState)
support_builder.add_node("orders", orders_agent)  # a compiled graph as a node: a subgraph
support_builder.add_edge(START, "orders")
support_graph = support_builder.compile()
"""A parent graph whose one node is a ``create_react_agent`` subgraph; its ``refund_order`` tool raises."""
