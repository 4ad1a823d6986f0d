"""Tapes (SPEC §25): a run's tool calls, one JSON line each (the conversation's identity, turn, call index, tool,
arguments, result or error), written by ``--record-tools DIR`` and replayed by ``tools: {replay: PATH}``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from .plan import Recorded, ToolCall
from .spec import canonical

SUFFIX = ".tape.jsonl"


class TapeError(ValueError):
    """A tape that cannot be read: ``line`` says where (1-based; 0: the file itself)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def read_tape(path: str | Path) -> dict[str, list[Recorded]]:
    """Every recorded call of a tape, by conversation identity, in the order they were made."""
    calls: dict[str, list[tuple[int, int, Recorded]]] = {}
    try:
        handle = Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise TapeError(0, f"cannot read the tape: {exc.strerror}") from None
    with handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError as exc:
                raise TapeError(number, f"not valid JSON: {exc}") from None
            if not isinstance(line, dict) or not isinstance(line.get("tool"), str) or "identity" not in line or \
                    not isinstance(line.get("arguments", {}), dict):
                raise TapeError(number, "a tape line is an object with identity, turn, call, tool, arguments and "
                                        "result or error")
            error = line.get("error")
            recorded = Recorded(line["tool"], canonical(line.get("arguments") or {}), line.get("result"),
                                None if error is None else str(error))
            calls.setdefault(str(line["identity"]), []).append((int(line.get("turn") or 0),
                                                                int(line.get("call") or 0), recorded))
    return {identity: [r for _, _, r in sorted(found, key=lambda c: (c[0], c[1]))] for identity, found in calls.items()}


class TapeRecorder:
    """The calls of a run's conversations, by identity (a conversation played more than once keeps its first
    play), written to ``DIR/<dataset stem>.tape.jsonl`` in dataset order."""

    def __init__(self, folder: str | Path, dataset_path: str) -> None:
        self.path = Path(folder) / (Path(dataset_path).stem + SUFFIX)
        self.conversations: dict[str, tuple[int, list[ToolCall]]] = {}

    def add(self, order: int, identity: str, calls: Iterable[ToolCall]) -> None:
        self.conversations.setdefault(identity, (order, list(calls)))

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ordered = sorted(self.conversations.items(), key=lambda kv: kv[1][0])
        lines = [json.dumps(call.tape_line(identity), ensure_ascii=False, default=str)
                 for identity, (_, calls) in ordered for call in calls]
        self.path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return self.path
