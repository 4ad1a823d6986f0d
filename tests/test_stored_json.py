"""The one rule of what a turn's messages are stored as (evalcli/stored_json.py, docs/targets/python.md "Return value"):
``stored_text`` returns the text the store writes, which a real SQLite file holds and gives back, or refuses the turn
naming the message; it never lets through a text the database cannot write (the conversation lost, the run passing)."""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from evalcli.stored_json import Unstorable, dumps, stored_text

_LEAF = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=8),
                  st.integers(-10**700, 10**700), st.just(5000).map(lambda n: 10 ** n), st.sampled_from(["\ud800", "a\udfffb"]))
_KEY = st.one_of(st.text(max_size=4), st.integers(0, 9), st.just((1, 2)), st.just("\udc80"))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(_KEY, inner, max_size=3)), max_leaves=8)
_MESSAGE = st.dictionaries(st.sampled_from(["content", "data", "tool_calls"]), _VALUE, max_size=2).map(
    lambda extra: {"role": "assistant", **extra})


def _stored(text: str) -> str:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", (text,))
    return str(conn.execute("SELECT v FROM t").fetchone()[0])


def _writable(messages: list[Any]) -> bool:
    """What the store's writer could do with the messages before the check: serialise them, bind the text."""
    try:
        _stored(json.dumps(messages, ensure_ascii=False, default=str))
    except Exception:  # noqa: BLE001 - any failure is a conversation the writer would have lost
        return False
    return True


@given(st.lists(_MESSAGE, min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
@example([{"role": "assistant", "content": "Sunny \ud800"}])
@example([{"role": "assistant", "content": "ok"}, {"role": "tool", "data": {(1, 2): 3}}])
def test_a_stored_text_is_what_the_database_holds_and_a_refusal_is_what_it_could_not(messages: list[Any]) -> None:
    try:
        text = stored_text(messages)
    except Unstorable as exc:
        assert not _writable(messages)
        failing = int(str(exc).split()[2])  # "response message N ..."
        assert not _writable([messages[failing]]) and all(_writable([m]) for m in messages[:failing])
        assert str(exc).endswith("it cannot be stored as JSON; return plain data (the value's text, or a copy a JSON "
                                 "encoder can write)")
        return
    assert text == json.dumps(messages, ensure_ascii=False, default=str) == dumps(messages)
    assert _stored(text) == text


def test_a_message_inside_itself_is_refused_saying_where() -> None:
    loop: dict[str, Any] = {"role": "assistant", "content": "x", "parts": [1]}
    loop["parts"].append(loop)
    with pytest.raises(Unstorable, match=r"^response message 1 holds itself at \['parts'\]\[1\]: "):
        stored_text([{"role": "assistant", "content": "fine"}, loop])


def test_an_integer_is_written_under_the_interpreters_digit_limit_as_it_is_now_and_read_under_the_default() -> None:
    before = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(0)
        assert stored_text([{"role": "assistant", "n": 10 ** 4299}]).endswith("0}]")
        # evalcli reads stored runs under Python's default limit (show, report, the run's own report)
        with pytest.raises(Unstorable, match=r"^response message 0 cannot be written as JSON \(ValueError: Exceeds the "
                           r"limit \(4300 digits\) for integer string conversion: value has 5001 digits; "):
            stored_text([{"role": "assistant", "n": 10 ** 5000}])
        assert stored_text([{"role": "assistant", "n": "1" * 5000}]) == f'[{{"role": "assistant", "n": "{"1" * 5000}"}}]'
        sys.set_int_max_str_digits(1000)
        with pytest.raises(Unstorable, match="Exceeds the limit"):
            stored_text([{"role": "assistant", "n": 10 ** 2000}])
    finally:
        sys.set_int_max_str_digits(before)


def test_under_a_raised_recursion_limit_a_message_is_walked_before_it_is_written() -> None:
    # the C encoder recursed on a value holding itself until the C stack overflowed (SIGSEGV): tests/test_adversarial_54.py
    loop: dict[str, Any] = {"role": "assistant", "content": "x"}
    loop["self"] = loop
    deep: Any = "leaf"
    for _ in range(900):
        deep = [deep]
    before = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1_000_000)
        with pytest.raises(Unstorable, match=r"^response message 1 holds itself at \['self'\]: "):
            stored_text([{"role": "assistant", "content": "fine"}, loop])
        # what could be written then could not be read back under the default limit (show, report)
        with pytest.raises(Unstorable, match=r"^response message 0 nests lists and mappings deeper than 900 levels"):
            stored_text([{"role": "assistant", "deep": deep}])
        assert stored_text([{"role": "assistant", "deep": deep[0]}]).endswith('"leaf"' + "]" * 899 + "}]")
        fine = [{"role": "assistant", "content": "é", "n": [[1.5, None]]}]
        assert stored_text(fine) == json.dumps(fine, ensure_ascii=False, default=str)
    finally:
        sys.setrecursionlimit(before)
