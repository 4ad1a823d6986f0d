"""Each spec of a dataset once: identical references share one ``ScorerSpec`` (``references.parse_list``), so the
thousands of turns of a large dataset name a few, and what looks at each spec (its kind, its models, whether it is
registered) walks these instead (docs/performance.md, "Before the first turn")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..scorers import ScorerSpec


class Scored(Protocol):
    """A turn, as this module reads it (``items.Turn``)."""

    @property
    def gates(self) -> list[ScorerSpec]: ...

    @property
    def scorers(self) -> list[ScorerSpec]: ...


class Turned(Protocol):
    """A conversation, as this module reads it (``items.Item``)."""

    @property
    def turns(self) -> Sequence[Scored] | None: ...


Distinct = tuple[list[ScorerSpec], list[ScorerSpec], list[ScorerSpec]]
"""Every spec, the turns' gates, the turns' scorers: each spec once."""


def distinct_specs(gates: list[ScorerSpec], scorers: list[ScorerSpec], items: Sequence[Turned]) -> Distinct:
    """Every spec of ``gates``, ``scorers`` and the items' turns once (by identity), in the order of first appearance
    (``Dataset.all_specs``' order); and the turns' gates and turns' scorers each once, in their own order."""
    turn_gates: dict[int, ScorerSpec] = {}
    turn_scorers: dict[int, ScorerSpec] = {}
    every = {id(spec): spec for spec in gates}
    for spec in scorers:
        every.setdefault(id(spec), spec)
    for item in items:
        for turn in item.turns or ():
            for spec in turn.gates:
                if id(spec) not in turn_gates:
                    turn_gates[id(spec)] = spec
                    every.setdefault(id(spec), spec)
            for spec in turn.scorers:
                if id(spec) not in turn_scorers:
                    turn_scorers[id(spec)] = spec
                    every.setdefault(id(spec), spec)
    return list(every.values()), list(turn_gates.values()), list(turn_scorers.values())
