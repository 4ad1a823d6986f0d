"""Playing a dataset under pytest, and what each of its items reports.

A dataset's selected conversations are played once, together, at the dataset's concurrency, on the session's
event loop, and stored as an ordinary run (``evalcli show RUN ITEM`` opens any of them). Under pytest-xdist the
workers agree through a lock file which one plays a dataset: with ``--dist loadfile`` a dataset's items all go to
one worker anyway; with ``--dist load`` the first worker to reach the dataset plays it and the others read the
stored run. What the items show is read back from the store, so it is redacted like everything else evalcli keeps.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..aggregate import unscored_warning
from ..dataset import Dataset, Item
from ..dbname import db_option
from ..evaluate import plan_runs, run_planned
from ..identity import given_name
from ..records import record
from ..reports import (
    conversation_text,
    fmt,
    missed_gates,
    one_line,
    per_dataset,
    plural,
    threshold_text,
    verdict_text,
    verdict_words,
)
from ..results import ItemResult, RunResult
from ..run import RunOptions
from ..secrets import Redactor
from ..store import Store, load_run
from ..words import shell_word
from .session import DatasetSession, EvalFailed
from .settings import RunLine, Settings


@record
class Played:
    """A dataset's stored run and its conversations, by item index."""

    run: RunResult
    items: dict[int, ItemResult]
    settings: Settings
    width: int

    def conversation_outcome(self, conversation: Item) -> None:
        """Fail (with the missed gates, the transcript and the ``show`` command) or skip, as the conversation did."""
        result = self.items.get(conversation.index)
        if result is None:
            raise EvalFailed(f"conversation {conversation.id} was not played in run {self.run.run_id}")
        if not result.passed:
            raise self._conversation_failure(result)
        gates = [*result.gate_scores.values(), *(o for turn in result.turns for o in turn.gate_scores.values())]
        if gates and all(outcome.not_scorable for outcome in gates):
            reasons = "; ".join(dict.fromkeys(o.reason for o in gates if o.reason))
            pytest.skip(f"no gate was scorable on conversation {result.id}" + (f": {reasons}" if reasons else ""))

    def verdict_outcome(self) -> None:
        """Fail on a ``failed`` verdict, and on ``scored`` with ``--evalcli-strict``."""
        summary = self.run.summary
        if summary.verdict == "failed":
            why = "a gate's mean over the conversations is below 1"
        elif summary.verdict == "scored" and self.settings.strict:
            why = "a scorer's mean missed its threshold (--evalcli-strict)"
        elif summary.unscored_gates and self.settings.strict:
            why = f"{unscored_warning(summary)} (--evalcli-strict)"
        else:
            return
        missed = [f"gate {g.id} {fmt(g.score)}" for g in summary.gate_results if not g.passed]
        missed += [f"gate {g} never scorable" for g in summary.unscored_gates]
        missed += [f"{t.id} {fmt(t.average_score)} ({threshold_text(t.threshold)})"
                   for t in summary.threshold_results if not t.passed]
        for turn in summary.turn_results:
            missed += [f"turn {turn.index} gate {g.id} {fmt(g.score)}" for g in turn.gate_results if not g.passed]
            missed += [f"turn {turn.index} {t.id} {fmt(t.average_score)} ({threshold_text(t.threshold)})"
                       for t in turn.threshold_results if not t.passed]
        text = verdict_text(self.run, self.items.values(), self.settings.shown_db, self.width)
        words = verdict_words(self.run)
        raise EvalFailed(f"verdict {words} for {self.run.dataset_path}: {why}\n\n{text}",
                         f"verdict {words}: " + ", ".join(missed))

    def _conversation_failure(self, result: ItemResult) -> EvalFailed:
        if result.status == "limited":  # a limit or a budget stopped it: its error says which (docs/budgets.md)
            head = message = f"conversation {result.id}: {one_line(result.error or 'limited')}"
        elif result.status != "ok":
            head = message = f"conversation {result.id} errored: {one_line(result.error or 'unknown error')}"
        else:
            missed = missed_gates(result)
            if len(missed) == 1:
                head = f"conversation {result.id}: {missed[0]}"
            else:
                head = f"conversation {result.id} missed {len(missed)} gates:\n" + "\n".join(f"  {m}" for m in missed)
            message = f"conversation {result.id}: {one_line(missed[0])}" + (
                f" (and {plural(len(missed) - 1, 'more gate')})" if len(missed) > 1 else "")
        show = f"evalcli show {self.run.run_id} {shell_word(given_name(result))}{db_option(self.settings.shown_db)}"
        return EvalFailed(f"{head}\n\n{conversation_text(self.run, result, self.width)}\n\n{show}", message)


