"""Per-conversation setups for the framework examples (``target_options.setup``), written like pytest fixtures.

evalcli calls a setup once before a conversation's first turn with a ``ConversationInfo`` (thread, resource,
item id, tags, ground truth, metadata) and merges the mapping it returns (or yields) over the dataset's
``target_options`` for that conversation only; a generator is resumed after the conversation to clean up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from evalcli import ConversationInfo
from examples.frameworks.home_pydantic_ai import HomeDeps


def home_user(info: ConversationInfo) -> Iterator[dict[str, Any]]:
    """A database of one user's home city (from the item's metadata) as the agent's deps; closed afterwards."""
    user = str(info.metadata.get("user", "guest"))
    db = sqlite3.connect(":memory:", check_same_thread=False)  # tools run in PydanticAI's worker threads
    db.execute("CREATE TABLE homes (user TEXT PRIMARY KEY, city TEXT)")
    db.execute("CREATE TABLE lookups (user TEXT)")
    if "home" in info.metadata:
        db.execute("INSERT INTO homes VALUES (?, ?)", (user, str(info.metadata["home"])))
    try:
        yield {"deps": HomeDeps(user=user, db=db)}
    finally:
        db.close()
