"""The in-memory pairing of ``diff`` and ``compare`` before they streamed their runs in SQL (docs/history.md#big-runs),
kept verbatim as the oracle of tests/test_pairing_sql.py: both runs' conversations held whole, paired in Python."""

from __future__ import annotations

import math
from dataclasses import replace

from evalcli.identity import changed, identity_of, pair_by_identity
from evalcli.results import ItemResult
from evalcli.store.compare import Cell, Comparison, Difference, Row, _column, _gate_result, _gate_states, _scorer_rows
from evalcli.store.diff import ItemChange, _changes
from evalcli.store.history import StoredRun
from evalcli.store.paired import Figure, PairedStats, PassFail, _detectable, _values, conversation_names, pair_conversations
from evalcli.store.stats import differences, mcnemar_p, paired_difference, spread
from evalcli.store.store import Store


def _item_changes(a: list[ItemResult], b: list[ItemResult], tolerance: float) -> list[ItemChange]:
    changes = []
    names = conversation_names([*a, *b])
    for item_a, item_b in pair_by_identity(a, b):
        edited = item_a is not None and item_b is not None and changed(item_a, item_b)
        scores_a = {k: o.score for k, o in (item_a.scores if item_a else {}).items() if o.score is not None}
        scores_b = {k: o.score for k, o in (item_b.scores if item_b else {}).items() if o.score is not None}
        shown = item_b if item_b is not None else item_a
        assert shown is not None
        scores = _changes(scores_a, scores_b, tolerance)
        if edited:  # another conversation under one id: its scores are not a regression
            scores = [replace(score, regressed=False) for score in scores]
        changes.append(ItemChange(shown.id, item_a.passed if item_a else None, item_b.passed if item_b else None,
                                  scores, edited, names[identity_of(shown)], item_a.status if item_a else None,
                                  item_b.status if item_b else None))
    return changes



def paired_stats(items_a: list[ItemResult], items_b: list[ItemResult], detect: float | None = None
                 ) -> PairedStats | None:
    """The statistics of B against A; ``None`` when the runs share no conversation."""
    pairs = pair_conversations(items_a, items_b)
    both = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not both:
        return None
    b_count = sum(1 for a, b in both if a.passed and not b.passed)
    c_count = sum(1 for a, b in both if b.passed and not a.passed)
    pass_fail = PassFail(len(both), sum(a.passed for a, _ in both), sum(b.passed for _, b in both),
                         b_count, c_count, mcnemar_p(b_count, c_count))
    stats = PairedStats(len(both), sum(1 for _, b in pairs if b is None), sum(1 for a, _ in pairs if a is None),
                        pass_fail, _figures(both), _rates(both),
                        status_changed=sum(1 for a, b in both if a.status != b.status))
    stats.detectable.append(_detectable("pass/fail", len(both), (b_count + c_count) / len(both), 1.0, detect))
    if stats.rates is not None:
        repeated = [(a, b) for a, b in both if a.repeats > 1 and b.repeats > 1]
        diffs = differences([a.pass_rate for a, _ in repeated], [b.pass_rate for _, b in repeated])
        step = 1 / math.lcm(*{item.repeats for pair in repeated for item in pair})
        stats.detectable.append(_detectable("pass rate", len(repeated), spread(diffs), step, detect))
    return stats





def _figures(both: list[tuple[ItemResult, ItemResult]]) -> list[Figure]:
    per_pair = [(_values(a), _values(b)) for a, b in both]
    keys = list(dict.fromkeys(k for va, vb in per_pair for k in (*va, *vb)))
    keys.sort(key=lambda k: k[0] != "gate")  # gates first, each group in the order first seen
    figures = []
    for key in keys:
        a_scores = [va[key] for va, vb in per_pair if key in va and key in vb]
        b_scores = [vb[key] for va, vb in per_pair if key in va and key in vb]
        difference = paired_difference(a_scores, b_scores)
        if difference is not None:
            figures.append(Figure(key[0], key[1], math.fsum(a_scores) / len(a_scores),
                                  math.fsum(b_scores) / len(b_scores), difference))
    return figures


def _rates(both: list[tuple[ItemResult, ItemResult]]) -> Figure | None:
    """Each conversation's pass rate over its plays, when both runs played it more than once."""
    repeated = [(a, b) for a, b in both if a.repeats > 1 and b.repeats > 1]
    a_rates, b_rates = [a.pass_rate for a, _ in repeated], [b.pass_rate for _, b in repeated]
    difference = paired_difference(a_rates, b_rates)
    if difference is None:
        return None
    return Figure("pass rate", "every gate, per play", math.fsum(a_rates) / len(a_rates),
                  math.fsum(b_rates) / len(b_rates), difference)


def _comparison(store: Store, runs: list[StoredRun], item_lists: list[list[ItemResult]]) -> Comparison:
    by_identity = [{identity_of(item): item for item in items} for items in item_lists]
    order: dict[str, tuple[int, int]] = {}
    for n, items in enumerate(item_lists):
        for item in items:
            order.setdefault(identity_of(item), (item.index, n))
    keys = sorted(order, key=lambda key: (order[key], key))
    rows = _scorer_rows(runs) + _gate_rows(runs, item_lists)
    hashes = {r.row.get("dataset_hash") for r in runs}
    comparison = Comparison(runs[0].result.dataset_path, [_column(store, r) for r in runs], rows,
                            items=[[found.get(key) for found in by_identity] for key in keys], identities=keys,
                            names=conversation_names(item for items in item_lists for item in items),
                            datasets_differ=None not in hashes and len(hashes) > 1)
    for key, results in zip(keys, comparison.items, strict=True):
        present = [r for r in results if r is not None]
        name = comparison.names[key]
        if any(changed(present[0], other) for other in present[1:]):
            comparison.changed.append(name)
            continue
        statuses = ["-" if r is None else ("ok" if r.status == "ok" else "error") for r in results]
        if len(set(statuses)) > 1:
            comparison.differences.append(Difference(name, "status", statuses, key))
        per_run = [_gate_states(r) for r in results]
        gates = list(dict.fromkeys(g for states in per_run for g in states))
        for gate in gates:
            states = [states.get(gate, "-" if r is None else "error" if r.status != "ok" else "-")
                      for states, r in zip(per_run, results, strict=True)]
            if len(set(states)) > 1:
                comparison.differences.append(Difference(name, gate, states, key))
    return comparison

def _gate_rows(runs: list[StoredRun], item_lists: list[list[ItemResult]]) -> list[Row]:
    gates = list(dict.fromkeys([*((None, g) for r in runs for g in r.plan.gate_ids),
                                *((t.index, g.id) for r in runs for t in r.result.summary.turn_results
                                  for g in t.gate_results)]))
    rows = []
    for turn_index, gate_id in gates:
        label = gate_id if turn_index is None else f"turn {turn_index}: {gate_id}"
        cells = []
        for run, items in zip(runs, item_lists, strict=True):
            states = [_gate_states(item).get(label) for item in items if item.status == "ok"]
            scorable = [s for s in states if s in ("pass", "FAIL")]
            passes = sum(1 for s in scorable if s == "pass")
            cells.append(Cell(passes / len(scorable) if scorable else None, _gate_result(run, turn_index, gate_id),
                              passes, len(scorable)))
        rows.append(Row("gate", label, cells))
    return rows

