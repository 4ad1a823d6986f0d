"""Tapes (docs/hermetic.md, "Tapes"): a run's tool calls, one JSON line each (the conversation's identity, turn, call
index, tool, arguments, result or error), written by ``--record-tools DIR`` and replayed by ``tools: {replay: PATH}``.

A tape holds no secret: every line goes through the one redactor (``evalcli.secrets``), and a replayed call is
compared with the tape by its arguments as the tape holds them (``tape_arguments``). A call refused under
``--hermetic`` or ``unmocked: error`` is never written: it has no result to replay. A resumed run adds to the tape
its first invocation wrote: the lines of the conversations it keeps stay, those it plays again are replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import LONE_SURROGATE, lone_surrogate_at
from ..records import record
from ..secrets import redactor
from .plan import Recorded, ToolCall
from .spec import tape_arguments

SUFFIX = ".tape.jsonl"


class TapeError(ValueError):
    """A tape that cannot be read: ``line`` says where (1-based; 0: the file itself)."""

    def __init__(self, line: int, message: str, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.column = column
        """Where on ``line`` (1-based; 0: the line)."""

    def where(self, path: object) -> str:
        """``path:line:column``, as much of it as is known."""
        return ":".join(str(part) for part in (path, self.line, self.column) if part)


@record(frozen=True)
class Tape:
    """A tape as read: its calls by conversation identity, in the order they were made, and the digest of the file's
    bytes (what a resume compares: docs/reliability.md)."""

    calls: dict[str, list[Recorded]]
    digest: str


def read_tape(path: str | Path) -> Tape:
    """Every recorded call of a tape, by conversation identity, and the digest of the bytes they were read from."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TapeError(0, f"cannot read the tape: {exc.strerror}") from None
    try:
        # a byte-order mark (a tape saved by a Windows editor) is no JSON: read past it, as datasets and traces are
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TapeError(data[:exc.start].count(b"\n") + 1, "not UTF-8 text") from None
    calls: dict[str, list[tuple[int, int, Recorded]]] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        line = _parsed(number, raw)
        error = line.get("error")
        recorded = Recorded(line["tool"], tape_arguments(line.get("arguments") or {}), line.get("result"),
                            None if error is None else str(error))
        calls.setdefault(line["identity"], []).append((line.get("turn", 0), line.get("call", 0), recorded))
    ordered = {identity: [r for _, _, r in sorted(found, key=lambda c: (c[0], c[1]))]
               for identity, found in calls.items()}
    return Tape(ordered, "sha256:" + hashlib.sha256(data).hexdigest())


def _parsed(number: int, raw: str) -> dict[str, Any]:
    try:
        line = json.loads(raw)
    except ValueError as exc:
        raise TapeError(number, f"not valid JSON: {exc}") from None
    surrogate = lone_surrogate_at(raw)  # a result no text can hold: the writer could not store it (docs/hermetic.md)
    if surrogate is not None:
        raise TapeError(number, LONE_SURROGATE.format(escape=surrogate[2]), surrogate[1])
    if not isinstance(line, dict) or not isinstance(line.get("tool"), str) or \
            not isinstance(line.get("identity"), str) or not isinstance(line.get("arguments", {}), dict):
        raise TapeError(number, "a tape line is an object with identity, turn, call, tool, arguments and result or "
                                "error")
    for key in ("turn", "call"):
        value = line.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TapeError(number, f"'{key}' is a whole number from 0, not {json.dumps(value)}")
    if "result" not in line and "error" not in line:
        # a line whose answer was cut off or misspelt ("reslt") would replay as a tool that returned null
        raise TapeError(number, "a tape line has a 'result' (what the tool returned, null included) or an 'error' "
                                f"(what it raised); this one has neither (its keys: {', '.join(map(str, line))})")
    return line


def tape_path(folder: str | Path, dataset_path: str | Path, name: str | None = None) -> Path:
    """Where ``--record-tools DIR`` writes a dataset's tape: ``DIR/<dataset stem>.tape.jsonl``, or ``DIR/<name>.tape.jsonl``
    when a command of several runs gave each its own name (docs/hermetic.md, "Tapes")."""
    return Path(folder) / ((name or Path(dataset_path).stem) + SUFFIX)


class TapeRecorder:
    """The calls of a run's conversations, by identity (a conversation played more than once keeps its first play),
    written to ``tape_path(folder, dataset_path, name)`` in dataset order (``order``: each identity's place), redacted.

    ``resume``: the run continues one whose first invocation recorded there, so the tape's lines of every
    conversation this invocation does not play are kept (and those of a conversation it plays again replaced)."""

    def __init__(self, folder: str | Path, dataset_path: str, order: Mapping[str, int] | None = None,
                 resume: bool = False, name: str | None = None) -> None:
        self.path = tape_path(folder, dataset_path, name)
        self.order = dict(order or {})
        self.resume = resume
        self.conversations: dict[str, tuple[int, list[ToolCall]]] = {}

    def add(self, order: int, identity: str, calls: Iterable[ToolCall]) -> None:
        """A conversation's calls; those refused (no mock or tape answered them) have no result, and those a failure or
        timeout hit never ran: both are left out. A malformed answer is kept as the world gave it (``ToolCall.world``),
        so a replay under the same faults finds it."""
        self.conversations.setdefault(identity, (order, [c for c in calls if not c.refused
                                                         and c.fault in (None, "malformed")]))

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines: list[tuple[float, dict[str, Any]]] = [(order, call.tape_line(identity))
                                                     for identity, (order, calls) in self.conversations.items()
                                                     for call in calls]
        if self.resume:
            lines += self._kept()
        lines.sort(key=lambda entry: entry[0])  # stable: each conversation's calls stay in their order
        redact = redactor()
        text = "".join(f"{redact.dumps(line, ensure_ascii=False, default=str)}\n" for _, line in lines)
        # written beside it, then put in its place: a write that fails (a full disk, a folder in its way) leaves the
        # tape that was there whole, never half of the new one
        part = self.path.with_name(self.path.name + ".part")
        try:
            part.write_text(text, encoding="utf-8")
            os.replace(part, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        return self.path

    def _kept(self) -> list[tuple[float, dict[str, Any]]]:
        """The lines of the tape already there whose conversation this invocation did not play, each at its
        conversation's place (unknown identities after every known one, in the order they are)."""
        try:
            text = self.path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            return []
        kept: list[tuple[float, dict[str, Any]]] = []
        for number, raw in enumerate(text.split("\n"), start=1):
            if not raw.strip():
                continue
            try:
                line = _parsed(number, raw)
            except TapeError:
                continue  # nothing a replay could read: the recording replaces it
            identity = str(line["identity"])
            if identity not in self.conversations:
                kept.append((self.order.get(identity, float("inf")), line))
        return kept
