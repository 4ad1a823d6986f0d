"""Shard databases of one dataset combined into one run (``evalcli merge``).

The merged run's aggregate is recomputed with ``Aggregator`` from the per-item results in dataset
order, so sharded-then-merged gives exactly what one unsharded run gives.
"""

from __future__ import annotations

import heapq
import json
import shlex
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from ..aggregate import Aggregator, PassRates, exit_code
from ..errors import ExitCode, StoreError, UsageError
from ..fingerprint import SALT, stored_differences
from ..identity import identity_of
from ..records import record
from ..results import ItemResult, Plan, Summary
from ..words import plural
from .history import open_existing
from .ids import new_run_id
from .migrations import rollback
from .store import Store, now

COPIED_TABLES = ("items", "turns", "scores", "llm_calls", "plays")
"""Per-item tables copied into a merged run, parents first (turns, scores and plays reference items)."""


@record
class MergeResult:
    """A merged run written to ``out``: its id, the runs it came from, its summary and exit code."""

    run_id: str
    out: str
    sources: list[tuple[str, str]]
    """(database path, run id) of every merged run."""
    summary: Summary
    exit_code: int
    warnings: list[str] = field(default_factory=list)
    repeats: dict[str, Any] = field(default_factory=dict)
    """With ``--repeat`` shards: ``repeat``, ``pass_at_k`` and ``pass_all_k`` over every shard's conversations, as
    one unsharded run's JSON has them (``{}`` otherwise)."""


def _find_run(stores: list[Store], run_id: str) -> tuple[Store, dict[str, Any]]:
    found = []
    for store in stores:
        try:
            found.append((store, store.require_run(run_id)))
        except StoreError:
            continue
    if len(found) != 1:
        where = "none of" if not found else "several of"
        raise UsageError(f"run '{run_id}' is in {where} the databases {', '.join(s.path for s in stores)}",
                         "pass --run with an id (or unique prefix) that 'evalcli runs --db PATH' shows")
    return found[0]


def _pick_runs(stores: list[Store], run_ids: list[str], dataset: str = "") -> list[tuple[Store, dict[str, Any]]]:
    """The runs named by ``--run``, or else the latest run of ``dataset`` in each database."""
    if run_ids:
        return [_find_run(stores, run_id) for run_id in run_ids]
    picked, lacking = [], []
    for store in stores:
        rows = [row for row in store.query("SELECT * FROM runs ORDER BY id DESC") if _dataset_key(row["dataset"],
                                                                                                  dataset) == dataset]
        if rows:
            picked.append((store, rows[0]))
        else:
            lacking.append(store)
    # a database without a run of one of several datasets holds an empty shard of it (no run stored): no loss when the
    # others are shards, whose split tells whether a missing shard held conversations (docs/ci.md)
    hashes = list({row["dataset_hash"] for _, row in picked})
    elsewhere = [store for store in lacking  # the same file run from another path: not an empty shard
                 if store.conn.execute("SELECT 1 FROM runs WHERE dataset_hash = ? LIMIT 1", hashes[:1]).fetchone()]
    if lacking and (elsewhere or not all(_options(row).get("shard") for _, row in picked)):
        raise UsageError(f"{(elsewhere or lacking)[0].path} holds no run of dataset {dataset}",
                         "merge only the shard databases of one dataset, or choose runs with --run ID")
    return picked


def _options(row: dict[str, Any]) -> dict[str, Any]:
    """A run row's ``options``, read once: the checks of a merge each ask it (a shard's holds its configuration's
    fingerprint, an entry a conversation), and the row keeps what was read under a key no column has."""
    read: dict[str, Any] | None = row.get(_READ)
    if read is None:
        read = row[_READ] = json.loads(row["options"] or "{}")
    return read


_READ = "#options"