def play(plugin: DatasetSession, file: pytest.File, dataset: Dataset, indexes: set[int] | None) -> Played:
    """Play the dataset's conversations (``indexes``, or all of them) once, or read the run another worker played."""
    with _turn(plugin.lock_folder(), file.nodeid) as marker:
        if marker is not None and marker.is_file():
            return _read(plugin.settings, marker.read_text(encoding="utf-8").strip())
        played, warnings = _play(plugin, file, dataset, indexes)
        if marker is not None:
            marker.write_text(played.run.run_id, encoding="utf-8")
    items = played.items.values()
    plugin.runs.append(RunLine(dataset.path, played.run.run_id, verdict_words(played.run), len(played.items),
                               sum(1 for i in items if i.status == "ok" and not i.passed),
                               sum(1 for i in items if i.status not in ("ok", "limited")), played.run.status,
                               plugin.settings.shown_db, warnings, sum(1 for i in items if i.status == "limited")))
    return played


def _play(plugin: DatasetSession, file: pytest.File, dataset: Dataset,
          indexes: set[int] | None) -> tuple[Played, list[str]]:
    settings = plugin.settings
    html = None
    if settings.html is not None:
        html = per_dataset(settings.html, plugin.datasets)[plugin.datasets.index(Path(os.path.abspath(file.path)))]
        html.parent.mkdir(parents=True, exist_ok=True)  # --evalcli-html makes the folders it names
    with Store(settings.db, Redactor(extra=dataset.secret_values)) as store:
        options = RunOptions(use_cache=settings.use_cache, strict=settings.strict, only_indexes=indexes,
                             keep_items=False, handle_signals=True)
        # planned and made as evalcli run makes its runs: the same checks, and the HTML report written the same way
        plans = plan_runs([dataset], options, store=store, html=html)
        result = run_planned(plans, store=store, loop=plugin.loop()).results[0]
        if result.status == "interrupted":
            raise KeyboardInterrupt(f"run {result.run_id} of {dataset.path} is stored as interrupted after "
                                    f"{result.completed} of {plural(result.selected, 'conversation')}; "
                                    f"evalcli run {shlex.quote(dataset.path)} --resume {result.run_id}"
                                    f"{db_option(settings.shown_db)} continues it")
        return _from_store(store, result.run_id, settings), result.warnings


def _read(settings: Settings, run_id: str) -> Played:
    """The run another pytest-xdist worker played and stored."""
    with Store(settings.db) as store:
        return _from_store(store, run_id, settings)


def _from_store(store: Store, run_id: str, settings: Settings) -> Played:
    run = load_run(store, run_id).result
    items = {item.index: item for item in store.load_items(run_id)}
    return Played(run, items, settings, shutil.get_terminal_size((120, 24)).columns)


@contextlib.contextmanager
def _turn(folder: Path | None, key: str) -> Iterator[Path | None]:
    """Under pytest-xdist, hold this dataset's lock and yield the file that names its run once one worker played
    it; otherwise (one process) nothing to agree on: ``None``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no POSIX locks (Windows): each worker plays what it was given
        folder = None
    if folder is None:
        yield None
        return
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    with open(folder / f"{name}.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield folder / f"{name}.run"
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
