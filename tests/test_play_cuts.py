"""Invariants of the per-turn shortcuts of playing and scoring a conversation (docs/performance.md "The per-turn
floor"): each shortcut gives exactly what the longer way gave."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.messages import tool_calls, tool_names
from evalcli.run.play import PlayContext
from evalcli.scorers import ScorerRun
from evalcli.targets.session import uuid4_text

ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                   lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
                   max_leaves=4)
FUNCTIONS = st.fixed_dictionaries({}, optional={"name": st.one_of(st.sampled_from(["get_weather", ""]), ANY)}) | ANY
CALLS = st.fixed_dictionaries({}, optional={"id": ANY, "function": FUNCTIONS}) | ANY
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool"])},
                                          optional={"tool_calls": st.lists(CALLS, max_size=3) | ANY}), max_size=3)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # slow to draw on a busy machine
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


def _generated(cls: type) -> type:
    """The same class as a plain frozen dataclass, with the ``__init__`` dataclasses generates."""
    return dataclasses.make_dataclass(cls.__name__, [(f.name, f.type, f) for f in dataclasses.fields(cls)], frozen=True)


def test_turn_view_and_scorer_run_take_what_the_generated_init_takes() -> None:
    import inspect

    from evalcli.scorers import TurnView

    for cls in (TurnView, ScorerRun):
        own = inspect.signature(cls.__init__).parameters
        generated = inspect.signature(_generated(cls).__init__).parameters
        assert [(p.name, p.default, p.kind) for p in own.values()] == \
               [(p.name, p.default, p.kind) for p in generated.values()]


@given(st.integers(), st.text(max_size=3), st.lists(st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
       st.booleans(), ANY, ANY, ANY, st.integers(0, 3), ANY)
def test_turn_view_and_scorer_run_hold_what_they_were_given(index: int, text: str, output: list[dict[str, Any]],
                                                            simulated: bool, structured: Any, interrupt: Any,
                                                            resume: Any, retries: int, guardrail: Any) -> None:
    import pytest

    from evalcli.scorers import TurnView

    values = (index, text, output, simulated, structured, interrupt, resume, retries, guardrail)
    view = TurnView(*values)
    assert dataclasses.astuple(view) == dataclasses.astuple(_generated(TurnView)(*values))
    assert view == TurnView(**{f.name: v for f, v in zip(dataclasses.fields(TurnView), values, strict=True)})
    run = ScorerRun(text, output, structured, index, (view,), None, text)
    assert dataclasses.astuple(run) == dataclasses.astuple(_generated(ScorerRun)(text, output, structured, index,
                                                                                  (view,), None, text))
    assert dataclasses.replace(run, goal="g").goal == "g" and dataclasses.replace(run, goal="g").turns == (view,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.index = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.output = []  # type: ignore[misc]


def test_the_built_lists_of_specs_stay_few_however_many_turns_bring_their_own(tmp_path: Any) -> None:
    """Each turn's own list of gates is a list of its own (its specs are shared): a run of 1,000 conversations with
    gates on their turns kept every list built for the whole run, and memory grew with the conversations; at most
    ``BUILT_LISTS`` are kept, and a list built again gives the same scorers."""
    from evalcli.dataset import load_dataset
    from evalcli.run.conversation import BUILT_LISTS, Conversation
    from evalcli.scorers.registry import Builder, BySpecs

    (tmp_path / "d.yaml").write_text("target: bench.targets:sleep_agent\ndata:\n" + "".join(
        f"  - turns: [{{input: 'hi {n}', gates: [{{includes: Brooklyn}}]}}]\n" for n in range(1000)))
    dataset = load_dataset(tmp_path / "d.yaml")
    conversation = Conversation.__new__(Conversation)
    conversation.builder = Builder({}, lambda: cast(Any, None))  # checks call no model
    conversation._scorers = BySpecs(BUILT_LISTS)
    lists = [turn.gates for item in dataset.items for turn in item.turns or ()]
    assert len({id(x) for x in lists}) == 1000 and len({id(x[0]) for x in lists}) == 1
    built = [conversation._built(specs) for specs in lists]
    assert len(conversation._scorers) <= BUILT_LISTS
    assert all(scorers[0] is built[0][0][0] and immediate for scorers, immediate in built)
    assert conversation._built(lists[0])[0][0] is built[0][0][0]


def test_run_evals_never_formats_its_result(tmp_path: Any, monkeypatch: Any) -> None:
    """``asyncio.run`` closing asks ``signal.getsignal`` for the SIGINT handler, which formats asyncio's own (a partial
    naming the main task) with the task's repr, its result included: every conversation of a run held by
    ``run_evals`` was formatted once more at its end (0.7 s of CPU after 3,000). The result is handed out beside the
    task instead (docs/performance.md)."""
    import signal

    from evalcli import run_evals
    from evalcli.results import RunResult

    formatted: list[object] = []

    def counted(self: object) -> str:  # reprlib, which formats a task's result, swallows what a repr raises
        formatted.append(self)
        return "RunResult(...)"

    (tmp_path / "d.yaml").write_text("target: bench.targets:sleep_agent\ngates: [{includes: Brooklyn}]\ndata:\n"
                                     "  - input: hi\n  - input: there\n")
    monkeypatch.setattr(RunResult, "__repr__", counted)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a Python program starts: asyncio's own
    try:
        result = run_evals(tmp_path / "d.yaml")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.items is not None and [item.status for item in result.items] == ["ok", "ok"]
    assert not formatted


CONTENTS = st.none() | st.text(max_size=3) | st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image"])}, optional={"text": ANY}), max_size=2) | ANY


@given(st.lists(st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool", "user"])},
                                      optional={"content": CONTENTS}), max_size=4), st.booleans())
def test_assistant_texts_are_each_assistant_messages_text(messages: list[dict[str, Any]], strip: bool) -> None:
    """``assistant_texts`` takes a plain text content as it is: the texts ``message_text`` gives, as before."""
    from evalcli.messages import assistant_texts, message_text

    texts = [message_text(m) for m in messages if m.get("role") == "assistant"]
    assert assistant_texts(messages, strip=strip) == [t for t in (t.strip() if strip else t for t in texts) if t]
