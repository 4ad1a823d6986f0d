"""A person's labels on stored conversations (docs/view.md#human-review): written by ``evalcli view``, exported by
``evalcli labels export`` as the ``labels:`` a dataset item takes (docs/recorded.md#labels), read by
``evalcli calibrate --labels-from-db``.

A label belongs to a conversation's identity within its dataset (docs/identity.md), not to one run: labelled once,
it stays the label of that conversation in every later run of the dataset. Labels are appended; the newest one of an
identity and scorer is the label (``''``: the conversation as a whole).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import yaml

from ..dataset import Dataset
from ..errors import StoreError, UsageError
from ..identity import EXPLICIT, changed
from ..records import record
from ..secrets import REDACTED, Redactor
from .connection import connect, run
from .store import Store, now

CONVERSATION = ""
"""The ``scorer_id`` of a label on the whole conversation (pass/fail as a person sees it), not on one scorer."""
WRITE_WAIT_MS = 10_000
"""How long saving a label waits for a run that is writing the database."""


def label_value(raw: Any) -> float:
    """``pass`` is 1, ``fail`` 0, a number must lie in [0, 1] (the scale of every score)."""
    if raw in ("pass", True):
        return 1.0
    if raw in ("fail", False):
        return 0.0
    if isinstance(raw, (int, float)) and math.isfinite(raw) and 0 <= raw <= 1:
        return float(raw)
    raise UsageError(f"label {raw!r} is not pass, fail or a score from 0 to 1", "give pass, fail or e.g. 0.7")


def label_text(score: float) -> str | float:
    """How a label reads in YAML: ``pass``/``fail`` for 1/0, else the number."""
    return "pass" if score == 1 else "fail" if score == 0 else round(score, 4)


@record(frozen=True)
class NewLabel:
    """A label to store on conversation ``item_index`` of run ``run_id``."""

    run_id: str
    item_index: int
    scorer_id: str
    score: float
    note: str
    reviewer: str


class DatabaseBusy(StoreError):
    """A label not saved because another program held the database's write lock past ``WRITE_WAIT_MS``: nothing
    is wrong with the file; the view answers 503, try again (docs/view.md)."""


def add_label(path: str, label: NewLabel, redact: Redactor) -> dict[str, Any]:
    """Store ``label`` (its note redacted) in its own short transaction; returns the row as stored. A database that
    cannot be written (read-only) is a ``StoreError`` saying so, one locked too long a ``DatabaseBusy`` (docs/view.md)."""
    try:
        return _add_label(path, label, redact)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):  # writable, but another program (a run) holds the write lock
            raise DatabaseBusy(f"the label was not saved: {path} is busy (another program, such as an evalcli run, "
                               f"has been writing it for over {WRITE_WAIT_MS // 1000} s)",
                               "label it again in a moment") from None
        raise StoreError(f"the label was not saved: {path} cannot be written ({exc})",
                         "view a copy you can write, or make the file and its folder writable") from None


def _add_label(path: str, label: NewLabel, redact: Redactor) -> dict[str, Any]:
    conn = connect(path, timeout_ms=WRITE_WAIT_MS)
    try:
        found = conn.execute("SELECT items.item_id, items.identity, runs.dataset FROM items JOIN runs ON runs.id = "
                             "items.run_id WHERE items.run_id = ? AND items.item_index = ?",
                             (label.run_id, label.item_index)).fetchone()
        if found is None:
            raise StoreError(f"run {label.run_id} has no conversation {label.item_index}", "reload the page")
        item_id, identity, dataset = found
        row = {"run_id": label.run_id, "item_index": label.item_index, "item_id": item_id,
               "identity": identity or f"id:{item_id}", "dataset": dataset, "scorer_id": redact(label.scorer_id),
               "score": label.score, "note": redact(label.note) if label.note else None,
               "reviewer": redact(label.reviewer), "created_at": now()}
        columns = ", ".join(row)
        run(conn, [(f"INSERT INTO labels ({columns}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))])
        # into the file itself unless a reader still needs the older pages (then when the view stops: write_back)
        with contextlib.suppress(sqlite3.Error):  # saved already: a checkpoint that fails leaves it in the WAL
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return row
    finally:
        conn.close()


LATEST = ("SELECT * FROM labels WHERE id IN (SELECT MAX(id) FROM labels{where} GROUP BY dataset, identity, scorer_id) "
          "ORDER BY dataset, item_index, identity, scorer_id")


def latest_labels(store: Store, *, dataset: str | None = None, run_id: str | None = None,
                  identities: list[str] | None = None) -> list[dict[str, Any]]:
    """The label of each conversation and scorer (the newest), of one dataset, of the conversations of one run, or
    of some identities (each narrows when given)."""
    clauses, params = [], []
    if dataset is not None:
        clauses.append("dataset = ?")
        params.append(dataset)
    if run_id is not None:
        clauses.append("dataset = (SELECT dataset FROM runs WHERE id = ?)")
        params.append(run_id)
        if identities is None:
            clauses.append("identity IN (SELECT identity FROM items WHERE run_id = ?)")
            params.append(run_id)
    if identities is not None:
        clauses.append(f"identity IN ({', '.join('?' for _ in identities)})")
        params += identities
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return list(store.query(LATEST.format(where=where), params))


def labels_by_identity(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """identity -> scorer id (``''`` for the conversation) -> its label row."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row["identity"], {})[row["scorer_id"]] = row
    return found


