"""Several stored runs of one dataset side by side (``evalcli compare``, and ``evalcli run`` with several
``--target``s): per scorer and gate a figure for each run, the runs' verdicts, errors, tokens, cost and wall
time, and per conversation the gates whose outcome differs between the runs (docs/targets/http.md).

Everything is read from what the store wrote; the figures are the runs' own aggregates (a scorer's mean, a
gate's pass rate over the conversations where it was scorable).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import field, replace
from datetime import datetime
from typing import Any

from ..errors import ExitCode, UsageError
from ..identity import changed
from ..records import record
from ..results import ItemResult, RunResult, Threshold
from .history import StoredRun, load_run
from .paired import PairedStats, PairedTally, check_alpha, check_detect, conversation_name, distinct_names
from .side_by_side import conversation_keys, read_rows
from .store import Store


@record(frozen=True)
class Cell:
    """One run's figure on a row: a mean (scorers) or a pass rate (gates), and whether it passed its threshold or gate
    (``None`` when nothing is asked of it)."""

    value: float | None
    passed: bool | None = None
    passes: int | None = None
    """Gates: conversations where it passed, of ``scorable``."""
    scorable: int | None = None


@record(frozen=True)
class Row:
    """A scorer or gate (``turn N: id`` per turn) with one cell per run."""

    role: str
    """``scorer`` or ``gate``."""
    id: str
    cells: list[Cell]
    threshold: object = None
    """The scorer's threshold as configured (the first run's), if any."""


@record(frozen=True)
class Column:
    """One run: what it ran against and its totals."""

    run: RunResult
    label: str
    """The target, as the run names it."""
    seconds: float | None
    """Wall time from the run's start to its finish (``None`` when it never finished)."""
    target_tokens: int
    target_cost: float
    cost: float
    """Every LLM call of the run (target, judges, simulated users)."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The run's usage overall and per purpose (``evalcli.llm.usage_summary``)."""

    def purpose(self, name: str) -> tuple[int, float]:
        """Tokens (in and out) and cost of the calls made for one purpose."""
        found = (self.usage.get("purposes") or {}).get(name) or {}
        return int(found.get("prompt_tokens", 0)) + int(found.get("completion_tokens", 0)), float(found.get("cost", 0))


@record(frozen=True)
class Difference:
    """A conversation whose gate (or status) reads differently across the runs: one state per run, each ``pass``,
    ``FAIL``, ``error`` (the conversation errored), ``n/a`` (not scorable) or ``-`` (not in that run)."""

    name: str
    """The conversation as views of two runs name it (``conversation_name``: its id, else its content)."""
    gate: str
    states: list[str]
    identity: str = ""
    """Who the conversation is (``evalcli.identity``): what a view matches it by, never its name or position."""


@record
class Comparison:
    """The runs in the order asked, their rows, and the conversations that differ."""

    dataset: str
    columns: list[Column]
    rows: list[Row]
    differences: list[Difference] = field(default_factory=list)
    items: list[list[ItemResult | None]] = field(default_factory=list)
    """Per conversation (matched by identity, ``evalcli.identity``; in dataset order), each run's result or
    ``None``."""
    identities: list[str] = field(default_factory=list)
    """The identity of each conversation of ``items``, in the same order."""
    names: dict[str, str] = field(default_factory=dict)
    """Identity -> the conversation's name in every view (``conversation_name``)."""
    paired: list[PairedStats | None] = field(default_factory=list)
    """With statistics (docs/history.md): each run after the first against the first (``None`` when they share no
    conversation); empty without."""
    alpha: float | None = None
    changed: list[str] = field(default_factory=list)
    """Item ids whose content differs between the runs (an explicit id naming another conversation): listed apart,
    their gates never compared."""
    datasets_differ: bool = False
    """The runs were of different dataset contents (their stored dataset hashes differ)."""

    def significant(self) -> list[str]:
        """With ``alpha``: each later run's regressions against the first beyond the noise, named by run."""
        if self.alpha is None:
            return []
        return [f"{column.run.run_id} against {self.columns[0].run.run_id}: {line}"
                for column, stats in zip(self.columns[1:], self.paired, strict=False) if stats is not None
                for line in stats.regressions(self.alpha)]

    @property
    def regression_exit_code(self) -> ExitCode:
        """``evalcli compare``'s exit code: 0, or with ``alpha`` 1 when a later run is worse than the first beyond
        the noise."""
        return ExitCode.FAILED if self.significant() else ExitCode.OK

    @property
    def exit_code(self) -> ExitCode:
        """The worst of the runs' exit codes (in ``EXIT_PRECEDENCE``'s order)."""
        return ExitCode.worst(c.run.exit_code for c in self.columns)


def _seconds(row: dict[str, object]) -> float | None:
    try:
        started = datetime.fromisoformat(str(row["started_at"]))
        finished = datetime.fromisoformat(str(row["finished_at"])) if row.get("finished_at") else None
    except ValueError:
        return None
    return None if finished is None else (finished - started).total_seconds()


