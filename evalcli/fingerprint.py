"""The resolved-configuration fingerprint (SPEC §21): what ``--resume`` compares, so nothing can change a run
without it noticing.

The configuration is a tree (``Dataset.resolved_configuration``: after ``${VAR}`` interpolation, with every file the
dataset names read). Its fingerprint is one digest per leaf, by the leaf's path (``data[3].target_options.temperature``,
``target.http.body.style``), each salted with a random salt the run keeps beside them: a header value or a credential is
never stored, not even as a hash that could be looked up. Comparing two fingerprints names the paths that differ,
never a value.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

SALT = "#salt"
"""The key of the salt among a fingerprint's paths."""


def leaves(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) for every leaf: mappings by key (``a.b``), lists by index (``a[3]``); an empty mapping or list
    is a leaf of its own (so adding its first entry changes it)."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, (list, tuple)) and tree:
        for n, value in enumerate(tree):
            yield from leaves(value, f"{path}[{n}]")
    else:
        yield path, tree


def fingerprint(tree: Any, salt: str | None = None) -> dict[str, str]:
    """The configuration's fingerprint: its salt (new unless given) and a salted digest per leaf path."""
    salt = salt if salt is not None else os.urandom(8).hex()
    digests = {SALT: salt}
    for path, value in leaves(tree):
        text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
        digests[path] = hashlib.sha256(f"{salt}\0{path}\0{text}".encode()).hexdigest()[:16]
    return digests


def differences(stored: dict[str, str], tree: Any) -> list[str]:
    """The paths where ``tree`` differs from the configuration ``stored`` fingerprinted (computed with its salt):
    ``path (changed)``, ``path (removed)``, ``path (added)``."""
    now = fingerprint(tree, stored[SALT])
    changed = [f"{path} (changed)" for path, digest in stored.items() if path in now and now[path] != digest]
    removed = [f"{path} (removed)" for path in stored if path not in now]
    added = [f"{path} (added)" for path in now if path not in stored]
    return changed + removed + added
