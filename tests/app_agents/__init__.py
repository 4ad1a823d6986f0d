"""Agents written the way the frameworks' own example apps are (not copies of them), for docs/targets/frameworks.md tests.

Each module builds its agent at import with its model at ``$OPENAI_BASE_URL`` (the tests' loopback server).
``record()`` appends one JSON line to ``$EVALCLI_TEST_RECORD``: what setups, cleanups and tools saw.
"""

from __future__ import annotations

import json
import os
from typing import Any

URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
KEY = os.environ.get("OPENAI_API_KEY", "sk-test-not-a-real-key-0123456789")


def record(**fields: Any) -> None:
    """One JSON line of what happened, for the test to read back (nothing when no record file is set)."""
    path = os.environ.get("EVALCLI_TEST_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(fields, default=str) + "\n")
