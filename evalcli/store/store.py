"""SQLite storage through sqlite-utils: runs, items, turns, scores, scorers, LLM calls.

The schema lives in ``migrations.py`` and is applied whenever a store opens for writing. WAL mode
and a busy timeout let several processes write one file. During a run every write goes through a
``StoreWriter``: one thread with its own connection, fed by a queue, so a database locked by another
process never stalls the event loop (conversations, timeouts, Ctrl-C). Each finished conversation
is written whole in one transaction, so an interrupted run keeps everything that finished.

Reading (``evalcli runs``, ``show``, ``diff``, ``report``) never creates or changes a file: a
read-only database, or one in a read-only folder, is opened read-only (migrated in memory if it
is older than this version).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dataset import Dataset
from ..errors import ExitCode, StoreError
from ..identity import identity_of
from ..records import record
from ..results import ItemResult, Outcome, Plan, Summary, finite_or_none, outcomes_from_json
from ..secrets import Redactor
from . import migrations
from .connection import BUSY_TIMEOUT_MS, READ_BUSY_TIMEOUT_MS, Statement, connect, open_readonly, run
from .light import rows as _rows
from .light import stored_items, turn_from_json
from .row_texts import EMPTY, NO_OUTCOMES, RAW, Raw, Texts, dumps, item_outcomes, strings, turn_outcomes
from .writer import StoreWriter

if TYPE_CHECKING:
    import sqlite_utils

    from ..llm import ResponseCache


@record(frozen=True)
class StoredOptions:
    """What a run's row keeps of how it was asked to run (``runs.options``): its plan, selection and exit rules."""

    plan: Plan
    filter: str | None = None
    shard: tuple[int, int] | None = None
    limit: int | None = None
    strict: bool = False
    max_errors: int = 0
    repeat: int = 1
    only_indexes: list[int] | None = None
    """The item indexes of a ``--rerun-failed`` run."""
    config: dict[str, str] | None = None
    """The dataset's configuration when the run began (``Dataset.configuration``: digests of the target, its
    options, every gate and scorer); ``None`` for runs stored before evalcli kept it."""
    sequential: bool = False
    """``--repeat auto``: ``repeat`` is the most plays, and the sequential rule decided how many each needed."""
    pass_rate: float = 1.0
    """``--pass-rate``: the share of plays that must pass a gate under repeats."""
    shards_held: list[int] | None = None
    """A ``--shard I/N`` run's: the shards (1..N) that hold a conversation of the selection, so ``merge`` tells a
    missing shard from an empty one (docs/ci.md); ``None`` unsharded, or stored before evalcli kept it."""
    filter_written: str | None = None
    """A ``--filter`` that holds a secret, with each secret known by its variable as ``${NAME}``
    (``secret_references.stored``): ``filter`` is redacted, and a resume selects with this one, its values put back
    (``run.resume.stored_filter``); ``None`` when ``filter`` holds none."""
    hermetic: bool = False
    """``--hermetic``: a resume restores it, so the conversations it plays run no tool live either (docs/hermetic.md);
    ``False`` for runs stored before evalcli kept it."""
    record_tools: str | None = None
    """``--record-tools DIR`` as an absolute path: a resume given none records there too, so the tape is what one
    uninterrupted run would have recorded (docs/hermetic.md, "Tapes"); ``None`` for runs stored before evalcli kept it."""
    tape_name: str | None = None
    """The name the command gave the run's tape in ``record_tools`` (``None``: its dataset's stem)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["plan"] = self.plan.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredOptions:
        shard = data.get("shard")
        return cls(Plan.from_json(data["plan"]), data.get("filter"), (int(shard[0]), int(shard[1])) if shard else None,
                   data.get("limit"), bool(data.get("strict")), int(data.get("max_errors") or 0),
                   int(data.get("repeat") or 1), list(data["only_indexes"]) if data.get("only_indexes") else None,
                   dict(data["config"]) if isinstance(data.get("config"), dict) else None,
                   bool(data.get("sequential")), float(data.get("pass_rate") or 1.0),
                   [int(n) for n in data["shards_held"]] if isinstance(data.get("shards_held"), list) else None,
                   data["filter_written"] if isinstance(data.get("filter_written"), str) else None,
                   bool(data.get("hermetic")),
                   data["record_tools"] if isinstance(data.get("record_tools"), str) else None,
                   data["tape_name"] if isinstance(data.get("tape_name"), str) else None)


def now() -> str:
    """The time as stored (``datetime.now(UTC).isoformat(timespec="milliseconds")``): each second's text made once
    and the milliseconds written into it (a stamp per stored conversation: docs/performance.md)."""
    second, within = divmod(time.time_ns() // 1_000_000, 1000)
    last = _SECOND[0]  # one (second, text) pair, read once: the writer thread and the event loop both stamp rows
    if last[0] != second:
        last = _SECOND[0] = (second, datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")[:-6])
    return f"{last[1]}.{within:03d}+00:00"


_SECOND: list[tuple[int | None, str]] = [(None, "")]
"""The last second ``now`` wrote, and its text up to the seconds."""


def _scores(outcomes: dict[str, Outcome]) -> dict[str, float | None]:
    return {key: finite_or_none(outcome.score) for key, outcome in outcomes.items()}


def git_commit(folder: Path) -> str | None:
    """The current git commit of the folder holding the dataset, if it is in a repository."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


