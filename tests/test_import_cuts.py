"""What a run no longer imports before its first turn is replaced by the same thing (docs/performance.md "Before the
first turn"): ``secrets.html_escape`` is ``html.escape``."""

from __future__ import annotations

import html

from hypothesis import given
from hypothesis import strategies as st

from evalcli.secrets import html_escape


@given(st.text(alphabet=st.sampled_from("&<>\"'a&amp;;#x27") | st.characters()), st.booleans())
def test_html_escape_is_the_standard_librarys(text: str, quote: bool) -> None:
    assert html_escape(text, quote) == html_escape(text, quote=quote) == html.escape(text, quote=quote)
