"""Near misses: what people write that is almost a dataset, said as such, with the lines to write instead.

Gates and scorers written on an item (they belong on a turn, or at the top level), and keys written under a plain
list entry (``- weather-judge`` then ``threshold: 0.8``, a YAML syntax error) are the mistakes of someone who knows
what they want; the error shows them how it is written.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import Problem
from ..scorers import Registry, flow_yaml
from ..scorers.kinds import WRAPPER_KEYS
from .references import parse_list
from .yamlsrc import Path, Positions

ITEM_ASSERTIONS = {"gates": "gates", "scorers": "scorers", "gate": "gates", "scorer": "scorers"}
"""Keys an item cannot have (gates and scorers are per turn, or for the whole dataset), and the list each means."""
SHOWN_TURNS = 4
"""At most this many turns are written out in a rewrite (the first ones and the last)."""
INDENT = "\n      "
"""Where a line of YAML in a hint starts (under ``  hint: ``)."""


def misplaced_assertions(raw: dict[Any, Any], path: Path, pos: Positions, registry: Registry, label: str,
                         problems: list[Problem]) -> dict[Any, Any]:
    """``raw`` without the gates and scorers written on the item itself; each is reported with the rewrite that puts
    it on a turn (a one-turn ``turns:`` item for an ``input``), and its entries are checked as well."""
    misplaced = [key for key in raw if key in ITEM_ASSERTIONS]
    for key in misplaced:
        listed = ITEM_ASSERTIONS[key]
        parse_list(raw[key], (*path, key), pos, registry, problems, gate=listed == "gates")
        top = f"or put them in the dataset's top-level '{listed}:', which apply to every conversation as a whole"
        entries = f"{listed}: {flow_yaml(raw[key])}"
        if "input" in raw and "turns" not in raw:
            message = f"'{key}' cannot be written on an 'input' item: per-turn {listed} belong to a turn of a 'turns:' item"
            hint = (f"write the item as one turn ({top}):{INDENT}turns:{INDENT}  - input: {flow_yaml(raw['input'])}"
                    f"{INDENT}    {entries}")
        elif "inputs" in raw and isinstance(raw["inputs"], list) and raw["inputs"] and "turns" not in raw:
            message = f"'{key}' cannot be written on an 'inputs' item: per-turn {listed} belong to a turn of a 'turns:' item"
            hint = (f"write each message as a turn, with the {listed} on the turn whose answer they check ({top}):"
                    f"{INDENT}turns:{_turns(raw['inputs'], entries)}")
        elif isinstance(raw.get("turns"), list) and raw["turns"]:
            first = raw["turns"][0].get("input") if isinstance(raw["turns"][0], dict) else None
            message = f"'{key}' cannot be written on a 'turns' item itself: per-turn {listed} go under the turn they check"
            hint = (f"move them under the turn they check ({top}):{INDENT}turns:{INDENT}  - input: {flow_yaml(first or '...')}"
                    f"{INDENT}    {entries}")
        else:
            message = f"'{key}' cannot be written on an item: {listed} are per turn, or for the whole dataset"
            hint = f"write them at the dataset's top level ('{listed}:' beside 'data:'), where they apply to every conversation"
        problems.append(pos.problem((*path, key), f"{label}: {message}", hint, key=True))
    return {key: value for key, value in raw.items() if key not in misplaced}


def _turns(inputs: list[Any], entries: str) -> str:
    """``inputs`` as turns of a hint, the assertions on the last one (the middle left out when there are many)."""
    shown = inputs if len(inputs) <= SHOWN_TURNS else [*inputs[:SHOWN_TURNS - 1], None, inputs[-1]]
    lines = [f"{INDENT}  - input: {flow_yaml(text)}" if text is not None else f"{INDENT}  ..." for text in shown]
    return "".join(lines) + f"{INDENT}    {entries}"


_PLAIN_ENTRY = re.compile(r"^(?P<indent>\s*)-\s+(?P<name>[^\s#{\[&*!|>'\"%@`-][^#:]*?)\s*(#.*)?$")
"""A list entry that is a plain string: ``  - weather-judge``."""
_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[^\s#:\-][^:#]*?)\s*:(?:\s+(?P<value>[^#]*?))?\s*(#.*)?$")
"""A line with a key: ``    threshold: 0.8``."""


def plain_entry_with_keys(problem: Problem, text: str) -> Problem:
    """A key written under a plain list entry (``- weather-judge`` then ``threshold: 0.8``) is a YAML syntax error
    that its parser words as "mapping values are not allowed"; the hint says the entry must become a mapping, and
    shows it. Any other problem is returned as it is."""
    if "mapping values are not allowed" not in problem.message:
        return problem
    parts = problem.where.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return problem
    lines = text.splitlines()
    number = int(parts[1])
    if not 1 < number <= len(lines):
        return problem
    before = [(n, line) for n, line in enumerate(lines[:number - 1], start=1)
              if line.strip() and not line.lstrip().startswith("#")]
    entry = _PLAIN_ENTRY.match(before[-1][1]) if before else None
    key = _KEY_LINE.match(lines[number - 1])
    if entry is None or key is None or len(key["indent"]) <= len(entry["indent"]):
        return problem
    name, field = entry["name"], key["key"]
    if field in WRAPPER_KEYS and _list_key(before, len(entry["indent"])) in ("gates", "scorers"):
        hint = (f"'- {name}' (line {before[-1][0]}) is a plain string, so it cannot have '{field}' under it; write the "
                f"wrapper:{INDENT}- scorer: {name}{INDENT}  {field}: {key['value'] or '...'}")
    else:
        hint = (f"'- {name}' (line {before[-1][0]}) is a plain string, so it cannot have keys under it; make the entry "
                f"a mapping, e.g. '- input: {name}' (an item) or '- scorer: {name}' (a gate or scorer)")
    return Problem(problem.where, problem.message, hint)


def _list_key(before: list[tuple[int, str]], indent: int) -> str | None:
    """The key whose list holds the entry indented by ``indent``, read from the lines before it."""
    for _, line in reversed(before):
        key = _KEY_LINE.match(line)
        width = len(line) - len(line.lstrip())
        if width < indent or (width == indent and not line.lstrip().startswith("-")):
            return key["key"] if key is not None and not key["value"] else None
    return None