def _column(store: Store, run: StoredRun) -> Column:
    usage = run.result.usage  # read back per purpose by load_run
    target = usage["purposes"]["target"]
    return Column(run.result, run.result.target, _seconds(run.row),
                  int(target["prompt_tokens"]) + int(target["completion_tokens"]), float(target["cost"]),
                  float(usage["cost"]), usage)


def _gate_states(item: ItemResult | None) -> dict[str, str]:
    """Each gate's state on a conversation: top-level ones by id, per-turn ones as ``turn N: id``."""
    if item is None:
        return {}
    levels = [("", item.gate_scores), *((f"turn {t.index}: ", t.gate_scores) for t in item.turns)]
    states = {}
    for prefix, gates in levels:
        for gate_id, outcome in gates.items():
            if item.status != "ok":
                states[prefix + gate_id] = "error"
            elif outcome.not_scorable:
                states[prefix + gate_id] = "n/a"
            else:
                states[prefix + gate_id] = "FAIL" if outcome.missed_gate else "pass"
    return states


def compare_runs(store: Store, run_ids: list[str], *, allow_different: bool = False, statistics: bool = False,
                 alpha: float | None = None, detect: float | None = None, transcripts: bool = False) -> Comparison:
    """Compare stored runs (ids, unique prefixes or ``latest``) of one dataset, in the order given; with
    ``statistics`` (implied by ``alpha`` and ``detect``) each later run against the first, paired (docs/history.md).
    ``transcripts``: its conversations with what the agent said (for the HTML page; else without, a tenth of the
    memory)."""
    check_alpha(alpha)
    check_detect(detect)
    if len(run_ids) < 2:
        raise UsageError("compare needs at least two runs", "evalcli compare RUN_A RUN_B [RUN_C ...]")
    runs = [load_run(store, run_id) for run_id in run_ids]
    ids = [r.result.run_id for r in runs]
    if len(set(ids)) < len(ids):
        repeated = next(i for i in ids if ids.count(i) > 1)
        raise UsageError(f"run {repeated} is named twice", "name each run once")
    names = {r.result.dataset_name for r in runs}
    if len(names) > 1 and not allow_different:
        listed = ", ".join(f"{r.result.run_id} ({r.result.dataset_path})" for r in runs)
        raise UsageError(f"these runs are not of one dataset: {listed}",
                         "compare runs of the same dataset, or pass --allow-different")
    return _comparison(store, runs, statistics or alpha is not None or detect is not None, detect, alpha,
                       transcripts)


def comparison_rows(store: Store, run_ids: list[str]) -> tuple[list[str], list[list[int | None]]]:
    """The runs' conversations matched by identity, read in SQL (docs/history.md#big-runs): each identity (in
    dataset order: by the index of the first run that has it) and each run's item index of it, or ``None``."""
    keys = [conversation_keys(store.conn, run_id) for run_id in run_ids]
    order: dict[str, tuple[int, int]] = {}
    for n, found in enumerate(keys):
        for key, index in found:
            order.setdefault(key, (index, n))
    identities = sorted(order, key=lambda key: (order[key], key))
    indexes = [dict(found) for found in keys]
    return identities, [[found.get(key) for found in indexes] for key in identities]


def _comparison(store: Store, runs: list[StoredRun], statistics: bool, detect: float | None, alpha: float | None,
                transcripts: bool) -> Comparison:
    """The comparison, the runs read a few hundred conversations at a time (``side_by_side.read_rows``): only the
    differences, the gate counts and the paired statistics' arrays are kept (with ``transcripts``, every
    conversation, for the HTML page)."""
    run_ids = [r.result.run_id for r in runs]
    identities, index_rows = comparison_rows(store, run_ids)
    hashes = {r.row.get("dataset_hash") for r in runs}
    comparison = Comparison(runs[0].result.dataset_path, [_column(store, r) for r in runs], [],
                            identities=identities, datasets_differ=None not in hashes and len(hashes) > 1)
    labels = _gate_labels(runs)
    counts = [{label: [0, 0] for _, _, label in labels} for _ in runs]
    tallies = [PairedTally() for _ in runs[1:]]
    first_names: dict[str, str] = {}
    differences: list[Difference] = []
    changed_keys: list[str] = []
    reader = read_rows(store.conn, run_ids, index_rows) if not transcripts else iter(
        _full_rows(store, run_ids, index_rows))
    for key, results in zip(identities, reader, strict=True):
        present = [r for r in results if r is not None]
        first_names[key] = conversation_name(present[0])
        _count_gates(results, labels, counts)
        for tally, other in zip(tallies, results[1:], strict=True):
            if results[0] is not None or other is not None:
                tally.add(results[0], other)
        if transcripts:
            comparison.items.append(results)
        if any(changed(present[0], other) for other in present[1:]):
            changed_keys.append(key)
            continue
        differences.extend(_differences(key, results))
    names = comparison.names = distinct_names(first_names)
    comparison.changed = [names[key] for key in changed_keys]
    comparison.differences = [replace(d, name=names[d.identity]) for d in differences]
    comparison.rows = _scorer_rows(runs) + _gate_rows(runs, labels, counts)
    if statistics:
        comparison.paired = [tally.stats(detect) for tally in tallies]
        comparison.alpha = alpha
    return comparison


