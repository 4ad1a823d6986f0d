"""``evalcli judges DATASET``: every LLM judge of a dataset with its latest calibration and whether it may gate
(docs/judges.md#calibrated-gates), as a plain function."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from ..evaluate import load_datasets
from ..reports import titled
from ..run.trust import JudgeStanding, judge_standings
from ..store import Store


def judges_listing(paths: list[Path], scorers: Path | None, db: Path, as_json: bool) -> RenderableType | str:
    """The judges of each dataset, read against the calibrations in ``db`` (none when it does not exist)."""
    loaded = [dataset for dataset, _ in load_datasets(paths, scorers)]
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(contextlib.closing(Store(db, readonly=True))) if db.exists() else None
        found = [(dataset.path, judge_standings(dataset, store)) for dataset in loaded]
    if as_json:
        return json.dumps({"db": str(db), "datasets": [{"dataset": path, "judges": [s.to_json() for s in standings]}
                                                       for path, standings in found]}, ensure_ascii=False, indent=2)
    table = Table()
    for column in ("judge", "role", "kind", "model", "calibrated", "latest calibration", "may gate"):
        table.add_column(column, no_wrap=column in ("judge", "role"))
    for path, standings in found:
        for standing in standings:
            table.add_row(*_row(standing), end_section=standing is standings[-1] and len(found) > 1)
        if not standings:
            table.add_row(f"({path}: no LLM judge)", "", "", "", "", "", "")
    return titled(f"Judges ({', '.join(path for path, _ in found)}; calibrations in {db})", table)


def _row(standing: JudgeStanding) -> list[str]:
    spec, row = standing.spec, standing.calibration
    models = spec.args.get("models")
    model = ", ".join(map(str, models)) if models else str(spec.args.get("model", ""))
    bar = ", ".join(f"{k} {v}" for k, v in spec.calibrated.raw().items()) if spec.calibrated is not None else "-"
    may = "yes" if standing.may_gate and spec.calibrated is not None else \
        "yes (no bar)" if standing.may_gate else "no: " + "; ".join(standing.lacks)
    return [spec.id, standing.role, spec.kind, model, bar, _measured(row), may]


def _measured(row: dict[str, Any] | None) -> str:
    if row is None:
        return "never"
    figures = [f"{row['compared']} labels", f"accuracy {_figure(row['accuracy'])}"]
    if row["kappa"] is not None:
        figures.append(f"kappa {_figure(row['kappa'])}")
    return f"{', '.join(figures)} ({str(row['created_at'])[:16].replace('T', ' ')}, run {row['run_id']})"


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