class Store:
    """One SQLite file of runs. Open it, write runs as they happen (through a ``StoreWriter``), read them back."""

    def __init__(self, path: str | Path, redactor: Redactor | None = None, *, readonly: bool = False) -> None:
        self.path = str(path)
        self.readonly = readonly
        try:
            if readonly:
                conn = open_readonly(self.path)
            else:
                conn = connect(self.path)
                migrations.apply(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}",
                             "check --db PATH points at an evalcli SQLite file (or a new path)") from None
        self.conn = conn
        self._db: sqlite_utils.Database | None = None
        self.redact = redactor or Redactor()
        self._fresh: dict[str, set[int]] = {}
        """Runs begun (not resumed) by this store, with the item indexes written so far: nothing to replace."""

    @classmethod
    def existing(cls, path: str | Path, redactor: Redactor | None = None, *, write: bool = False) -> Store:
        """Open a database that must already exist (history never creates an empty file); read-only unless
        ``write``, and read-only anyway when the file or its folder cannot be written."""
        file = Path(path)
        if not file.is_file():
            raise StoreError(f"no database at {path}: it does not exist",
                             "pass --db PATH of a file written by 'evalcli run' (default: ./evalcli.db)")
        writable = os.access(file, os.W_OK) and os.access(file.parent, os.W_OK)
        if write and not writable:
            raise StoreError(f"database {path} is read-only", "check the file's and its folder's permissions")
        return cls(path, redactor, readonly=not (write and writable))

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the file, imported on first use (without numpy: ``migrations.sqlite_utils_module``)."""
        if self._db is None:
            self._db = migrations.sqlite_utils_module().Database(self.conn)
        return self._db

    def query(self, sql: str, params: Any = ()) -> Iterator[dict[str, Any]]:
        """Rows as dicts, like sqlite-utils' ``Database.query`` (which history, diff and reports use through
        ``db``), without importing sqlite-utils on the path of a run."""
        return _rows(self.conn, sql, params)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def protect(self, secrets: set[str]) -> None:
        """Also redact these values (a dataset's interpolated secrets) in everything this store writes from now on:
        a store opened without them (``Store(path)`` in a library caller's code) still never stores them."""
        self.redact = self.redact.including(secrets)

    def writer(self) -> StoreWriter:
        """A writer thread for a run, with its own connection to this file."""
        if self.readonly:
            raise StoreError(f"database {self.path} is open read-only", "run with a --db you can write")
        return StoreWriter(self.path)

    def response_cache(self, writer: StoreWriter | None = None) -> ResponseCache:
        """The response cache of this database, on a connection of its own. With the run's ``writer`` its reads
        wait only briefly for a lock (then count as a miss) and its changes go through the writer."""
        wait = READ_BUSY_TIMEOUT_MS if writer is not None else BUSY_TIMEOUT_MS
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=wait / 1000)
        conn.execute(f"PRAGMA busy_timeout = {wait}")
        if self.path != ":memory:" and not self.readonly:
            conn.execute("PRAGMA journal_mode = WAL")
        from ..llm import ResponseCache  # a run that calls no model never imports it (docs/performance.md)

        return ResponseCache(conn, writer)

    def _clean(self, statements: list[Statement], *keep: str | None, texts: Texts | None = None) -> list[Statement]:
        """Every text parameter of ``statements`` redacted (docs/secrets.md: no secret in any table, whichever column a
        value reaches: ids, tags, paths, the target, options, models), values already redacted unchanged. The ids
        evalcli made (``keep``: the run id, a thread id) are keys, never secrets, and stay as they are; so do the JSON
        texts ``texts`` made (each was redacted as it was serialised: one redaction pass per value)."""
        redact = self.redact
        if not redact.holds_any(strings(statements)):
            return statements  # nothing to redact: each text would be left as it is
        done = {k: k for k in keep if k}
        """Each text redacted so far, by its value: a conversation's ids, status and scorer ids recur in many rows."""
        made = texts.made if texts is not None else {}

        def cell(value: str) -> str:
            clean = done[value] = redact(value)
            return clean

        def row(params: Any) -> Any:
            # a list, not a generator, inside tuple(): this runs for every column of every row written
            return tuple([p if not isinstance(p, str) or id(p) in made else done.get(p) or cell(p) for p in params])

        return [(sql, [row(p) for p in params] if isinstance(params, list) and (not params or
                 isinstance(params[0], (tuple, list))) else row(params)) for sql, params in statements]

    def _text(self, value: Any) -> str:
        """Secrets redacted from the values, then serialised (a secret holding quotes or backslashes is
        found in the value, not in its escaped JSON text)."""
        return self.redact.dumps(value, ensure_ascii=False, default=str)

    # -- writing a run (these build statements; a StoreWriter runs them) ---------------------------

    def begin_statements(self, run_id: str, dataset: Dataset, options: StoredOptions,
                         selected: int | None = None) -> list[Statement]:
        """Record a new run (status ``running``) with its registered scorers and how many conversations it selected
        (``runs.selected``: what ``evalcli view`` says a run in progress has to play, docs/view.md)."""
        registered = {s.id: s for s in dataset.all_specs() if s.registered}
        self._fresh[run_id] = set()
        return self._clean([
            ("INSERT INTO runs (id, dataset, dataset_path, dataset_hash, target, started_at, status, options, "
             "git_commit, selected) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
             (run_id, dataset.name or dataset.path, dataset.path, dataset.hash, dataset.target_spec, now(),
              dumps(options.to_json()), git_commit(Path(dataset.path).resolve().parent), selected)),
            ("INSERT INTO scorers (run_id, scorer_id, kind, spec) VALUES (?, ?, ?, ?)",
             [(run_id, s.id, s.kind, self._text(s.spec())) for s in registered.values()]),
        ], run_id)

    def resume_statements(self, run_id: str, selected: int | None = None) -> list[Statement]:
        if self.run(run_id) is None:
            raise StoreError(f"no run {run_id} in {self.path}", "see 'evalcli runs' for the ids")
        return [("UPDATE runs SET status = 'running', finished_at = NULL, selected = COALESCE(?, selected) "
                 "WHERE id = ?", (selected, run_id))]

    def item_statements(self, run_id: str, result: ItemResult, registered: set[str]) -> list[Statement]:
        """One finished conversation: its item row, turns, registered scores and LLM calls.

        The hot write path is plain ``executemany`` rather than sqlite-utils' ``insert_all``: writing a
        conversation's three turn rows measured 10 us against 118 us (3,000 conversations in one transaction,
        WAL, Python 3.11), which is most of the 0.15 ms per-turn overhead budget. Reads and migrations use
        sqlite-utils.

        The rows are built once as they are, and every text they bind is searched for a secret in one scan
        (``Redactor.holds_any``): a conversation that holds none (the common case) is written as built, exactly what
        redacting each text would have left. One that holds a secret is built again with each JSON value redacted
        before it is serialised and each other text redacted (``_clean``): docs/secrets.md."""
        written = self._fresh.get(run_id)
        replaces = written is None or result.index in written
        if written is not None:
            written.add(result.index)
        stamp = now()
        statements = self._item_rows(run_id, result, registered, stamp, replaces, RAW)
        if not self.redact.holds_any(strings(statements)):
            return statements
        text = Texts(self.redact)
        return self._clean(self._item_rows(run_id, result, registered, stamp, replaces, text), run_id,
                           result.thread_id, texts=text)

    def _item_rows(self, run_id: str, result: ItemResult, registered: set[str], stamp: str, replaces: bool,
                   text: Texts | Raw) -> list[Statement]:
        """``item_statements``' rows, each JSON value serialised by ``text`` and each other user text passed through
        ``text.plain`` (as they are, or redacted)."""
        key = (run_id, result.index)
        statements: list[Statement] = [
            # a resumed or re-run conversation replaces its earlier rows (a new run has none to replace); its earlier
            # attempt's LLM calls stay: they were made, and count in the run's totals and budget (docs/reliability.md)
            ("DELETE FROM scores WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM turns WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM plays WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM items WHERE run_id = ? AND item_index = ?", key),
        ] if replaces else []
        redact = text.plain
        index, item_id, thread_id, resource_id = result.index, result.id, result.thread_id, result.resource_id
        statements.append((
            "INSERT INTO items (run_id, item_index, item_id, tags, form, status, passed, error, traceback, thread_id, "
            "resource_id, input, gate_scores, scores, outcomes, stop_reason, duration_ms, finished_at, metadata, "
            "repeats, gate_plays, identity, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)",
            (run_id, result.index, result.id, dumps(result.tags) if result.tags else "[]", result.form, result.status,
             int(result.passed),
             redact(result.error) if result.error else None, redact(result.traceback) if result.traceback else None,
             result.thread_id, result.resource_id, redact(result.turns[0].input) if result.turns else None,
             text(_scores(result.gate_scores)), text(_scores(result.scores)), text(item_outcomes(result)),
             result.stop_reason, result.duration_ms, stamp, text(result.metadata) if result.metadata else None,
             result.repeats, dumps({g: [result.gate_passes.get(g, 0), n] for g, n in result.gate_plays.items()})
             if result.repeated else None, identity_of(result), result.content)))
        statements.append((
            "INSERT INTO turns (run_id, item_index, item_id, turn_index, input, output, simulated, thread_id, "
            "resource_id, duration_ms, passed, gate_scores, scores, outcomes, structured, interrupt, resume, "
            "output_retries) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, index, item_id, t.index, redact(t.input),
              text.output(t), int(t.simulated), thread_id,
              resource_id, t.duration_ms, int(not t.gate_scores or t.passed),
              text(_scores(t.gate_scores)) if t.gate_scores else EMPTY, text(_scores(t.scores)) if t.scores else EMPTY,
              text(turn_outcomes(t)) if t.gate_scores or t.scores or t.guardrail else NO_OUTCOMES,
              None if t.structured is None else text(t.structured),
              None if t.interrupt is None else text(t.interrupt.value),
              None if t.resume is None else text(t.resume), t.output_retries)
             for t in result.turns]))
        statements.append((
            "INSERT INTO plays (run_id, item_index, play, status, passed, error, outcomes, turns, duration_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, result.index, p.play, p.status, int(p.passed), redact(p.error) if p.error else None,
              text(p.outcomes()), text.turns(p.turns), p.duration_ms)
             for p in result.plays]))
        rows: list[tuple[Any, ...]] = []
        if result.status == "ok":
            levels = [(None, result.gate_scores, result.scores), *((t.index, t.gate_scores, t.scores)
                                                                  for t in result.turns)]
            for turn_index, gates, scores in levels:
                for role, outcomes in (("gate", gates), ("scorer", scores)):
                    for scorer_id, outcome in outcomes.items():
                        if scorer_id in registered and not outcome.not_scorable and outcome.score is not None:
                            samples = (text([s.to_json() for s in outcome.samples]) if outcome.samples
                                       else None)
                            rows.append((run_id, result.index, result.id, turn_index, result.thread_id, scorer_id,
                                         role, outcome.score, redact(outcome.reason) if outcome.reason else None,
                                         outcome.agreement_text, samples, stamp))
        statements.append(("INSERT INTO scores (run_id, item_index, item_id, turn_index, thread_id, scorer_id, role, "
                           "score, reason, agreement, samples, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           rows))
        statements.append((
            "INSERT INTO llm_calls (run_id, item_index, turn_index, purpose, model, prompt_tokens, completion_tokens, "
            "cost, cache_hit, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, result.index, r.turn_index, r.purpose, r.model, r.prompt_tokens, r.completion_tokens, r.cost,
              int(r.cache_hit), r.duration_ms, stamp) for r in result.usage]))
        return [s for s in statements if not (isinstance(s[1], list) and not s[1])]

    def finish_statements(self, run_id: str, summary: Summary, status: str, exit_code: int,
                          completed: int, repeats: dict[str, Any] | None = None,
                          selected: int | None = None) -> list[Statement]:
        """The run's verdict, aggregate and totals; totals of LLM use are summed from its stored calls. ``repeats``:
        what the JSON of a ``--repeat`` run adds (``repeat``, ``pass_at_k``, ``pass_all_k``), kept with the
        aggregate so ``show RUN --json`` writes what ``run --json`` did; so is ``selected``, the conversations the
        run selected (``completed`` of them were played)."""
        data = {**summary.to_json(), **(repeats or {})}
        if selected is not None:
            data["selected"] = selected
        if summary.unscored_gates:  # kept for what reads the run back (pytest's ::verdict), not in its JSON
            data["unscored_gates"] = summary.unscored_gates
        return self._clean([(
            "UPDATE runs SET finished_at = ?, status = ?, verdict = ?, exit_code = ?, total_items = ?, "
            "completed_items = ?, errors = ?, scores = ?, summary = ?, result = ?, "
            "llm_calls = (SELECT COUNT(*) FROM llm_calls WHERE run_id = runs.id), "
            "cache_hits = (SELECT COALESCE(SUM(cache_hit), 0) FROM llm_calls WHERE run_id = runs.id), "
            "prompt_tokens = (SELECT COALESCE(SUM(prompt_tokens), 0) FROM llm_calls WHERE run_id = runs.id), "
            "completion_tokens = (SELECT COALESCE(SUM(completion_tokens), 0) FROM llm_calls WHERE run_id = runs.id), "
            "cost = (SELECT COALESCE(SUM(cost), 0) FROM llm_calls WHERE run_id = runs.id) WHERE id = ?",
            (now(), status, summary.verdict, exit_code, summary.total_items, completed, summary.errors,
             dumps(data["scores"]), dumps(data["summary"]), self._text(data), run_id))], run_id)

    CALIBRATION_COLUMNS = ("scorer_id", "kind", "spec", "model", "prompt_version", "labels", "compared", "agreed",
                           "errors", "not_scorable", "accuracy", "kappa", "mae", "fleiss_kappa", "metrics", "created_at")

    def calibration_statements(self, run_id: str, dataset: str, rows: list[dict[str, Any]]) -> list[Statement]:
        """What ``evalcli calibrate`` measured, one row per scorer (``CALIBRATION_COLUMNS``; ``spec`` and ``metrics``
        are JSON, secrets redacted)."""
        columns = ("run_id", "dataset", *self.CALIBRATION_COLUMNS)
        values = [(run_id, dataset, *(self._text(row[c]) if c in ("spec", "metrics") else row[c]
                                      for c in self.CALIBRATION_COLUMNS)) for row in rows]
        return self._clean([(f"INSERT INTO calibrations ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                             values)], run_id)

    def calibrations(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Stored calibrations, newest first (of one dataset, by its stable name, when given)."""
        where, params = ("WHERE dataset = ?", [dataset]) if dataset else ("", [])
        return list(self.query(f"SELECT * FROM calibrations {where} ORDER BY id DESC", params))

    def execute(self, statements: list[Statement], conn: sqlite3.Connection | None = None) -> None:
        """Run statements in one immediate transaction (taken at once, so writers queue instead of deadlocking)."""
        run(conn or self.conn, statements)

    def finish_run(self, run_id: str, summary: Summary, status: str, exit_code: int, completed: int,
                   repeats: dict[str, Any] | None = None) -> None:
        """Write a run's end directly (for ``merge``, which writes no conversations of its own)."""
        self.execute(self.finish_statements(run_id, summary, status, exit_code, completed, repeats))

    def mark_interrupted(self, run_id: str) -> None:
        """An interrupt that came after the conversations (while the run was being finished or reported): the run
        is marked ``interrupted`` (``ExitCode.INTERRUPTED``), keeping everything it stored."""
        self.execute([("UPDATE runs SET status = 'interrupted', exit_code = ?, finished_at = COALESCE(finished_at, ?) "
                       "WHERE id = ?", (int(ExitCode.INTERRUPTED), now(), run_id))])

    # -- reading ---------------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = list(self.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return rows[0] if rows else None

    def require_run(self, run_id: str) -> dict[str, Any]:
        """A run by id, unique id prefix, or ``latest``; an ambiguous prefix names its matches."""
        if run_id == "latest":
            latest = self.runs(1)
            if not latest:
                raise StoreError(f"no runs in {self.path} yet", "run 'evalcli run DATASET' first")
            return latest[0]
        row = self.run(run_id)
        if row is not None:
            return row
        # a prefix is matched as text: '%' and '_' in it are characters, never LIKE patterns
        escaped = run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        matches = [r["id"] for r in self.query("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 6",
                                               [f"{escaped}%"])] if run_id else []
        if len(matches) == 1:
            return self.require_run(matches[0])
        if matches:
            shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
            raise StoreError(f"run id '{run_id}' is ambiguous: matches {shown}", "type more characters of the id")
        raise StoreError(f"no run '{run_id}' in {self.path}", "list runs with 'evalcli runs --db PATH'")

    def runs(self, limit: int = 20, dataset: str | None = None) -> list[dict[str, Any]]:
        """The newest runs first (of one dataset, by its stable name, when given)."""
        where, params = ("dataset = ?", [dataset]) if dataset else (None, [])
        return list(self.db.table("runs").rows_where(where, params, order_by="id desc", limit=limit))

    def listing(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest runs first, as ``evalcli runs`` lists them: the ``runs`` row without its options and result
        (a run of 100,000 conversations keeps megabytes there), with its ``shard`` and how many runs were
        ``merged`` into it read from the options by SQLite."""
        columns = [row[1] for row in self.conn.execute("PRAGMA table_info(runs)") if row[1] not in ("options", "result")]
        return list(self.query(f"SELECT {', '.join(columns)}, json_extract(options, '$.shard') AS shard, "
                          "json_array_length(options, '$.merged_from') AS merged FROM runs ORDER BY id DESC LIMIT ?",
                          [limit]))

    def load_items(self, run_id: str, *, errors_only: bool = False, light: bool = False) -> Iterator[ItemResult]:
        """The stored conversations of a run (only those that errored or were limited, with ``errors_only``), in
        dataset order, with their turns and outcomes.

        Streamed: items and turns are read side by side (both ordered by item index), so reading back
        a large run holds one conversation at a time, never the whole run.
        """
        return stored_items(self.conn, run_id, errors_only=errors_only, light=light)

    def load_plays(self, run_id: str, item: ItemResult) -> list[ItemResult]:
        """Every stored play of a conversation of a ``--repeat`` run, in play order (``[]`` when it was played once,
        or stored before evalcli kept its plays): ``item`` with each play's own status, turns and outcomes."""
        rows = self.query("SELECT * FROM plays WHERE run_id = ? AND item_index = ? ORDER BY play", [run_id, item.index])
        plays = []
        for row in rows:
            gates, scores, thresholds = outcomes_from_json(json.loads(row["outcomes"] or "{}"))
            turns = [turn_from_json(t) for t in json.loads(row["turns"] or "[]")]
            plays.append(replace(item, status=row["status"], error=row["error"], turns=turns, gate_scores=gates,
                                 scores=scores, thresholds=thresholds, duration_ms=row["duration_ms"] or 0.0,
                                 repeats=1, gate_passes={}, gate_plays={}, plays_passed=None, plays=[],
                                 play=row["play"], traceback=None))
        return plays

    def options(self, run_id: str) -> StoredOptions:
        """How a stored run was asked to run (its plan, selection and exit rules)."""
        return StoredOptions.from_json(json.loads(self.require_run(run_id)["options"] or "{}"))

    def plan(self, run_id: str) -> Plan:
        return self.options(run_id).plan
