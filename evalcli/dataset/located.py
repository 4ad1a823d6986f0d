"""Where each raw item of a dataset sits, kept compactly while loading (docs/performance.md#memory).

Loading validates the items one at a time; the checks after it (each item's ``target_options``, ``setup`` and
``tools:`` against the target) still point at the item's file:line, but need neither its raw value nor a
``Positions`` object per JSONL line: a line number is enough to make one again when a problem is found.
"""

from __future__ import annotations

import hashlib
from array import array
from pathlib import Path as FsPath
from typing import Any

from .yamlsrc import Path, Positions

RECORDED_KEYS = ("transcript", "messages")
"""The keys of a recorded conversation (``messages`` is what JSONL exports call it)."""
FORM_KEYS = ("input", "inputs", "turns", "simulate", *RECORDED_KEYS)
"""The keys of an item's form: exactly one is given (``files.ItemFile``)."""
CHUNK = 1 << 20


class Located:
    """``(None, positions, path)`` of each raw item by its index, as ``load.py``'s later checks read them: a JSONL
    line's as its line number only, anything else (an item of a YAML file, with its path under ``data``) as given.
    ``recorded``: whether every raw item is a recorded conversation."""

    def __init__(self) -> None:
        self.lines = array("q")
        """Each item's line in ``file`` (0: the item is in ``others``)."""
        self.others: dict[int, tuple[Positions, Path]] = {}
        self.file = ""
        self.recorded = True

    def add(self, raw: Any, pos: Positions, at: Path) -> int:
        """The next raw item, found at ``pos`` (of its file) under ``at``; its line when kept as one (a JSONL line's,
        ``pos.line(at)``), else 0."""
        if self.recorded:
            self.recorded = isinstance(raw, dict) and any(key in raw for key in RECORDED_KEYS)
        spot = pos.values.get(()) if pos.root is None and not at and not pos.keys and len(pos.values) == 1 else None
        if spot is not None and spot[1] == 1 and (not self.file or self.file == pos.file):
            self.file = pos.file
            self.lines.append(spot[0])
            return spot[0]
        self.others[len(self.lines)] = (pos, at)
        self.lines.append(0)
        return 0

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> tuple[None, Positions, Path]:
        line = self.lines[index]
        if line:
            return None, Positions(self.file, values={(): (line, 1)}), ()
        pos, at = self.others[index]
        return None, pos, at


def file_digest(file: FsPath, hasher: Any = None) -> Any:
    """``hasher`` (a new sha256 unless given) updated with the file's bytes, read a megabyte at a time."""
    hasher = hasher if hasher is not None else hashlib.sha256()
    with file.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            hasher.update(chunk)
    return hasher
