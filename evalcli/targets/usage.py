"""The target's own model calls, counted (docs/targets/index.md): what an agent reports it spent, recorded as LLM calls of purpose
``target`` in the conversation's usage (``llm.current_usage``), so the table, ``compare`` and the store count them
as they count evalcli's own calls.

A framework agent calls its model itself; each adapter reads the tokens of every call from the framework's own
result objects (PydanticAI's ``ModelResponse.usage``, the Agents SDK's ``raw_responses``, LangGraph's
``AIMessage.usage_metadata``) and hands them here, priced where litellm's table prices the model.
"""

from __future__ import annotations

from typing import Any

from ..llm import CallRecord, current_usage


def count(value: Any) -> int:
    """A token count a framework reported (a non-negative int; anything else 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def record_target_call(model: str, prompt_tokens: int, completion_tokens: int, *, turn_index: int | None,
                       priced: bool = True, cached_tokens: int = 0, duration_ms: float = 0.0) -> None:
    """One model call the target made (or reported), recorded in the conversation's usage with purpose ``target``:
    priced from litellm's table when ``priced`` and the model is known there, else at no cost."""
    sink = current_usage.get()
    if sink is None:
        return
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if priced and model:
        from ..llm.catalog import price_of  # litellm's table: read when a target first reports a call

        cost = price_of(model, usage)
    else:
        cost = 0.0
    sink.record(CallRecord("target", model or "unknown", prompt_tokens, completion_tokens, cost, False, duration_ms,
                           turn_index))
