"""A run's control of its target's tools (docs/hermetic.md): each conversation's ``ToolPlan`` from the dataset's, item's
and turns' ``tools:``, ``--hermetic``, and the tape ``--record-tools`` writes. A run that controls no tool still gives
each conversation a plan that watches, so the calls evalcli sees are recorded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dataset import Dataset, Item
from ..errors import DatasetError, Problem
from ..identity import identity_of
from ..records import record
from ..tools import ToolPlan, carry_plans_into_threads

if TYPE_CHECKING:
    from ..tools import TapeRecorder


def tape_identity(item: Item) -> str:
    """The conversation's identity on a tape: its identity across runs (docs/identity.md: its id, else its content's
    digest), so a tape still answers the same conversation after the dataset's items move."""
    return identity_of(item)


@record(frozen=True)
class ToolSettings:
    """What a run does with tools besides the dataset's ``tools:``, decided once per run (``of_run``): whether the
    dataset controls tools at all depends only on the dataset, and asking it for every conversation scanned every
    item each time (a run of N conversations did N^2 work; docs/performance.md)."""

    hermetic: bool = False
    recorder: TapeRecorder | None = None
    controlled: bool = False
    """Whether the dataset writes ``tools:`` or ``unmocked: error`` anywhere (``Dataset.controls_tools``)."""

    @classmethod
    def of_run(cls, dataset: Dataset, hermetic: bool, record_tools: str | None, resume: str | None,
               tape_name: str | None = None, controlled: bool | None = None) -> ToolSettings:
        """A run's settings: ``--hermetic``, ``--record-tools DIR``'s tape in dataset order, which a resumed run
        adds to (``resume``: the conversations its first invocation played keep their lines; docs/hermetic.md), and
        whether the dataset controls tools (``controlled``, when the run's plan knows already; else the dataset is
        asked, once)."""
        recorder = None
        if record_tools:
            from ..tools import TapeRecorder

            order = {tape_identity(item): item.index for item in dataset.items}
            recorder = TapeRecorder(record_tools, dataset.path, order, resume=resume is not None, name=tape_name)
        return cls(hermetic, recorder, dataset.controls_tools if controlled is None else controlled)

    @property
    def active(self) -> bool:
        """Whether conversations get a tool plan that controls tools (without one, tools run untouched, watched)."""
        return self.hermetic or self.recorder is not None or self.controlled

    def plan_for(self, dataset: Dataset, item: Item) -> ToolPlan:
        """The conversation's plan (one that only watches when nothing controls tools)."""
        carry_plans_into_threads()
        if not self.active:
            return ToolPlan(controls=False)
        base = item.tools.over(dataset.tools) if item.tools is not None else dataset.tools
        turns = {t: turn.tools for t, turn in enumerate(item.turns or ()) if turn.tools is not None}
        tape = None
        if base is not None and base.tape is not None:
            tape = list(base.tape.get(tape_identity(item), ()))
        return ToolPlan(base, turns, item.unmocked or dataset.unmocked, self.hermetic, tape,
                        identity=tape_identity(item))

    def finished(self, item: Item, plan: ToolPlan | None) -> None:
        if self.recorder is not None and plan is not None:
            self.recorder.add(item.index, tape_identity(item), plan.calls)


def check_hermetic(dataset: Dataset, hermetic: bool) -> None:
    """Under ``--hermetic``, a target whose tools evalcli can neither control nor see run is refused before anything
    runs (``DatasetError``, exit 2), with the reason: nothing could prove that no tool ran live (docs/hermetic.md)."""
    reason = dataset.target.uncontrolled() if hermetic and dataset.target is not None else None
    if reason is not None:
        raise DatasetError([Problem(dataset.path, f"--hermetic cannot hold: {reason}",
                                    "let evalcli answer the target's tools or see them run (docs/hermetic.md), or run "
                                    "this dataset without --hermetic")])