def _check_mergeable(picked: list[tuple[Store, dict[str, Any]]]) -> list[str]:
    """Refuse runs of different datasets, targets or plans, or unfinished ones; warn of missing shards."""
    first_store, first = picked[0]
    plan = first_store.plan(first["id"])
    if len({row["id"] for _, row in picked}) != len(picked):
        raise UsageError("a run is named twice (or a database given twice)", "name each run and database once")
    for store, row in picked:
        where = f"run {row['id']} in {store.path}"
        for key in ("dataset", "dataset_hash", "target"):  # a dataset by its file's name: two checkouts' paths differ
            if (_name(row[key]) if key == "dataset" else row[key]) != (_name(first[key]) if key == "dataset" else
                                                                          first[key]):
                raise UsageError(f"{where} has {key} {row[key]!r}, but run {first['id']} in {first_store.path} "
                                 f"has {first[key]!r}: they are not shards of one dataset run",
                                 "merge only shards run from the same dataset file (same content and target)")
        if store.plan(row["id"]) != plan:
            raise UsageError(f"{where} has different gates, scorers or thresholds than run {first['id']}",
                             "merge only shards run with the same dataset and scorers.yaml")
        _check_same_repeats(first_store, first, store, row)
        _check_same_configuration(first_store, first, store, row)
        _check_same_rules(first_store, first, store, row)
        rerun = _options(row).get("only_indexes")
        if rerun is not None:
            raise UsageError(f"{where} is a --rerun-failed run: it holds only the {plural(len(rerun), 'conversation')} it "
                             "played again, not its shard's others, so the merged run would leave them out",
                             f"merge the shard's whole run instead (--run RUN_ID; 'evalcli runs --db {store.path}' "
                             "lists them)")
        if row["status"] != "completed":
            raise UsageError(f"{where} is {row['status']}, not completed",
                             f"finish it first: evalcli run {shlex.quote(row['dataset'])} --resume {row['id']} "
                             f"--db {shlex.quote(store.path)}")
    shards: list[Any] = [_options(row).get("shard") for _, row in picked]
    counts = {s[1] for s in shards if s}
    if len(counts) > 1:
        raise UsageError(f"the runs are shards of different counts ({', '.join(map(str, sorted(counts)))})",
                         "merge the shards of one '--shard I/N' split (the same N)")
    if counts and all(shards):
        total = counts.pop()
        missing = sorted(set(range(1, total + 1)) - {s[0] for s in shards})
        held: list[Any] = [_options(row).get("shards_held") for _, row in picked]
        twice = len({s[0] for s in shards}) < len(shards)  # one shard given twice: named as such when folded
        if missing and not twice and all(isinstance(h, list) for h in held):
            # each shard knows which of the split hold a conversation: one of them missing is refused, an empty one
            # (no run stored) is no loss (docs/ci.md)
            lost = [i for i in missing if i in held[0]]
            if lost:
                first_store, first = picked[0]
                raise UsageError(f"shard{'s' if len(lost) > 1 else ''} {', '.join(f'{i}/{total}' for i in lost)} "
                                 f"of {first['dataset']} {'are' if len(lost) > 1 else 'is'} missing: "
                                 f"{'they hold' if len(lost) > 1 else 'it holds'} conversations, so the merged run "
                                 "would pass or fail without them",
                                 f"run it (evalcli run {first['dataset']} --shard {lost[0]}/{total} --db SHARD.db; "
                                 "--resume RUN_ID for one that was interrupted), then merge every shard's database")
            return []
        if missing:
            return [f"shards {', '.join(f'{i}/{total}' for i in missing)} are missing: the merged run covers "
                    "only part of the dataset"]
    return []


