"""A PydanticAI bank-support agent: deps hold a live sqlite3 connection, the output is a pydantic model with an
output validator. ``counter_agent`` has deps a YAML mapping can build (to see each conversation get its own)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from evalcli import ConversationInfo
from tests.app_agents import KEY, URL, record


@dataclass
class SupportDeps:
    customer_id: int
    db: sqlite3.Connection


class SupportAdvice(BaseModel):
    advice: str
    block_card: bool
    risk: int = Field(ge=0, le=10)


model = OpenAIChatModel("support-model", provider=OpenAIProvider(base_url=URL, api_key=KEY))
agent = Agent(model, deps_type=SupportDeps, output_type=SupportAdvice, retries=3,
              instructions="You are a bank support agent. Judge the risk of the customer's query.")


@agent.tool
def customer_balance(ctx: RunContext[SupportDeps], include_pending: bool = False) -> str:
    """The customer's current balance."""
    row = ctx.deps.db.execute("SELECT name, balance FROM customers WHERE id = ?", (ctx.deps.customer_id,)).fetchone()
    ctx.deps.db.execute("INSERT INTO audit (customer_id, what) VALUES (?, 'balance')", (ctx.deps.customer_id,))
    return f"{row[0]} has ${row[1]:.2f}"


@agent.output_validator
def risky_blocks_only(output: SupportAdvice) -> SupportAdvice:
    if output.block_card and output.risk < 5:
        raise ModelRetry("block the card only when the risk is 5 or more")
    return output


def bank(info: ConversationInfo) -> Iterator[dict[str, Any]]:
    """A database of the item's customer; the cleanup records what the conversation left in it."""
    customer = int(info.metadata["customer_id"])
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, balance REAL)")
    db.execute("CREATE TABLE audit (customer_id INTEGER, what TEXT)")
    db.execute("INSERT INTO customers VALUES (?, ?, ?)", (customer, info.metadata["name"], info.metadata["balance"]))
    record(event="setup", item=info.item_id, thread=info.thread, resource=info.resource, tags=info.tags,
           ground_truth=info.ground_truth, metadata=info.metadata)
    yield {"deps": SupportDeps(customer_id=customer, db=db)}
    audited = db.execute("SELECT COUNT(*) FROM audit").fetchone()[0]
    db.close()
    record(event="cleanup", item=info.item_id, audited=audited)


async def async_bank(info: ConversationInfo) -> AsyncIterator[dict[str, Any]]:
    """The same as an async generator."""
    for options in bank(info):
        yield options


class Counter(BaseModel):
    name: str
    calls: int = 0


counter_agent = Agent(OpenAIChatModel("counter-model", provider=OpenAIProvider(base_url=URL, api_key=KEY)),
                      deps_type=Counter)


@counter_agent.tool
def count(ctx: RunContext[Counter]) -> str:
    """Count one more call."""
    ctx.deps.calls += 1
    record(event="count", deps=id(ctx.deps), name=ctx.deps.name, calls=ctx.deps.calls)
    return f"{ctx.deps.name} call {ctx.deps.calls}"
