"""How show and the HTML report word a tool result's retries (docs/targets/index.md): one function, ``messages.retry_note``."""

from __future__ import annotations

from typing import Any

import pytest

from evalcli.messages import retry_note


@pytest.mark.parametrize(("message", "note"), [
    ({"role": "tool", "content": "x", "retried": True},
     "retried: the tool asked the model to try again, and a later call succeeded"),
    ({"role": "tool", "content": "x", "retries_exhausted": True},
     "retried: the tool asked the model to try again, and no later call succeeded"),
    ({"role": "tool", "content": "x", "retries": 1}, "succeeded after 1 retry"),
    ({"role": "tool", "content": "x", "retries": 3}, "succeeded after 3 retries"),
    ({"role": "tool", "content": "x", "retries": 0}, None),
    ({"role": "tool", "content": "x", "retries": True}, None),
    ({"role": "tool", "content": "x"}, None),
    ({"role": "assistant", "content": "x", "retries": 2}, None),
])
def test_a_tool_results_retries_in_words(message: dict[str, Any], note: str | None) -> None:
    assert retry_note(message) == note
