"""``evalcli calibrate``: measure each labelled scorer against its labels (docs/recorded.md), as a plain function."""

from __future__ import annotations

import asyncio
import json
from dataclasses import field
from pathlib import Path
from typing import Any

from rich.console import Console

from ..errors import ExitCode
from ..evaluate import check_outputs, load_datasets, open_for_writing
from ..llm import backend_from_env
from ..records import record
from ..reports.calibration import render_calibration
from ..run import Events, RunOptions
from ..run.calibrate import acalibrate, calibrated_specs
from ..secrets import Redactor
from ..store import Store
from ..store.labels import with_stored_labels
from .outputs import stdout_for_json
from .run import DatasetsRequest


@record
class CalibrateRequest(DatasetsRequest):
    """Everything ``evalcli calibrate`` was asked to do."""

    scorer_ids: list[str] = field(default_factory=list)
    min_agreement: float | None = None
    labels_from_db: bool = False
    """Add the labels stored in ``db`` (made in ``evalcli view``) to the datasets' own (docs/view.md)."""


def calibrate_command(request: CalibrateRequest, events: Events, out: Console) -> int:
    """Validate every dataset, calibrate each (stored as a run plus ``calibrations`` rows), print or write the
    JSON; the worst exit code (130, 2, 1, 4, 0)."""
    backend_from_env()
    json_path = Path(request.json_out) if request.json_out and request.json_out != "-" else None
    check_outputs([("--json", json_path)] if json_path is not None else [], db=("--db", request.db))
    datasets = [dataset for dataset, _ in load_datasets(request.datasets, request.scorers)]
    redact = Redactor(extra=set().union(*(d.secret_values for d in datasets)))
    options = RunOptions(concurrency=request.concurrency, judge_concurrency=request.judge_concurrency,
                         use_cache=request.use_cache, handle_signals=True)
    documents: list[dict[str, Any]] = []
    codes: list[int] = []
    if not (request.labels_from_db and Path(request.db).exists()):  # else its labels may be in the database
        for dataset in datasets:  # nothing to calibrate, or an unknown --scorer: exit 2 before any file is made
            calibrated_specs(dataset, request.scorer_ids)
    store = Store(request.db, redact)
    try:
        if request.labels_from_db:
            datasets = [with_stored_labels(dataset, store, events.warning) for dataset in datasets]
        with stdout_for_json(request.json_out == "-") as stdout, asyncio.Runner() as loop:
            for dataset in datasets:
                calibration = loop.run(acalibrate(dataset, store=store, options=options, scorer_ids=request.scorer_ids,
                                                  min_agreement=request.min_agreement, events=events))
                events.close()
                render_calibration(out, calibration, str(request.db))
                documents.append(redact.value(calibration.to_json()))
                codes.append(calibration.exit_code)
                if calibration.run.status == "interrupted":
                    break
            document = documents[0] if len(documents) == 1 else {"calibrations": documents}
            if stdout is not None:
                stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    finally:
        store.close()
    if json_path is not None:
        with open_for_writing(json_path) as handle:
            handle.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    return ExitCode.worst(codes)