LABELLED_CONTENT = ("SELECT labels.identity, labels.scorer_id, labels.score, items.content AS content FROM labels "
                    "LEFT JOIN items ON items.run_id = labels.run_id AND items.item_index = labels.item_index "
                    "WHERE labels.id IN (SELECT MAX(id) FROM labels WHERE dataset = ? GROUP BY identity, scorer_id)")


def dataset_labels(store: Store, dataset: str) -> dict[str, dict[str, tuple[float, str]]]:
    """identity -> {scorer id: (label, digest of the content labelled)} of a dataset (by its stable name),
    conversation-wide labels left out: what ``calibrate --labels-from-db`` adds to the dataset's own ``labels:``."""
    found: dict[str, dict[str, tuple[float, str]]] = {}
    for row in store.query(LABELLED_CONTENT, [dataset]):
        if row["scorer_id"] != CONVERSATION and row["score"] is not None:
            found.setdefault(row["identity"], {})[row["scorer_id"]] = (row["score"], row["content"] or "")
    return found


def export_labels(store: Store, *, dataset: str | None = None, run_id: str | None = None) -> str:
    """The labels as YAML: per dataset, per conversation its ``id``, ``identity``, ``labels: {SCORER_ID: pass|fail|
    score}`` (the form a dataset item takes), the conversation's own verdict (``review``) and the notes, reviewers
    and times."""
    rows = latest_labels(store, dataset=dataset, run_id=run_id)
    by_dataset: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        # an id holding a secret is stored as shown, ``u-[redacted]``, the same for ``u-${TENANT_A}`` and
        # ``u-${TENANT_B}``: exported as the dataset writes it, from its identity (docs/identity.md), so each names its item
        shown = row["item_id"]
        item_id = row["identity"][len(EXPLICIT):] if REDACTED in shown and row["identity"].startswith(EXPLICIT) else shown
        entry = by_dataset.setdefault(row["dataset"], {}).setdefault(row["identity"], {"id": item_id,
                                                                                       "identity": row["identity"]})
        value = label_text(row["score"])
        if row["scorer_id"] == CONVERSATION:
            entry["review"] = value
        else:
            entry.setdefault("labels", {})[row["scorer_id"]] = value
        who = f"{row['reviewer']} {row['created_at']}"
        entry.setdefault("by", {})[row["scorer_id"] or "conversation"] = who + (f": {row['note']}" if row["note"] else "")
    document = {"labels": [{"dataset": name, "conversations": list(entries.values())}
                           for name, entries in by_dataset.items()]}
    head = (f"# labels made in evalcli view, read from {store.path}. Copy a conversation's labels: into the dataset\n"
            "# item with that id, or let calibrate read them: evalcli calibrate DATASET --labels-from-db\n")
    return head + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)


def with_stored_labels(dataset: Dataset, store: Store, warn: Callable[[str], None] | None = None) -> Dataset:
    """The dataset with the labels stored for its conversations (by the dataset's stable name and each item's
    identity) added to its own ``labels:``, a stored label winning over the file's; labels of ids that are no longer
    a top-level gate or scorer of the dataset are left out, and so are labels of a conversation whose content changed
    since it was labelled (its id kept, its messages edited: the person judged other content, docs/identity.md)."""
    stored = dataset_labels(store, dataset.name or dataset.path)
    known = {spec.id for spec in [*dataset.gates, *dataset.scorers]}

    def still(item: Any, content: str) -> bool:
        return not changed(SimpleNamespace(content=item.content), SimpleNamespace(content=content))

    items = [replace(item, labels={**item.labels, **{k: score for k, (score, content) in stored.get(item.identity, {}).items()
                                                     if k in known and still(item, content)}})
             for item in dataset.items]
    stale = [f"{item.id} ({k})" for item in dataset.items for k, (_, content) in stored.get(item.identity, {}).items()
             if k in known and not still(item, content)]
    if stale and warn is not None:  # never silently fewer labels than the person made
        warn(f"{len(stale)} label{'s' if len(stale) > 1 else ''} stored for {dataset.path} left out: "
             f"{', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''} changed since labelled (the person judged "
             "other messages); label them again in evalcli view")
    return replace(dataset, items=items)