def _fold_items(plan: Plan, picked: list[tuple[Store, dict[str, Any]]]) -> tuple[Summary, PassRates]:
    """The merged run's summary and pass rates, folded from every conversation of the picked runs in item-index
    order, streamed from the shards side by side (a conversation at a time, however many shards: 50 shards of
    2,000 held whole took 650 MB); a conversation (by identity) in two runs is an error."""
    indexes = sorted(index for store, row in picked for (index,) in
                     store.conn.execute("SELECT item_index FROM items WHERE run_id = ?", (row["id"],)))
    aggregator, rates = Aggregator(plan, indexes), PassRates()
    owner: dict[str, str] = {}
    streams = [_named_items(store, row) for store, row in picked]
    for where, item in heapq.merge(*streams, key=lambda pair: pair[1].index):
        key = identity_of(item)
        if key in owner:
            raise UsageError(f"item {item.index} ({item.id}) is in both {owner[key]} and {where}",
                             "merge each shard once; shards of one '--shard I/N' split never overlap")
        owner[key] = where
        aggregator.add(item)
        rates.add(item)
    aggregator.flush()
    return aggregator.summary(), rates


def _named_items(store: Store, row: dict[str, Any]) -> Iterator[tuple[str, ItemResult]]:
    """One run's conversations, each with where it is from. (A generator expression written inline in ``_fold_items``
    read ``store`` and ``row`` when it ran, by then the last run's: a duplicate named the last shard twice.)"""
    where = f"run {row['id']} in {store.path}"
    return ((where, item) for item in store.load_items(row["id"]))


def _columns(conn: Any, table: str, schema: str = "main") -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def _scorer_rows(picked: list[tuple[Store, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """The registered scorers of all runs; one id configured two ways is an error."""
    rows: dict[str, tuple[str, str, str]] = {}
    for store, run in picked:
        for r in store.query("SELECT scorer_id, kind, spec FROM scorers WHERE run_id = ?", [run["id"]]):
            row = (r["scorer_id"], r["kind"], r["spec"])
            if rows.setdefault(row[0], row) != row:
                raise UsageError(f"scorer {row[0]} is configured differently in run {run['id']} ({store.path})",
                                 "merge only shards run with the same scorers.yaml")
    return list(rows.values())


def _write_merged(out: Store, run_id: str, picked: list[tuple[Store, dict[str, Any]]], options: dict[str, Any],
                  summary: Summary, code: int, repeats: dict[str, Any]) -> None:
    first = picked[0][1]
    commits = {row["git_commit"] for _, row in picked}
    conn = out.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT INTO runs (id, dataset, dataset_path, dataset_hash, target, started_at, status, options, "
                     "git_commit) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                     (run_id, first["dataset"], first.get("dataset_path"), first["dataset_hash"], first["target"],
                      min(row["started_at"] for _, row in picked), json.dumps(options),
                      commits.pop() if len(commits) == 1 else None))
        conn.executemany("INSERT INTO scorers (run_id, scorer_id, kind, spec) VALUES (?, ?, ?, ?)",
                         [(run_id, *row) for row in _scorer_rows(picked)])
        for table in COPIED_TABLES:
            for store, row in picked:
                _copy_rows(store, out, table, row["id"], run_id)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    out.finish_run(run_id, summary, "completed", code, completed=summary.total_items, repeats=repeats)


def _copy_rows(source: Store, out: Store, table: str, from_run: str, to_run: str) -> None:
    """Copy one run's rows of a table, under the new run id (row ids are new; item indexes are kept)."""
    wanted = set(_columns(source.conn, table))
    columns = [c for c in _columns(out.conn, table) if c != "id" and c in wanted]
    names = ", ".join(columns)
    rows = source.conn.execute(f"SELECT {names} FROM {table} WHERE run_id = ? ORDER BY id", (from_run,))
    position = columns.index("run_id")
    out.conn.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})",
                         [(*r[:position], to_run, *r[position + 1:]) for r in rows])


def repeats_rule(options: dict[str, Any]) -> str:
    """How a run decided its conversations' pass under repeats (its ``options``, ``_options``), as the flags that set
    it (``--repeat N``, ``--repeat auto:MAX``, ``--pass-rate P``; docs/verdicts.md#repeats-and-the-pass-rate)."""
    repeat = int(options.get("repeat") or 1)
    words = [f"--repeat auto:{repeat}" if options.get("sequential") else f"--repeat {repeat}"]
    return " ".join([*words, f"--pass-rate {float(options.get('pass_rate') or 1.0):g}"])