def _full_rows(store: Store, run_ids: list[str], rows: list[list[int | None]]) -> Iterator[list[ItemResult | None]]:
    """Every conversation of the runs with what the agent said (the HTML page shows transcripts)."""
    full = [{item.index: item for item in store.load_items(run_id)} for run_id in run_ids]
    for row in rows:
        yield [None if index is None else full[n].get(index) for n, index in enumerate(row)]


def _differences(key: str, results: list[ItemResult | None]) -> list[Difference]:
    """Where one conversation reads differently across the runs: its status, and each gate's state."""
    found = []
    statuses = ["-" if r is None else ("ok" if r.status == "ok" else "error") for r in results]
    if len(set(statuses)) > 1:
        found.append(Difference("", "status", statuses, key))
    per_run = [_gate_states(r) for r in results]
    gates = list(dict.fromkeys(g for states in per_run for g in states))
    for gate in gates:
        states = [states.get(gate, "-" if r is None else "error" if r.status != "ok" else "-")
                  for states, r in zip(per_run, results, strict=True)]
        if len(set(states)) > 1:
            found.append(Difference("", gate, states, key))
    return found


def _scorer_rows(runs: list[StoredRun]) -> list[Row]:
    rows: list[Row] = []
    top_ids = list(dict.fromkeys(s for r in runs for s in (*r.plan.scorer_ids, *r.result.summary.scores)))
    for scorer_id in top_ids:
        threshold = next((r.plan.thresholds[scorer_id] for r in runs if scorer_id in r.plan.thresholds), None)
        cells = []
        for run in runs:
            mean = run.result.summary.scores.get(scorer_id)
            result = next((t for t in run.result.summary.threshold_results if t.id == scorer_id), None)
            passed = result.passed if result is not None else (
                Threshold.from_raw(threshold).passed(mean) if threshold is not None and mean is not None else None)
            cells.append(Cell(_finite(mean), passed))
        rows.append(Row("scorer", scorer_id, cells, threshold))
    turn_ids = list(dict.fromkeys((t.index, s) for r in runs for t in r.result.summary.turn_results for s in t.scores))
    for index, scorer_id in turn_ids:
        cells = []
        for run in runs:
            turn = next((t for t in run.result.summary.turn_results if t.index == index), None)
            result = next((t for t in turn.threshold_results if t.id == scorer_id), None) if turn else None
            cells.append(Cell(_finite(turn.scores.get(scorer_id)) if turn else None,
                              result.passed if result is not None else None))
        rows.append(Row("scorer", f"turn {index}: {scorer_id}", cells))
    return rows


def _gate_labels(runs: list[StoredRun]) -> list[tuple[int | None, str, str]]:
    """Each gate of the runs (per turn ones as ``turn N: id``): (turn index or ``None``, gate id, label)."""
    gates = list(dict.fromkeys([*((None, g) for r in runs for g in r.plan.gate_ids),
                                *((t.index, g.id) for r in runs for t in r.result.summary.turn_results
                                  for g in t.gate_results)]))
    return [(turn, gate_id, gate_id if turn is None else f"turn {turn}: {gate_id}") for turn, gate_id in gates]


def _count_gates(results: list[ItemResult | None], labels: list[tuple[int | None, str, str]],
                 counts: list[dict[str, list[int]]]) -> None:
    """Per run and gate, [conversations where it passed, scorable ones] (an errored conversation is neither)."""
    for item, count in zip(results, counts, strict=True):
        if item is None or item.status != "ok":
            continue
        states = _gate_states(item)
        for _, _, label in labels:
            state = states.get(label)
            if state in ("pass", "FAIL"):
                count[label][0] += state == "pass"
                count[label][1] += 1


def _gate_rows(runs: list[StoredRun], labels: list[tuple[int | None, str, str]],
               counts: list[dict[str, list[int]]]) -> list[Row]:
    rows = []
    for turn_index, gate_id, label in labels:
        cells = []
        for run, count in zip(runs, counts, strict=True):
            passes, scorable = count[label]
            cells.append(Cell(passes / scorable if scorable else None, _gate_result(run, turn_index, gate_id),
                              passes, scorable))
        rows.append(Row("gate", label, cells))
    return rows


def _gate_result(run: StoredRun, turn_index: int | None, gate_id: str) -> bool | None:
    """Whether the gate passed in this run (its mean >= 1), as the run's aggregate says."""
    summary = run.result.summary
    results = summary.gate_results
    if turn_index is not None:
        turn = next((t for t in summary.turn_results if t.index == turn_index), None)
        results = turn.gate_results if turn is not None else []
    found = next((g for g in results if g.id == gate_id), None)
    return found.passed if found is not None else None


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None
