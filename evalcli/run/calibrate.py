"""``evalcli calibrate``: run a dataset's labelled scorers and measure them against the labels (docs/recorded.md).

Only the conversations that carry a label for a calibrated scorer are played (recorded transcripts are
scored as they are; other items are played against the target), and only the labelled gates and scorers
run. The run is stored like any other (so ``evalcli show RUN ITEM`` opens a disagreeing conversation), and
each scorer's measurement is stored in ``calibrations``. The arithmetic is ``agreement``'s.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import field, replace
from datetime import UTC, datetime
from typing import Any

from ..dataset import Dataset, Item
from ..errors import ExitCode, UsageError
from ..records import record
from ..results import ItemResult, Outcome, RunResult
from ..scorers import ScorerSpec, find
from ..store import Store
from .agreement import (
    Confusion,
    agrees,
    binary_labels,
    cohen_kappa,
    fleiss_kappa,
    mean_absolute_error,
    metric_json,
    passes,
)
from .events import Events
from .options import RunOptions
from .runner import arun_evals


@record(frozen=True)
class Disagreement:
    """A labelled conversation whose score does not agree with its label, with the scorer's reason."""

    index: int
    item_id: str
    label: float
    score: float
    reason: str | None
    agreement: str | None = None
    """``k/N`` of a repeated or panel judge."""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.item_id, "label": self.label, "score": metric_json(self.score),
                "agreement": self.agreement, "reason": self.reason}


@record
class ScorerCalibration:
    """One scorer measured against its labels."""

    spec: ScorerSpec
    gate: bool
    labels: int
    """Conversations labelled for it (among those calibrated)."""
    binary: bool
    """Every label is 0 or 1 (pass/fail): accuracy by side of 0.5, kappa and confusion; else a scale (MAE)."""
    compared: int = 0
    agreed: int = 0
    errors: int = 0
    """Labelled conversations that errored, or where the scorer did."""
    not_scorable: int = 0
    confusion: Confusion | None = None
    kappa: float | None = None
    mae: float | None = None
    fleiss_kappa: float | None = None
    """Agreement among a panel's members (or a repeated judge's samples), on pass/fail sides."""
    raters: int | None = None
    """How many samples each judged conversation had (panel size or ``samples``), when more than one."""
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        return self.agreed / self.compared if self.compared else None

    @property
    def model(self) -> str | None:
        models = self.spec.args.get("models")
        if models:
            return ", ".join(str(m) for m in models)
        model = self.spec.args.get("model")
        return str(model) if model is not None else None

    @property
    def prompt_version(self) -> str | None:
        kind = find(self.spec.kind)
        return kind.prompt_version if kind is not None else None

    @property
    def panel(self) -> bool:
        return bool(self.spec.args.get("models"))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.spec.id, "role": "gate" if self.gate else "scorer", "kind": self.spec.kind,
                "model": self.model, "prompt_version": self.prompt_version, "labels": self.labels,
                "binary": self.binary, "compared": self.compared, "agreed": self.agreed,
                "accuracy": metric_json(self.accuracy), "kappa": metric_json(self.kappa),
                "confusion": self.confusion.to_json() if self.confusion is not None else None,
                "mae": metric_json(self.mae), "fleiss_kappa": metric_json(self.fleiss_kappa), "raters": self.raters,
                "errors": self.errors, "not_scorable": self.not_scorable,
                "disagreements": [d.to_json() for d in self.disagreements], "spec": self.spec.spec()}


@record
class Calibration:
    """What ``evalcli calibrate`` measured on one dataset."""

    run: RunResult
    scorers: list[ScorerCalibration]
    min_agreement: float | None = None

    def below(self) -> list[ScorerCalibration]:
        """Scorers whose accuracy is under ``min_agreement`` (or unknown: nothing could be compared)."""
        if self.min_agreement is None:
            return []
        return [s for s in self.scorers if s.accuracy is None or s.accuracy < self.min_agreement - 1e-12]

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.scorers)

    @property
    def stored(self) -> bool:
        """Whether its figures go to ``calibrations``: not when the run was interrupted, whose figures cover only the
        labelled conversations it reached, and whose latest calibration would let a calibrated gate gate on them
        (docs/judges.md#calibrated-gates)."""
        return self.run.status != "interrupted"

    @property
    def exit_code(self) -> ExitCode:
        """Interrupted (130), below ``--min-agreement`` (1), labelled conversations errored (4), else 0."""
        if self.run.status == "interrupted":
            return ExitCode.INTERRUPTED
        if self.below():
            return ExitCode.FAILED
        return ExitCode.ERRORED if self.errors or self.run.summary.errors else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run.run_id, "dataset": self.run.dataset_path, "target": self.run.target,
                "min_agreement": self.min_agreement, "passed": not self.below(), "stored": self.stored,
                "conversations": self.run.completed, "errors": self.run.summary.errors,
                "scorers": [s.to_json() for s in self.scorers]}


