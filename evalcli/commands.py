"""What each CLI command does, as plain functions over the library (the CLI only parses and prints)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .ci_report import junit_document, junit_suite, markdown_summary
from .dataset import Dataset, load_dataset
from .errors import DatasetError, EvalcliError, UsageError
from .report import render_run, write_json
from .result import ItemResult, RunResult
from .runner import INTERRUPTED, Events, RunOptions, run_evals
from .scorers.checks import CHECKS
from .scorers.registry import find_registry, load_registry
from .secrets import Redactor
from .select import Selection, check_filter, parse_shard
from .store import Store


@dataclass
class RunRequest:
    """Everything ``evalcli run`` was asked to do."""

    datasets: list[Path]
    db: Path
    scorers: Path | None = None
    json_out: str | None = None
    junit: Path | None = None
    markdown: Path | None = None
    concurrency: int | None = None
    judge_concurrency: int = 8
    use_cache: bool = True
    strict: bool = False
    max_errors: int = 0
    filter: str | None = None
    limit: int | None = None
    shard: str | None = None
    repeat: int = 1
    turn_timeout: float | None = None
    resume: str | None = None
    rerun_failed: str | None = None
    quiet: bool = False
    verbose: bool = False


def load_all(paths: list[Path], scorers: Path | None) -> list[Dataset]:
    """Validate every dataset before running any; all problems of all files in one error."""
    datasets, problems = [], []
    for path in paths:
        try:
            datasets.append(load_dataset(path, str(scorers) if scorers else None))
        except DatasetError as exc:
            problems.extend(exc.problems)
    if problems:
        raise DatasetError(problems)
    return datasets


def combine_exit_codes(codes: list[int]) -> int:
    """One exit code for several runs: 130, then 2, 1, 4, 3, 0 (the worst wins)."""
    for code in (INTERRUPTED, 2, 1, 4, 3):
        if code in codes:
            return code
    return 0


def failed_item_ids(store: Store, run_id: str) -> set[str]:
    """Items of a stored run that errored or missed a gate (top level or on any turn)."""
    store.require_run(run_id)
    return {item.id for item in store.load_items(run_id) if not item.passed}


def _options(request: RunRequest, store: Store, dataset: Dataset) -> RunOptions:
    check_filter(request.filter)
    selection = Selection(request.filter, parse_shard(request.shard) if request.shard else None, request.limit)
    only = None
    if request.rerun_failed:
        ids = failed_item_ids(store, store.require_run(request.rerun_failed)["id"])
        only = {item.index for item in dataset.items if item.id in ids}
    resume = None
    if request.resume:
        stored = store.require_run(request.resume)
        resume = stored["id"]
        if stored["dataset_hash"] and stored["dataset_hash"] != dataset.hash:
            raise UsageError(f"{dataset.path} changed since run {resume} started: its results would not add up",
                             f"run it afresh (evalcli run {dataset.path}) instead of resuming")
        saved = json.loads(stored["options"] or "{}")
        shard = tuple(saved["shard"]) if saved.get("shard") else None
        selection = Selection(saved.get("filter"), shard, saved.get("limit"))
        if saved.get("only_indexes"):
            only = set(saved["only_indexes"])
    return RunOptions(concurrency=request.concurrency, judge_concurrency=request.judge_concurrency,
                      use_cache=request.use_cache, strict=request.strict, max_errors=request.max_errors,
                      selection=selection, turn_timeout=request.turn_timeout, resume=resume, only_indexes=only,
                      keep_items=False, handle_signals=True, repeat=request.repeat)


def run_command(request: RunRequest, events: Events, out: Console) -> int:
    """``evalcli run``: validate all, run each, report each; returns the combined exit code."""
    if request.resume and len(request.datasets) != 1:
        raise UsageError("--resume continues one run: name exactly one dataset", "evalcli run DATASET --resume RUN_ID")
    datasets = load_all(request.datasets, request.scorers)
    _prepare_outputs(request)
    redact = Redactor(extra=set().union(*(d.secret_values for d in datasets)))
    store = Store(request.db, redact)
    codes: list[int] = []
    suites: list[ET.Element] = []
    sections: list[str] = []
    try:
        for dataset in datasets:
            result = run_evals(dataset, store=store, options=_options(request, store, dataset), events=events)
            close = getattr(events, "close", None)
            if close:
                close()
            codes.append(result.exit_code)
            _report(request, result, dataset, store, out, redact)
            if request.junit:
                suites.append(junit_suite(result, store.load_items(result.run_id)))
            if request.markdown or os.environ.get("GITHUB_STEP_SUMMARY"):
                sections.append(markdown_summary(result, store.load_items(result.run_id)))
            if result.status == "interrupted":
                break
    finally:
        store.close()
        _write_ci_reports(request, suites, sections, redact)
    return combine_exit_codes(codes)


def _prepare_outputs(request: RunRequest) -> None:
    """Create the folders of output files before running, so a bad path fails first (exit 2), not after the run."""
    outputs = [request.junit, request.markdown, request.db,
               Path(request.json_out) if request.json_out and request.json_out != "-" else None]
    for path in outputs:
        if path is None:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the folder of {path}: {exc.strerror}",
                             "choose a path in a folder you can write") from None


def _write_ci_reports(request: RunRequest, suites: list[ET.Element], sections: list[str], redact: Redactor) -> None:
    """JUnit and Markdown files, and the GitHub step summary (appended) when ``GITHUB_STEP_SUMMARY`` is set."""
    if request.junit and suites:
        request.junit.write_text(redact(junit_document(suites)), encoding="utf-8")
    if not sections:
        return
    text = redact("\n".join(sections))
    if request.markdown:
        request.markdown.write_text(text, encoding="utf-8")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(text)


def _report(request: RunRequest, result: RunResult, dataset: Dataset, store: Store, out: Console,
            redact: Redactor) -> None:
    def items() -> Iterator[ItemResult]:
        return store.load_items(result.run_id)

    scorer_ids = [s.id for s in dataset.scorers]
    gate_ids = [g.id for g in dataset.gates]
    if request.quiet:
        from .report import summary_line

        out.print(summary_line(result, None))
    else:
        render_run(out, result, items(), scorer_ids=scorer_ids, gate_ids=gate_ids, verbose=request.verbose,
                   db_path=str(request.db))
    if request.json_out:
        destination = request.json_out
        if destination != "-" and len(request.datasets) > 1:
            destination = _per_dataset(Path(destination), Path(dataset.path))
        write_json(result, items(), destination, redact)


def _per_dataset(path: Path, dataset: Path) -> str:
    """With several datasets, ``--json out.json`` writes ``out.<dataset>.json`` for each."""
    return str(path.with_name(f"{path.stem}.{dataset.stem}{path.suffix or '.json'}"))


def validate_command(paths: list[Path], scorers: Path | None) -> list[str]:
    """``evalcli validate``: one line per valid dataset (an invalid one raises with every problem)."""
    lines = []
    for dataset in load_all(paths, scorers):
        specs = list(dataset.all_specs())
        lines.append(f"{dataset.path}: ok ({len(dataset.items)} items, {len(specs)} gates/scorers, "
                     f"target {dataset.target_spec})")
    return lines


def scorers_table(path: Path | None) -> Table:
    """``evalcli scorers``: the registry's scorers, then the built-in checks."""
    registry = load_registry(find_registry(Path.cwd() / "_", str(path) if path else None))
    table = Table(title=f"Registered scorers ({registry.path or 'no scorers.yaml found'})", title_justify="left")
    for column in ("id", "kind", "arguments"):
        table.add_column(column)
    for spec in registry.scorers.values():
        table.add_row(spec.id, spec.kind, json.dumps(spec.args, ensure_ascii=False))
    for name, check in CHECKS.items():
        args = ", ".join(check.args.model_fields)
        table.add_row(name, "built-in check", f"({args}) {check.summary}", style="dim")
    return table


__all__ = ["EvalcliError", "RunRequest", "run_command"]
