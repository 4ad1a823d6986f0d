"""Several runs planned at once, as ``evalcli run`` plans them (docs/python-api.md): each dataset once per target,
every check made once before anything runs, the report files checked writable."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from ..dataset import Dataset, DatasetSource, load_datasets
from ..errors import StoreError, UsageError
from ..records import record
from ..run import RunOptions, RunPlan, check_options, llm_settings, plan_run
from ..run.arguments import check_datasets, check_store, check_targets, listed
from ..secrets import Redactor
from ..store import Store
from .outputs import Outputs, check_not_read, check_tapes


@record(frozen=True)
class Plans:
    """Runs planned together (``plan_runs``): one per dataset and target, in that order, with where their reports
    go and the database they are stored in."""

    runs: tuple[RunPlan, ...]
    outputs: Outputs
    db: Path | None = None
    """Where the runs are stored (``run_planned`` opens it; ``None``: only where a ``store`` is given)."""
    targets: tuple[str, ...] = ()
    """The ``--target``s each dataset runs against (none: each its own); with several, the runs are compared."""

    @cached_property
    def redactor(self) -> Redactor:
        """What never leaves evalcli: the environment's secrets and every dataset's own."""
        return Redactor(extra=set().union(*(plan.dataset.secret_values for plan in self.runs)))

    @property
    def history(self) -> bool:
        """Whether the runs continue (``--resume``) or re-run (``--rerun-failed``) a stored run."""
        return any(plan.options.resume or plan.options.rerun_failed for plan in self.runs)


def check_combination(datasets: int, targets: Sequence[str], options: RunOptions) -> None:
    """What several datasets and targets cannot be run with: continuing one run is one dataset and one target."""
    if options.resume and datasets != 1:
        raise UsageError("--resume continues one run: name exactly one dataset", "evalcli run DATASET --resume RUN_ID")
    if options.resume and options.rerun_failed:
        raise UsageError("--resume and --rerun-failed cannot be used together", "choose one")
    if len(targets) > 1 and (options.resume or options.rerun_failed):
        flag = "--resume" if options.resume else "--rerun-failed"
        raise UsageError(f"{flag} continues one run, of one target: give at most one --target",
                         f"evalcli run DATASET --target TARGET {flag} RUN_ID")
    if len(set(targets)) < len(targets):
        repeated = next(t for t in targets if list(targets).count(t) > 1)
        raise UsageError(f"--target {repeated} is given twice", "name each target once")


def plan_runs(datasets: Sequence[DatasetSource], options: RunOptions | None = None, *, targets: Sequence[str] = (),
              scorers: str | Path | None = None, db: str | Path | None = None, store: Store | None = None,
              given: Mapping[str, Any] | None = None, json: str | Path | None = None, junit: str | Path | None = None,
              markdown: str | Path | None = None, html: str | Path | None = None,
              step_summary: str | Path | None = None) -> Plans:
    """Plan every dataset once per target (``targets``: ``--target`` specs; none: each dataset's own), in that
    order, with ``options``; check the report paths (one per run, named apart) and the database ``db`` first, then
    load and validate every dataset, then plan each run (``plan_run``: a resume or re-run reads ``store``, else
    ``db``). A ``UsageError`` or ``DatasetError`` names every mistake before anything runs or is stored;
    selecting no conversation at all is one (``--filter``, ``--limit 0``)."""
    datasets, targets = listed(datasets), listed(targets)
    check_datasets(datasets)
    check_targets(targets)
    check_store(store)
    options = options or RunOptions()
    check_combination(len(datasets), targets, options)
    check_options(options)
    settings = llm_settings()
    database = Path(db) if db is not None else None
    labels: list[str | None] = [*targets] or [None]
    outputs = Outputs.plan([(_path(source), target) for source in datasets for target in labels],
                           json=_optional(json), junit=_optional(junit), markdown=_optional(markdown),
                           html=_optional(html), db=database, step_summary=_optional(step_summary))
    loaded = load_datasets(datasets, scorers, targets)
    check_not_read([(what, path) for what, chosen in outputs.named() for path in chosen if path is not None],
                   [(dataset.path, dataset.data_file) for dataset, _ in loaded], database)
    if options.record_tools is not None:  # each run's tape writable, and none the tape a dataset replays
        from ..tools import tape_path

        check_tapes([tape_path(options.record_tools, dataset.path, outputs.tapes[n])
                     for n, (dataset, _) in enumerate(loaded)],
                    [Path(tape) for dataset, _ in loaded for tape in dataset.replayed_tapes])
    history = store
    calibrated = any(spec.calibrated is not None for dataset, _ in loaded for spec in dataset.distinct_specs())
    if history is None and database is not None and (options.resume or options.rerun_failed or calibrated):
        # a resume or re-run reads the stored run, a calibrated gate its judge's calibrations; nothing is written here
        check_resumable(database, options)
        history = Store(database)
    try:
        runs = tuple(plan_run(dataset, replace(options, tape_name=outputs.tapes[n] or options.tape_name), history,
                              given=given, settings=settings, target=label) for n, (dataset, label) in enumerate(loaded))
    finally:
        if history is not None and history is not store:
            history.close()
    reasons = [plan.nothing for plan in runs if plan.nothing]
    if reasons and not any(plan.items for plan in runs):
        raise UsageError(reasons[0], "loosen --filter or --limit; nothing was run or stored")
    return Plans(runs, outputs, database, tuple(targets))


def check_resumable(database: Path, options: RunOptions) -> None:
    """A resume or a re-run reads a run stored in ``database``: one that does not exist is said so (a typo in
    ``--db``), and never created empty as a new run's would be (docs/reference/cli.md#notes)."""
    flag, run_id = ("--resume", options.resume) if options.resume else ("--rerun-failed", options.rerun_failed)
    if run_id and not database.is_file():
        raise StoreError(f"{flag} {run_id}: no database at {database}: it does not exist",
                         "pass --db PATH of the file the run is stored in (default: ./evalcli.db); "
                         "'evalcli runs --db PATH' lists its runs")


def _path(source: DatasetSource) -> Path:
    return Path(source.path) if isinstance(source, Dataset) else Path(source)


def _optional(value: str | Path | None) -> Path | None:
    return None if value is None else Path(os.fspath(value))
