"""Invariants of the per-turn shortcuts of playing and scoring a conversation (docs/performance.md "The per-turn
floor"): each shortcut gives exactly what the longer way gave."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.messages import tool_calls, tool_names
from evalcli.run.play import PlayContext
from evalcli.scorers import ScorerRun
from evalcli.targets.session import uuid4_text

ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                   lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                   max_leaves=8)
FUNCTIONS = st.fixed_dictionaries({}, optional={"name": st.one_of(st.sampled_from(["get_weather", ""]), ANY)}) | ANY
CALLS = st.fixed_dictionaries({}, optional={"id": ANY, "function": FUNCTIONS}) | ANY
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool"])},
                                          optional={"tool_calls": st.lists(CALLS, max_size=3) | ANY}), max_size=4)


@given(MESSAGES)
def test_tool_names_are_the_names_tool_calls_yields(messages: list[dict[str, Any]]) -> None:
    try:
        expected = [name for _, name in tool_calls(messages)]
    except (TypeError, AttributeError) as exc:  # a value that cannot be read fails the same way both ways
        try:
            tool_names(messages)
        except type(exc):
            return
        raise AssertionError("tool_names read what tool_calls could not") from None
    assert tool_names(messages) == expected
    assert ScorerRun("", messages).tool_names == expected


@given(st.integers(0, (1 << 128) - 1))
def test_a_thread_id_is_the_uuid4_text_of_its_bits(bits: int) -> None:
    assert uuid4_text(bits) == str(uuid.UUID(int=bits, version=4))


def test_a_conversations_play_context_is_the_runs_with_its_check() -> None:
    def check() -> None:
        pass

    context = PlayContext(llm=lambda: None, use_cache=False, ready=None)  # type: ignore[arg-type,return-value]
    assert context.with_check(check) == dataclasses.replace(context, before_turn=check)
    # a field added to PlayContext must be carried by with_check too
    assert [f.name for f in dataclasses.fields(PlayContext)] == ["llm", "use_cache", "ready", "before_turn"]
