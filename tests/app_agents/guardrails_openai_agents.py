"""Agents SDK guardrails written the way the SDK's guardrails guide writes them: a guardrail agent that decides
whether the user asks for their math homework, used by an input guardrail on one support agent and by an output
guardrail on another; and a setup that gives each conversation the app's own ``SQLiteSession``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    Runner,
    SQLiteSession,
    TResponseInputItem,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from pydantic import BaseModel

from tests.app_agents import KEY, URL, record

set_tracing_disabled(True)
model = OpenAIChatCompletionsModel(model="support-model", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY,
                                                                                     max_retries=0))


class MathHomeworkOutput(BaseModel):
    is_math_homework: bool
    reasoning: str


guardrail_agent = Agent(name="Guardrail check", model=model, output_type=MathHomeworkOutput,
                        instructions="Check if the user is asking you to do their math homework.")


@input_guardrail
async def math_guardrail(ctx: RunContextWrapper[None], agent: Agent[Any],
                         input: str | list[TResponseInputItem]) -> GuardrailFunctionOutput:
    result = await Runner.run(guardrail_agent, input, context=ctx.context)
    return GuardrailFunctionOutput(output_info=result.final_output,
                                   tripwire_triggered=result.final_output.is_math_homework)


support_agent = Agent(name="Customer support agent", model=model, input_guardrails=[math_guardrail],
                      instructions="You are a customer support agent. You help customers with their questions.")


class MessageOutput(BaseModel):
    response: str


@output_guardrail(name="math_answer_guardrail")
async def math_answer_guardrail(ctx: RunContextWrapper[None], agent: Agent[Any],
                                output: MessageOutput) -> GuardrailFunctionOutput:
    result = await Runner.run(guardrail_agent, output.response, context=ctx.context)
    return GuardrailFunctionOutput(output_info=result.final_output,
                                   tripwire_triggered=result.final_output.is_math_homework)


answering_agent = Agent(name="Answering agent", model=model, output_guardrails=[math_answer_guardrail],
                        output_type=MessageOutput, instructions="You are a helpful assistant. Answer in JSON.")


async def app_session(info: Any) -> AsyncIterator[dict[str, Any]]:
    """The app's own session for the conversation, as its request handler opens one per user."""
    session = SQLiteSession(f"user-{info.item_id}")
    record(event="session", item=info.item_id)
    yield {"session": session}
    record(event="closed", item=info.item_id, items=len(await session.get_items()))
    session.close()