def calibrated_specs(dataset: Dataset, scorer_ids: Sequence[str]) -> list[tuple[ScorerSpec, bool]]:
    """The labelled top-level gates and scorers to calibrate, (spec, is a gate), in the dataset's order:
    those named (each must exist and be labelled), else every labelled one."""
    specs = [(g, True) for g in dataset.gates] + [(s, False) for s in dataset.scorers]
    labelled = {key for item in dataset.items for key in item.labels}
    known = {spec.id for spec, _ in specs}
    for wanted in scorer_ids:
        if wanted not in known:
            raise UsageError(f"--scorer {wanted}: {dataset.path} has no gate or scorer with that id",
                             f"its ids: {', '.join(sorted(known)) or '(none)'}")
        if wanted not in labelled:
            raise UsageError(f"--scorer {wanted}: no conversation of {dataset.path} has a label for it",
                             f"add labels: {{{wanted}: pass}} (or fail, or a score from 0 to 1) to the conversations "
                             "you checked")
    chosen = [(spec, gate) for spec, gate in specs if (spec.id in scorer_ids if scorer_ids else spec.id in labelled)]
    if not chosen:
        raise UsageError(f"no conversation of {dataset.path} has labels: there is nothing to calibrate",
                         "add labels: {SCORER_ID: pass} (or fail, or a score from 0 to 1) to the conversations you "
                         "checked by hand")
    # a gate and a scorer may share an id; a label then measures both
    return chosen


def narrowed(dataset: Dataset, chosen: Sequence[tuple[ScorerSpec, bool]]) -> Dataset:
    """The dataset with only the calibrated gates and scorers (no per-turn ones: labels are per conversation), their
    calibration bars set aside: measuring a judge is what meets them."""
    gates = [replace(spec, calibrated=None) for spec, gate in chosen if gate]
    scorers = [spec for spec, gate in chosen if not gate]
    items = [replace(i, turns=[replace(t, gates=[], scorers=[]) for t in i.turns]) if i.turns else i
             for i in dataset.items]
    return replace(dataset, gates=gates, scorers=scorers, items=items)


def measure(spec: ScorerSpec, gate: bool, items: Sequence[Item], results: dict[int, ItemResult]) -> ScorerCalibration:
    """One scorer against its labels, over the items labelled for it, in dataset order."""
    labelled = [(item, item.labels[spec.id]) for item in items if spec.id in item.labels]
    calibration = ScorerCalibration(spec, gate, len(labelled), binary_labels([label for _, label in labelled]))
    pairs: list[tuple[float, float]] = []
    ratings: list[list[bool]] = []
    for item, label in labelled:
        result = results.get(item.index)
        if result is None:
            continue  # not played (interrupted)
        outcome: Outcome | None = (result.gate_scores if gate else result.scores).get(spec.id)
        if result.status != "ok" or outcome is None or outcome.error is not None:
            calibration.errors += 1
            continue
        if outcome.not_scorable:
            calibration.not_scorable += 1
            continue
        if outcome.score is None or not math.isfinite(outcome.score):
            calibration.errors += 1
            continue
        score = outcome.score
        pairs.append((label, score))
        if agrees(label, score, binary=calibration.binary):
            calibration.agreed += 1
        else:
            calibration.disagreements.append(Disagreement(item.index, item.id, label, score, outcome.reason,
                                                          outcome.agreement_text))
        if len(outcome.samples) > 1:
            ratings.append([passes(s.score) for s in outcome.samples if s.score is not None])
    calibration.compared = len(pairs)
    if calibration.binary:
        calibration.confusion = Confusion.of(pairs)
        calibration.kappa = cohen_kappa(calibration.confusion)
    else:
        calibration.mae = mean_absolute_error(pairs)
    if ratings:
        calibration.raters = len(ratings[0])
        calibration.fleiss_kappa = fleiss_kappa(ratings)
    return calibration


async def acalibrate(dataset: Dataset, *, store: Store | None = None, options: RunOptions | None = None,
                     scorer_ids: Sequence[str] = (), min_agreement: float | None = None,
                     events: Events | None = None) -> Calibration:
    """Play the labelled conversations with the labelled scorers, measure each scorer, store the measurements."""
    chosen = calibrated_specs(dataset, scorer_ids)
    ids = {spec.id for spec, _ in chosen}
    wanted = {item.index for item in dataset.items if ids & set(item.labels)}
    options = replace(options or RunOptions(), only_indexes=wanted, keep_items=True, repeat=1)
    result = await arun_evals(narrowed(dataset, chosen), store=store, options=options, events=events)
    results = {r.index: r for r in result.items or []}
    calibration = Calibration(result, [measure(spec, gate, dataset.items, results) for spec, gate in chosen],
                              min_agreement)
    if store is not None and calibration.stored:
        statements = store.calibration_statements(result.run_id, dataset.name or dataset.path,
                                                  [calibration_row(s) for s in calibration.scorers])
        await asyncio.to_thread(store.execute, statements)
    return calibration


def calibration_row(s: ScorerCalibration) -> dict[str, Any]:
    """One ``calibrations`` row (without run and dataset): spec, model, prompt version, counts and metrics."""
    return {"scorer_id": s.spec.id, "kind": s.spec.kind, "spec": s.spec.spec(), "model": s.model,
            "prompt_version": s.prompt_version, "labels": s.labels, "compared": s.compared, "agreed": s.agreed,
            "errors": s.errors, "not_scorable": s.not_scorable, "accuracy": s.accuracy, "kappa": s.kappa,
            "mae": s.mae, "fleiss_kappa": s.fleiss_kappa, "metrics": s.to_json(),
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds")}