def _check_same_repeats(first_store: Store, first: dict[str, Any], store: Store, row: dict[str, Any]) -> None:
    """Shards played or passed by another repeats rule are not one run: a merged verdict would count its
    conversations two ways (docs/ci.md, merging shards)."""
    theirs, ours = repeats_rule(_options(row)), repeats_rule(_options(first))
    if theirs != ours:
        raise UsageError(f"run {row['id']} in {store.path} was run with {theirs}, but run {first['id']} in "
                         f"{first_store.path} with {ours}: their conversations were decided by different rules",
                         "run every shard with the same --repeat and --pass-rate, then merge them")


def _check_same_configuration(first_store: Store, first: dict[str, Any], store: Store, row: dict[str, Any]) -> None:
    """Shards of one split resolved the same configuration (their fingerprints share a salt: ``shards_salt``): a
    judge's model, a target option or a file the dataset reads that one shard's job resolved otherwise (a variable
    set per job) is refused, naming the paths, as ``--resume`` names them (docs/ci.md)."""
    mine = _options(first).get("config") or {}
    theirs = _options(row).get("config") or {}
    if not mine.get(SALT) or mine.get(SALT) != theirs.get(SALT):
        return  # unsharded runs, or shards stored before they shared a salt: nothing to compare
    changed = stored_differences(mine, theirs)
    if changed:
        shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
        raise UsageError(f"run {row['id']} in {store.path} resolved another configuration than run {first['id']} in "
                         f"{first_store.path}: {shown} differ, so the merged run would score its conversations two "
                         "ways", "run every shard with the same environment (the variables the dataset reads: a "
                         "judge's model, keys, files), then merge them")


def rules(options: dict[str, Any]) -> str:
    """What else a shard was run with (its ``options``, ``_options``) that the merged run takes from one of them: the
    conversations it selects (``--filter``, ``--limit``), the exit code its verdict gives (``--strict``,
    ``--max-errors``) and whether any tool ran live (``--hermetic``), as the flags that set them (docs/ci.md, merging
    shards)."""
    words = [f"--filter {options['filter']}"] if options.get("filter") else []
    words += [f"--limit {options['limit']}"] if options.get("limit") is not None else []
    words += ["--strict"] if options.get("strict") else []
    words += ["--hermetic"] if options.get("hermetic") else []
    return " ".join([*words, f"--max-errors {int(options.get('max_errors') or 0)}"])


def _check_same_rules(first_store: Store, first: dict[str, Any], store: Store, row: dict[str, Any]) -> None:
    """Shards that selected their conversations or decide the exit code by other rules are not one run: the merged
    run would take the first shard's, so its exit code would depend on the order the shards are named."""
    theirs, ours = rules(_options(row)), rules(_options(first))
    if theirs != ours:
        raise UsageError(f"run {row['id']} in {store.path} was run with {theirs}, but run {first['id']} in "
                         f"{first_store.path} with {ours}: the merged run cannot keep both",
                         "run every shard with the same --filter, --limit, --strict, --max-errors and --hermetic, then "
                         "merge them")


