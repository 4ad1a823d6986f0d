"""``json_text`` (evalcli/secret_references.py) is the text ``json.dumps`` makes with its options, made faster: every
digest of a run's fingerprint (docs/identity.md) is taken over it, so a stored fingerprint stays comparable."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.secret_references import json_text

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


@given(VALUES, st.booleans())
def test_json_text_is_what_json_dumps_makes(value: Any, sort_keys: bool) -> None:
    assert json_text(value, sort_keys=sort_keys) == json.dumps(value, sort_keys=sort_keys, default=repr,
                                                                ensure_ascii=False)
