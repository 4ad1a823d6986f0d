"""Calibrated gates (docs/judges.md#calibrated-gates): a judge used as a gate with ``calibrated: {min_kappa, min_labels,
min_accuracy}`` may gate a run only when the latest stored calibration of its exact configuration meets the bar.

A judge's configuration is its kind and arguments (model or panel, criterion and the rest, ``samples``) without
``api_base`` (where the model is served, not what judges), and its kind's prompt version: a changed criterion,
model, sample rule or prompt is another judge, measured afresh. ``evalcli calibrate`` stores each measurement
(``calibrations``); the latest one of the configuration, from any dataset of the database, is the one that counts.
``plan_run`` refuses a run whose calibrated gate does not meet its bar (``check_calibrated``); ``evalcli judges``
lists every judge of a dataset with its standing (``judge_standings``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..dataset import Dataset
from ..errors import DatasetError, Problem
from ..records import record
from ..results import within
from ..scorers import CalibrationBar, ScorerSpec, find
from ..store import Store

NOT_IN_CONFIGURATION = ("api_base",)
"""Arguments that say where a judge's model is served, not what judges: left out of its configuration."""


def configuration(kind: str, args: Mapping[str, Any], prompt_version: str | None) -> str:
    """The exact configuration of a judge, as one canonical text (equal for equal judges)."""
    kept = {key: value for key, value in args.items() if key not in NOT_IN_CONFIGURATION}
    return json.dumps({"kind": kind, "args": kept, "prompt_version": prompt_version}, sort_keys=True, default=str,
                      ensure_ascii=False)


def spec_configuration(spec: ScorerSpec) -> str:
    """A configured judge's configuration, with its kind's current prompt version."""
    kind = find(spec.kind)
    return configuration(spec.kind, spec.args, kind.prompt_version if kind is not None else None)


def latest_calibration(store: Store | None, spec: ScorerSpec) -> dict[str, Any] | None:
    """The newest ``calibrations`` row measuring exactly this judge (``None``: never calibrated, or no database)."""
    if store is None:
        return None
    wanted = spec_configuration(spec)
    for row in store.query("SELECT * FROM calibrations WHERE kind = ? ORDER BY id DESC", [spec.kind]):
        stored = json.loads(row["spec"])
        if configuration(row["kind"], stored.get("args") or {}, row["prompt_version"]) == wanted:
            return dict(row)
    return None


def shortfalls(bar: CalibrationBar, row: Mapping[str, Any] | None) -> list[str]:
    """What a calibration lacks against ``bar``, each with its figures (empty: it meets the bar)."""
    if row is None:
        return ["never calibrated in this configuration (kind, model, prompt version, criterion, samples)"]
    found: list[str] = []
    compared = int(row["compared"] or 0)
    if bar.min_labels is not None and compared < bar.min_labels:
        found.append(f"{compared} labels compared, below min_labels {bar.min_labels}")
    if bar.min_kappa is not None:
        kappa = row["kappa"]
        if kappa is None:
            found.append("no kappa (it is measured on pass/fail labels only; scale labels use min_accuracy)")
        elif not within(kappa, bar.min_kappa):
            found.append(f"kappa {kappa:.3f}, below min_kappa {bar.min_kappa}")
    if bar.min_accuracy is not None:
        accuracy = row["accuracy"]
        if accuracy is None or not within(accuracy, bar.min_accuracy):
            shown = "none" if accuracy is None else f"{accuracy:.3f}"
            found.append(f"accuracy {shown}, below min_accuracy {bar.min_accuracy}")
    return found


@record(frozen=True)
class JudgeStanding:
    """One judge of a dataset: where it is used, its latest calibration, and whether it may gate."""

    spec: ScorerSpec
    role: str
    """``gate`` or ``scorer`` (``turn gate`` / ``turn scorer`` for a per-turn one)."""
    calibration: dict[str, Any] | None
    lacks: tuple[str, ...]
    """What the calibration lacks against the gate's bar (empty without a bar, or when it meets it)."""

    @property
    def may_gate(self) -> bool:
        """Whether a run may gate on it: it meets its bar, or has none (then unmeasured gating is the user's call)."""
        return not self.lacks

    def to_json(self) -> dict[str, Any]:
        row = self.calibration
        measured = None if row is None else {
            key: row[key] for key in ("run_id", "dataset", "created_at", "labels", "compared", "agreed", "accuracy",
                                      "kappa", "mae", "prompt_version", "model")}
        return {"id": self.spec.id, "role": self.role, "kind": self.spec.kind, "spec": self.spec.spec(),
                "where": self.spec.where,
                "calibrated": self.spec.calibrated.raw() if self.spec.calibrated is not None else None,
                "calibration": measured, "may_gate": self.may_gate, "lacks": list(self.lacks)}


def _judges(dataset: Dataset) -> Iterator[tuple[ScorerSpec, str]]:
    """Every LLM judge of the dataset once per (id, role), top level first, then per turn (the turns' specs each
    once by identity: a spec met again has the id it had)."""
    seen: set[tuple[str, str]] = set()
    turn_gates, turn_scorers = dataset.turn_specs()
    found = [*((g, "gate") for g in dataset.gates), *((s, "scorer") for s in dataset.scorers),
             *((g, "turn gate") for g in turn_gates), *((s, "turn scorer") for s in turn_scorers)]
    for spec, role in found:
        kind = find(spec.kind)
        if kind is None or kind.group != "judge" or (spec.id, role) in seen:
            continue
        seen.add((spec.id, role))
        yield spec, role


def judge_standings(dataset: Dataset, store: Store | None) -> list[JudgeStanding]:
    """Every judge of ``dataset`` with its latest calibration and whether it may gate."""
    standings = []
    for spec, role in _judges(dataset):
        row = latest_calibration(store, spec)
        lacks = tuple(shortfalls(spec.calibrated, row)) if spec.calibrated is not None else ()
        standings.append(JudgeStanding(spec, role, row, lacks))
    return standings


def check_calibrated(dataset: Dataset, store: Store | None) -> None:
    """Refuse (``DatasetError``, exit 2) a run with a calibrated gate whose judge does not meet its bar: each such
    gate where it is written, with the figures and the command that calibrates it."""
    problems = []
    for standing in judge_standings(dataset, store):
        if standing.may_gate:
            continue
        spec = standing.spec
        bar = json.dumps(spec.calibrated.raw() if spec.calibrated else {}).replace('"', "")
        where = f" in {store.path}" if store is not None else " (no database: pass --db PATH)"
        problems.append(Problem(spec.where or dataset.path, f'the gate "{spec.id}" may not gate this run: its judge '
                                                            f"does not meet calibrated {bar}{where}: "
                                                            + "; ".join(standing.lacks),
                                f"label its conversations (labels: {{{spec.id}: pass}} or fail) and run: evalcli "
                                f"calibrate {dataset.path} --scorer {spec.id}"
                                + (f" --db {store.path}" if store is not None else "")))
    if problems:
        raise DatasetError(problems)