def merge_databases(sources: list[Path], out: Path, run_ids: list[str] | None = None) -> list[MergeResult]:
    """Combine the shard runs in ``sources`` into new completed runs in ``out``, one per dataset, each's aggregate
    recomputed: the runs ``run_ids`` names (one dataset's), else in every database the latest run of each dataset
    any of them holds (``evalcli run a.yaml b.yaml --shard I/N`` stores a run of each; ``_datasets``). Every dataset's
    runs are checked and folded before any is written (docs/ci.md, "Sharding and merging")."""
    if not sources:
        raise UsageError("name the databases to merge", "evalcli merge A.db B.db ... --out all.db")
    opened = [open_existing(path) for path in sources]
    # a database without any run is an empty shard's (it stores none): no loss, as the others' split tells (docs/ci.md)
    stores = [store for store in opened if store.conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone()] or opened[:1]
    try:
        groups = [_pick_runs(stores, run_ids)] if run_ids else [_pick_runs(stores, [], dataset)
                                                                 for dataset in _datasets(stores)]
        merged = {store.path for picked in groups for store, _ in picked}
        for store in stores:
            if store.path not in merged:
                raise UsageError(f"{store.path} holds no run of the datasets merged",
                                 "merge only the databases written by 'evalcli run --shard I/N'")
        folded = [(picked, _checked_and_folded(picked)) for picked in groups]
        target = Store(out)
        try:
            return [_written(target, picked, *made) for picked, made in folded]
        finally:
            target.close()
    finally:
        for store in opened:
            store.close()


def merged_exit_code(results: list[MergeResult]) -> int:
    """The one exit code of a merge of several datasets' runs, as a run of several datasets gives it."""
    return ExitCode.worst(result.exit_code for result in results)


def _datasets(stores: list[Store]) -> list[str]:
    """The datasets any of ``stores`` holds runs of, in the order they were first run (a dataset whose shard is empty
    in the first database has no run there: it is merged all the same), each by its file's name: two CI jobs check the
    repository out under two folders (GitLab's ``/builds/<runner>/...``), so one dataset file is stored under two
    absolute paths; where one database holds two files of one name, those are told by their whole paths."""
    first: dict[str, str] = {}
    for store in stores:
        rows = store.conn.execute("SELECT dataset, MIN(id) FROM runs GROUP BY dataset").fetchall()
        if not rows:
            raise UsageError(f"{store.path} holds no runs", "merge the databases written by 'evalcli run --shard I/N'")
        names = [_name(dataset) for dataset, _ in rows]
        for dataset, started in rows:
            key = dataset if names.count(_name(dataset)) > 1 else _name(dataset)
            first[key] = min(first.get(key, started), started)
    return sorted(first, key=first.__getitem__)


def _name(dataset: str) -> str:
    return dataset.replace("\\", "/").rsplit("/", 1)[-1]


def _dataset_key(dataset: str, key: str) -> str:
    """``dataset`` (a run's) as ``_datasets`` keyed it: by its whole path when ``key`` is one, else by its name."""
    return dataset if key == dataset else _name(dataset)


def _checked_and_folded(picked: list[tuple[Store, dict[str, Any]]]) -> tuple[list[str], Summary, int, dict[str, Any],
                                                                              dict[str, Any]]:
    """One dataset's shard runs checked (``_check_mergeable``) and folded: the warnings, the merged summary, exit
    code, options and ``--repeat`` figures."""
    warnings = _check_mergeable(picked)
    plan = picked[0][0].plan(picked[0][1]["id"])
    summary, rates = _fold_items(plan, picked)
    options = dict(_options(picked[0][1]))  # a copy: the merged run's own
    repeats = rates.to_json(int(options.get("repeat") or 1), bool(options.get("sequential")),
                            float(options.get("pass_rate") or 1.0))
    code = exit_code(summary, strict=bool(options.get("strict")), max_errors=int(options.get("max_errors") or 0))
    options.update(shard=None, merged_from=[{"db": s.path, "run_id": r["id"],
                                             "shard": _options(r).get("shard")}
                                            for s, r in picked], merged_at=now())
    return warnings, summary, code, options, repeats


def _written(target: Store, picked: list[tuple[Store, dict[str, Any]]], warnings: list[str], summary: Summary,
             code: int, options: dict[str, Any], repeats: dict[str, Any]) -> MergeResult:
    run_id = new_run_id()
    _write_merged(target, run_id, picked, options, summary, code, repeats)
    return MergeResult(run_id, str(target.path), [(s.path, r["id"]) for s, r in picked], summary, code, warnings,
                       repeats)
