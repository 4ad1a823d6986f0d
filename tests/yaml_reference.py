"""``yaml.safe_load`` as the reference for evalcli's YAML loader (docs/yaml.md): what each gives a document, and whether
they agree (the same values with the same types, or an error on the same line)."""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

import yaml

from evalcli.dataset import yamlsrc
from evalcli.errors import DatasetError
from evalcli.identity import canonical_json


@dataclass
class Result:
    ok: bool
    value: Any = None
    line: int | None = None
    """1-based line of the error, if it has one."""
    message: str = ""


class _Plain(Exception):
    """A plain Python error of one of pyyaml's constructors (``!!int seven``), with the node it was constructing."""

    def __init__(self, exc: Exception, mark: yaml.Mark) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.mark = mark


class _SafeLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, unchanged but for one thing: a plain Python error raised while constructing a
    node (safe_load lets a ``ValueError`` through) carries that node's place, so its line can be compared."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, RecursionError, _Plain):
            raise
        except Exception as exc:  # whatever safe_load would have let through
            raise _Plain(exc, node.start_mark) from exc


def safe_load(text: str) -> Result:
    """What ``yaml.safe_load(text)`` gives (``yaml.load`` with safe_load's own loader)."""
    loader = None
    try:
        loader = _SafeLoader(text)  # its reader checks the whole text for control characters here
        return Result(True, loader.get_single_data())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        return Result(False, line=mark.line + 1 if mark else None, message=str(exc.problem or exc.context))
    except yaml.reader.ReaderError as exc:
        return Result(False, line=text.count("\n", 0, exc.position) + 1, message=str(exc))
    except _Plain as exc:
        return Result(False, line=exc.mark.line + 1, message=str(exc))
    except ValueError as exc:  # the scanner on an escape past U+10FFFF: where it stopped
        return Result(False, line=loader.get_mark().line + 1 if loader else None, message=str(exc))
    finally:
        if loader is not None:
            loader.dispose()


def evalcli_load(text: str) -> Result:
    """What evalcli's loader gives; a mistake it reports without stopping (a duplicate key) counts as an error."""
    try:
        value, _, used = yamlsrc.load_yaml(text, "f.yaml", env={})
    except DatasetError as exc:
        return Result(False, line=_line(exc.problems[0].where), message=exc.problems[0].message)
    if used.problems:
        return Result(False, line=_line(used.problems[0].where), message=used.problems[0].message)
    return Result(True, value)


def _line(where: str) -> int | None:
    parts = where.split(":")
    return int(parts[1]) if len(parts) > 2 else None


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``True`` is not ``1``, a date not its string, a dict's keys in
    the same order, a set not a dict, a list of pairs not a list of mappings; safe_load's set is evalcli's sorted list)."""
    if isinstance(a, set) != isinstance(b, set):  # evalcli's one difference of type: a set is read as a list,
        return same(*(sorted(x, key=canonical_json) if isinstance(x, set) else x for x in (a, b)))  # sorted (yaml.md)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, set):
        return a == b and sorted(map(repr, a)) == sorted(map(repr, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, datetime.datetime):
        return a == b and a.tzinfo == b.tzinfo
    return bool(a == b)


def compare(text: str) -> tuple[str, Result, Result]:
    """``equal``, ``errors matched``, or what differs; with safe_load's result and evalcli's."""
    expected, got = safe_load(text), evalcli_load(text)
    if expected.ok and got.ok:
        return ("equal" if same(expected.value, got.value) else "values differ"), expected, got
    if not expected.ok and not got.ok:
        return ("errors matched" if expected.line == got.line else "error lines differ"), expected, got
    return ("evalcli refuses" if expected.ok else "evalcli accepts"), expected, got
