"""Run history for people: the ``evalcli runs`` table and the lines ``evalcli merge`` prints."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..records import record
from ..results import run_outcome
from ..store import MergeResult, Store
from ..words import stored_run_word
from .text import VERDICT_STYLE, fmt, verdict_style, verdict_words


def runs_table(store: Store, limit: int = 20) -> RenderableType:
    """``evalcli runs``: the most recent runs, newest first (see ``RunsListing``)."""
    return RunsListing(f"Runs in {store.path} (newest first)", store.listing(limit))


@record
class RunsListing:
    """The runs as a table when it fits the width; else as a list, a few lines per run, so that no run id (what
    ``show`` asks for), dataset path or score is ever cut."""

    title: str
    rows: list[dict[str, Any]]

    def table(self) -> Table:
        table = Table()
        table.add_column("run", no_wrap=True)
        for column in ("when", "dataset", "target", "status", "verdict", "items", "scores", "LLM use"):
            table.add_column(column, justify="right" if column == "items" else "left",
                             no_wrap=column in ("when", "dataset"))
        for row in self.rows:
            table.add_row(row["id"], _when(row), _dataset(row), row["target"], row["status"], _verdict(row), _items(row),
                          _compact_scores(row["scores"]), _usage(row))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.title, style="italic")
        table = self.table()
        if Measurement.get(console, options.update(max_width=100_000), table).maximum <= options.max_width:
            yield table
            return
        for row in self.rows:
            yield Text.assemble((row["id"], "cyan"), f"  {_when(row)}  {row['status']}  ", _verdict(row),
                                f"  {_items(row)} items")
            yield Text(f"  {_dataset(row)}  ->  {row['target']}")
            scores = " ".join(f"{k}={fmt(v)}" for k, v in json.loads(row["scores"] or "{}").items())
            usage = _usage(row)
            if scores or usage != "-":
                yield Text("  " + "   ".join(part for part in (scores, "" if usage == "-" else usage) if part),
                           style="dim")


def _when(row: dict[str, Any]) -> str:
    return (row["started_at"] or "")[:19].replace("T", " ")


def _verdict(row: dict[str, Any]) -> Text:
    """The run's verdict, or ``errored`` when a conversation or a scorer errored and no gate failed (such a run's
    ``passed`` covers only part of it: docs/history.md)."""
    counts = json.loads(row.get("summary") or "{}")
    outcome = run_outcome(row["verdict"], bool(row["errors"] or counts.get("scorer_errors")))
    word = stored_run_word(outcome, row["errors"] or 0, _limited(row), bool(counts.get("scorer_errors")))
    if word is not None:
        return Text(word, style="bold yellow")
    return Text(row["verdict"] or "-", style=VERDICT_STYLE.get(row["verdict"] or "", ""))


def _limited(row: dict[str, Any]) -> int:
    """How many of the run's errored conversations a limit or a budget stopped (its summary's ``limited``)."""
    return int(json.loads(row.get("summary") or "{}").get("limited") or 0)


def _items(row: dict[str, Any]) -> str:
    """``12``, ``12 (1 err)``, ``12 (1 limited)``, ``12 (1 err, 1 limited)``: a limited conversation is never called an
    error (docs/budgets.md)."""
    limited = _limited(row)
    errors = (row["errors"] or 0) - limited
    said = [*([f"{errors} err"] if errors > 0 else []), *([f"{limited} limited"] if limited else [])]
    return f"{row['total_items']}" + (f" ({', '.join(said)})" if said else "")


def _dataset(row: dict[str, Any]) -> str:
    """The dataset as typed, with its shard or the number of runs merged into it."""
    dataset = str(row.get("dataset_path") or row["dataset"])
    shard = json.loads(row["shard"]) if row.get("shard") else None  # Store.listing reads it from the options
    if shard:
        dataset += f" (shard {shard[0]}/{shard[1]})"
    if row.get("merged"):
        dataset += f" (merged {row['merged']})"
    return dataset


def _compact_scores(text: str | None, width: int = 60) -> str:
    """Whole ``id=mean`` entries up to about ``width`` characters, then how many more (an id is never cut)."""
    parts = [f"{k}={fmt(v)}" for k, v in json.loads(text or "{}").items()]
    shown: list[str] = []
    for part in parts:
        if shown and len(" ".join([*shown, part])) > width:
            break
        shown.append(part)
    rest = len(parts) - len(shown)
    return " ".join(shown) + (f" +{rest} more" if rest else "")


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
    verdict.append(verdict_words(result.summary), style=verdict_style(result.summary))
    verdict.append(f"   conversations: {result.summary.total_items}   errors: {result.summary.errors}"
                   f"   exit code {result.exit_code}")
    lines.append(verdict)
    for key, words in (("pass_at_k", "pass@k (a gate passed in at least one of the --repeat plays): "),
                       ("pass_all_k", "pass^k (a gate passed in all of the --repeat plays): ")):
        if result.repeats.get(key):
            lines.append(Text(words + ", ".join(f"{g}={fmt(v)}" for g, v in result.repeats[key].items())))
    return lines



