"""Run history for people: the ``evalcli runs`` table and the lines ``evalcli merge`` prints."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table
from rich.text import Text

from ..store import MergeResult, Store
from .text import VERDICT_STYLE, fmt


def runs_table(store: Store, limit: int = 20) -> Table:
    """``evalcli runs``: the most recent runs, newest first."""
    table = Table(title=f"Runs in {store.path} (newest first)", title_justify="left")
    table.add_column("run", no_wrap=True, min_width=26)
    for column in ("when", "dataset", "target", "status", "verdict", "items", "scores", "LLM use"):
        table.add_column(column, justify="right" if column == "items" else "left")
    for row in store.runs(limit):
        options = json.loads(row["options"] or "{}")
        dataset = (row.get("dataset_path") or row["dataset"]) + (f" (shard {options['shard'][0]}/{options['shard'][1]})"
                                    if options.get("shard") else "")
        if options.get("merged_from"):
            dataset += f" (merged {len(options['merged_from'])})"
        items = f"{row['total_items']}" + (f" ({row['errors']} err)" if row["errors"] else "")
        table.add_row(row["id"], (row["started_at"] or "")[:19].replace("T", " "), dataset, row["target"],
                      row["status"], Text(row["verdict"] or "-", style=VERDICT_STYLE.get(row["verdict"] or "", "")),
                      items, _compact_scores(row["scores"]), _usage(row))
    return table


def _compact_scores(text: str | None, width: int = 60) -> str:
    parts = [f"{k}={fmt(v)}" for k, v in json.loads(text or "{}").items()]
    joined = " ".join(parts)
    return joined if len(joined) <= width else joined[: width - 1] + "…"


def _usage(row: dict[str, Any]) -> str:
    if not row["llm_calls"]:
        return "-"
    return (f"{row['llm_calls']} calls, {row['prompt_tokens'] + row['completion_tokens']} tok, "
            f"${row['cost']:.4f}")


def merge_lines(result: MergeResult) -> list[Text]:
    """What ``evalcli merge`` prints: the sources, then the merged run and its verdict."""
    lines = [Text(f"merged run {run_id} from {db}", style="dim") for db, run_id in result.sources]
    lines.extend(Text("warning: " + w, style="yellow") for w in result.warnings)
    verdict = Text.assemble(("Run ", "bold"), (result.run_id, "cyan"), f" written to {result.out}: verdict ")
    verdict.append(result.summary.verdict or "none", style=VERDICT_STYLE.get(result.summary.verdict or "", ""))
    verdict.append(f"   conversations: {result.summary.total_items}   errors: {result.summary.errors}"
                   f"   exit code {result.exit_code}")
    lines.append(verdict)
    return lines



