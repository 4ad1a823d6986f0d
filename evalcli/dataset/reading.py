"""Reading a dataset file: its top-level mapping from YAML (with positions, ``yamlsrc``), or from a JSONL file's
header line and its items, one a line (docs/datasets.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path as FsPath
from typing import Any

from ..errors import DatasetError, Problem, lone_surrogate, not_utf8
from .shapes import plain_entry_with_keys
from .yamlsrc import Interpolated, Path, Positions, load_yaml

MAX_JSONL_LINE = 8 * 1024 * 1024
HEADER_KEYS = {"target", "scorers", "gates"}
"""Keys that make the first line of a ``.jsonl`` dataset its header (no item has them)."""


class JsonlItems:
    """The items of a JSONL file after line ``after`` (its header's; 0: every line), as ``(value, positions, ())``,
    parsed one line at a time each time they are iterated."""

    def __init__(self, file: FsPath, after: int = 0) -> None:
        self.file, self.after = file, after

    def __iter__(self) -> Iterator[tuple[Any, Positions, Path]]:
        try:  # ``jsonl_items``, one generator fewer a line
            for number, value, pos in _jsonl_lines(self.file, self.after):
                if isinstance(value, list) and self.file.suffix.lower() == ".json":  # an export of one array
                    raise DatasetError([Problem(f"{self.file}:{number}:1", "this line is a JSON array: items are "
                                                "read one a line (JSON Lines), not as one array of items",
                                                f"write each item on a line of its own, e.g. jq -c '.[]' {self.file} "
                                                f"> {self.file.with_suffix('.jsonl').name}")])
                yield value, pos, ()
        except UnicodeDecodeError:
            raise DatasetError([not_utf8(self.file)]) from None


def jsonl_items(file: FsPath, header: bool, after: int = 0) -> Iterator[tuple[int, Any, Positions]]:
    """(line number, parsed value, positions) for each non-blank line after line ``after``, read one line at a
    time."""
    try:
        yield from _jsonl_lines(file, after)
    except UnicodeDecodeError:
        raise DatasetError([not_utf8(file)]) from None


def _jsonl_lines(file: FsPath, after: int) -> Iterator[tuple[int, Any, Positions]]:
    name = str(file)
    with file.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if number <= after:
                continue
            if len(line) > MAX_JSONL_LINE:
                raise DatasetError([Problem(f"{file}:{number}:1", f"line is longer than {MAX_JSONL_LINE // 2**20} MB",
                                            "keep each item under that size")])
            if not line.strip():
                continue
            try:
                value = _loads(line)
            except DuplicateKey as exc:  # as YAML's duplicate keys (docs/yaml.md): never the last one silently kept
                raise DatasetError([Problem(f"{file}:{number}:{exc.column(line)}", f"duplicate key '{exc.key}'",
                                            "each key may appear once in a JSON object; remove one of them")]) from None
            except ValueError as exc:
                raise DatasetError([_not_json(file, number, exc)]) from None
            surrogate = lone_surrogate(file, line, number) if "\\u" in line else None  # its own first test
            if surrogate is not None:
                raise DatasetError([surrogate])
            yield number, value, Positions(name, values={(): (number, 1)})


NOT_JSONL = {".csv": "CSV", ".tsv": "TSV", ".yaml": "YAML", ".yml": "YAML"}
"""Files named as another format, said to be one when they are not JSON Lines (docs/datasets.md)."""


def _not_json(file: FsPath, number: int, exc: ValueError) -> Problem:
    """A line that is not JSON; in a file named ``.csv`` or ``.yaml``, that items are read as JSON Lines only."""
    where = f"{file}:{number}:{getattr(exc, 'colno', 1)}"
    kind = NOT_JSONL.get(file.suffix.lower())
    if kind == "YAML":
        return Problem(where, "not valid JSON: items in a file are read as JSON Lines (one JSON object a line), "
                              "not as YAML", "move the items under 'data:' in the dataset itself, or write them one "
                                             'JSON object a line, e.g. {"input": "What is the weather?"}')
    if file.suffix.lower() == ".json" and number == 1:  # a pretty-printed array of items
        return Problem(where, f"not valid JSON: {getattr(exc, 'msg', exc)}: items in a file are read as JSON Lines "
                              "(one JSON object a line), not as one JSON document over several lines",
                       f"write each item on a line of its own (an array of items: jq -c '.[]' {file} > "
                       f"{file.with_suffix('.jsonl').name})")
    if kind is not None:
        return Problem(where, f"not valid JSON: items in a file are read as JSON Lines (one JSON object a line), "
                              f"not as {kind}", 'write one JSON object a line, e.g. {"id": "a", "input": "What is '
                                                'the weather?"} (Python: csv.DictReader, then json.dumps each row)')
    return Problem(where, f"not valid JSON: {getattr(exc, 'msg', exc)}", "each line must be one JSON object")


class DuplicateKey(Exception):
    """A JSON object that gives a key twice (``json.loads`` would keep the last one, silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def column(self, line: str) -> int:
        """Where the key is given again (1-based; 1 when it cannot be told)."""
        import re

        keys = [m.start() for m in re.finditer(re.escape(json.dumps(self.key)) + r"\s*:", line)]  # keys, not values
        return keys[1] + 1 if len(keys) > 1 else 1


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(key for key, _ in pairs if key in seen or seen.add(key)))  # type: ignore[func-returns-value]
    return found


_SCAN: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder(  # type: ignore[attr-defined]
    object_pairs_hook=_unique).scan_once
"""CPython's scanner behind ``json.loads`` (its C one), called directly for a line that is one JSON value; every object
is checked for a key given twice (about 1.5 us a line of a recorded conversation)."""


def _loads(line: str) -> Any:
    """``json.loads(line)``: a line that is one value from its first character to its line break is scanned at once;
    any other (leading blanks, a byte-order mark, more after the value, a mistake) is read by ``json.loads`` itself,
    which words the mistake. A key given twice in an object is a ``DuplicateKey``."""
    try:
        value, end = _SCAN(line, 0)
    except (StopIteration, ValueError):
        return json.loads(line, object_pairs_hook=_unique)
    if end == len(line) or line[end:] in _LINE_ENDS:
        return value
    return json.loads(line, object_pairs_hook=_unique)


_LINE_ENDS = frozenset({"\n", "\r\n", "\r"})


def read_top(file: FsPath) -> tuple[Any, Positions, Interpolated, Iterable[tuple[Any, Positions, Path]] | None]:
    """The top-level mapping of a dataset file; for ``.jsonl`` files also its items (header line first), read one
    line at a time as they are iterated (``JsonlItems``: never held whole, docs/performance.md#memory)."""
    if file.suffix in (".py", ".pyw"):  # the agent named where its dataset goes (docs/datasets.md)
        raise DatasetError([Problem(str(file), "this is a Python file, not a dataset",
                                    f"name the dataset (a YAML file) whose 'target:' names the agent, e.g. 'target: "
                                    f"{file.stem}:answer' ('evalcli init' writes a starter, eval.yaml)")])
    if file.suffix == ".jsonl":
        first = next(jsonl_items(file, header=True), None)
        if first is None or not (isinstance(first[1], dict) and HEADER_KEYS & set(first[1])):
            raise DatasetError([Problem(f"{file}:1:1", "a JSONL dataset needs a first line with 'target' (and scorers)",
                                        'start the file with {"target": "module:attr", "scorers": [...]} ("target" may '
                                        "be left out when every item is a recorded transcript)")])
        number, header, header_pos = first
        header.setdefault("data", [])
        return header, header_pos, Interpolated(), JsonlItems(file, after=number)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError([Problem(str(file), f"cannot read dataset: {exc.strerror}", "check the path")]) from None
    except UnicodeDecodeError:
        raise DatasetError([not_utf8(file)]) from None
    try:
        data, pos, used = load_yaml(text, str(file))
    except DatasetError as exc:
        raise DatasetError([plain_entry_with_keys(problem, text) for problem in exc.problems]) from None
    return data, pos, used, None


def data_file_missing(name: str, dataset: FsPath) -> tuple[str, str]:
    """The problem and hint of a ``data_file`` that is not a file: where it was looked for, and the path to write when
    it was written relative to the current directory instead of the dataset's folder (docs/datasets.md)."""
    looked = dataset.parent / name
    what = "is a folder, not a file" if looked.is_dir() else "not found"
    problem = f"data file '{name}' {what} (looked for {looked})"
    here = FsPath(name)
    if not here.is_absolute() and here.is_file() and here.resolve() != looked.resolve():
        try:
            meant = os.path.relpath(here.resolve(), dataset.parent.resolve())
        except ValueError:  # another drive (Windows)
            meant = str(here.resolve())
        return problem, (f"a data_file is relative to the dataset's folder, not the current directory: "
                         f"write 'data_file: {FsPath(meant).as_posix()}'")
    return problem, "give a path relative to the dataset file's folder"


def missing_dataset(path: str | FsPath) -> Problem:
    """A dataset path that is not there, with the dataset file of its folder it probably meant (``eval.yml`` for
    ``eval.yaml``)."""
    import difflib

    file = FsPath(path)
    try:
        beside = sorted(p.name for p in file.parent.iterdir() if p.suffix in (".yaml", ".yml", ".jsonl") and p.is_file())
    except OSError:
        beside = []
    stems = {FsPath(name).stem: name for name in beside}
    close = [stems[s] for s in difflib.get_close_matches(file.stem, list(stems), n=1, cutoff=0.8)]
    if close:
        return Problem(str(path), f"no such dataset file (did you mean {file.parent / close[0]}?)",
                       f"name the file that is there: {file.parent / close[0]}")
    return Problem(str(path), "no such dataset file", "check the path (e.g. datasets/weather.yaml)")


def no_item(file: FsPath, data_file: str | None, jsonl: bool, pos: Positions) -> Problem:
    """A dataset with no item, said where the items were to be: its ``data``, the ``data_file`` it names (an empty
    export) or, in a ``.jsonl`` dataset, the lines after its header (docs/datasets.md#validation)."""
    line = '{"input": "What is the weather?"}'
    if jsonl:
        return Problem(f"{file}:2:1", f"{file.name} has no item after its header line: there is nothing to run",
                       f"write one item a line after the header, e.g. {line}")
    if data_file is not None:
        return pos.problem(("data_file",), f"the data_file {data_file} holds no item: there is nothing to run",
                           f"write one item a line in it, e.g. {line}")
    return pos.problem(("data",), "'data' is empty: there is nothing to run",
                       "add at least one item, e.g. '- input: What is the weather?'")
