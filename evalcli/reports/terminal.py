"""The terminal report of a run: rich tables, the failing conversations, the verdict line.

``TerminalReport`` is fed the run's conversations once, in dataset order (with the other reports,
see ``json.deliver``), and prints when closed. Nothing is computed here that the result does not hold.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..dbname import db_option
from ..identity import given_name
from ..records import record
from ..results import ItemResult, RunResult, Summary, fmt
from ..thresholds import GATE
from .text import (
    ERROR,
    MAX_FAILING,
    MAX_ROWS,
    MAX_TABLE,
    NOT_SCORABLE,
    budget_words,
    fits,
    fmt_against,
    gate_rule,
    mark,
    one_line,
    plays_words,
    plural,
    stability_words,
    threshold_text,
    titled,
    usage_parts,
    verdict_style,
    verdict_words,
    why_failed,
)

if TYPE_CHECKING:  # rich is imported where a report is drawn, after the run (docs/performance.md)
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text


@record
class TerminalReport:
    """Collects what the terminal shows while the conversations stream past; ``close`` prints it."""

    console: Console
    result: RunResult
    scorer_ids: list[str]
    gate_ids: list[str]
    verbose: bool = False
    quiet: bool = False
    db_path: str | None = None
    rows: list[list[Any]] = field(default_factory=list)
    hidden: int = 0
    cut: int = 0
    """Conversations left out of a table that reached its cap (``MAX_TABLE``), failing or not."""
    cut_failing: int = 0
    not_scorable_shown: bool = False
    failing: list[ItemResult] = field(default_factory=list)
    failing_count: int = 0
    gate_errors: list[str] = field(default_factory=list)
    scorer_errors: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Per scorer id that failed on a conversation: its first error (where, what) and how many times it failed."""
    turn_misses: dict[tuple[int, str], list[str]] = field(default_factory=dict)

    def item(self, item: ItemResult) -> None:
        if not item.passed:
            self.failing_count += 1
            if len(self.failing) < MAX_FAILING and not (self.quiet and item.status == "ok"):
                self.failing.append(_light(item))
        for turn in item.turns:
            for gate_id, outcome in turn.gate_scores.items():
                if outcome.missed_gate and item.status == "ok":
                    self.turn_misses.setdefault((turn.index, gate_id), []).append(item.id)
        for where, gates in (("", item.gate_scores), *((f" turn {t.index}", t.gate_scores) for t in item.turns)):
            self.gate_errors.extend(f"{item.id}{where}: gate {gate_id} raised (scored 0): {one_line(o.error)}"
                                    for gate_id, o in gates.items() if o.error)
        if item.status == "ok":
            for where, scores in (("", item.scores), *((f" turn {t.index}", t.scores) for t in item.turns)):
                for scorer_id, outcome in scores.items():
                    if outcome.error and outcome.score is None:  # the scorer's own error (docs/scorers.md)
                        first, count = self.scorer_errors.get(scorer_id, (f"{item.id}{where}: {one_line(outcome.error)}", 0))
                        self.scorer_errors[scorer_id] = (first, count + 1)
        if self.quiet:
            return
        if not self.verbose and len(self.rows) >= MAX_ROWS and item.passed:
            self.hidden += 1
            return
        if len(self.rows) >= (MAX_TABLE * 5 if self.verbose else MAX_TABLE):
            self.cut += 1
            self.cut_failing += not item.passed
            return
        self.rows.append(self._row(item))

    def _row(self, item: ItemResult) -> list[Any]:
        from rich.text import Text

        cells: list[Any] = [item.id, item.form, str(len(item.turns))]
        for scorer_id in self.scorer_ids:
            outcome = item.scores.get(scorer_id)
            if outcome is not None and outcome.not_scorable:
                self.not_scorable_shown = True
                cells.append(NOT_SCORABLE)
            elif outcome is not None and outcome.score is None and outcome.error:
                cells.append(Text(ERROR, style="bold red"))  # the scorer's own error
            else:
                cells.append(fmt(outcome.score if outcome else None))
        if self.gate_ids:
            scorable = sum(1 for o in item.gate_scores.values() if not o.not_scorable)
            passed = scorable - sum(1 for o in item.gate_scores.values() if o.missed_gate)
            cells.append(Text(f"{passed}/{scorable}", style="green" if passed == scorable else "red"))
        cells.append(status_text(item))
        return cells

    def close(self) -> None:
        from rich.text import Text

        console = self.console
        if self.quiet:
            # only the verdict line, and the conversations that errored (what --quiet promises to keep)
            self._print_failing(errors_only=True)
            console.print(summary_line(self.result, self.db_path, stored=False), soft_wrap=True)
            return
        console.print()
        console.print(Text.assemble(("Run ", "bold"), (self.result.run_id, "cyan"),
                                    f"  {self.result.dataset_path}  ->  {self.result.target}"), soft_wrap=True)
        console.print(self._items_table())
        if self.hidden > 0:
            console.print(f"  ... {plural(self.hidden, 'more passing conversation')} (--verbose shows all; "
                          f"'evalcli show {self.result.run_id} ITEM{db_option(self.db_path)}' shows one)", soft_wrap=True)
        if self.cut > 0:
            console.print(f"  ... {plural(self.cut, 'more conversation')} ({self.cut_failing} failing) not listed: the "
                          f"table stops at {len(self.rows)} rows (--json - writes every conversation; "
                          f"'evalcli show {self.result.run_id} ITEM{db_option(self.db_path)}' shows one)", soft_wrap=True)
        for line in self.gate_errors[:20]:
            console.print(Text.assemble(("  gate error ", "bold yellow"), line), soft_wrap=True)
        for scorer_id, (first, count) in self.scorer_errors.items():
            more = f" (and {count - 1} more)" if count > 1 else ""
            console.print(Text.assemble(("  scorer error ", "bold yellow"), f"{scorer_id}{more} on {first}"),
                          soft_wrap=True)
        for table in aggregate_tables(self.result.summary, self.turn_misses, gate_rule(self.result)):
            console.print(table)
        self._print_failing()
        console.print(summary_line(self.result, self.db_path), soft_wrap=True)

    def _items_table(self) -> RenderableType:
        """The conversations, ids never cut: when every scorer's full id does not fit the width, the scorer columns
        are numbered (``#1``, ``#2``, ...) and a legend names each."""
        legend = []
        if self.not_scorable_shown:
            legend.append(f"{NOT_SCORABLE} = not scorable on that conversation (left out of the mean)")
        if self.gate_ids:
            legend.append("gates = passed/scorable top-level gates")
        table = self._conversations(list(self.scorer_ids))
        numbered = [f"#{n}" for n in range(1, len(self.scorer_ids) + 1)]
        if self.scorer_ids and fits(self.console, table) is False:
            table = self._conversations(numbered)
            legend.insert(0, ", ".join(f"#{n} = {s}" for n, s in enumerate(self.scorer_ids, start=1)))
        if self._others_width(numbered) + 14 > self.console.width:
            # a terminal too narrow for the columns at their narrowest (20 columns): a line per conversation, whose
            # status and gates are read where a table would have squeezed them to nothing
            return titled("Conversations", self._conversation_lines(numbered), "; ".join(legend))
        return titled("Conversations", table, "; ".join(legend))

    def _names(self, headers: list[str]) -> list[str]:
        return ["form", "turns", *headers, *(["gates"] if self.gate_ids else []), "status"]

    def _others_width(self, headers: list[str]) -> int:
        """The columns beside the id at their narrowest: each one's widest cell, its padding and its border."""
        return sum(3 + max([len(name), *(len(str(row[n])) for row in self.rows)])
                   for n, name in enumerate(self._names(headers), 1))

    def _conversation_lines(self, headers: list[str]) -> RenderableType:
        from rich.console import Group
        from rich.text import Text

        lines = []
        for row in self.rows:
            parts: list[str | Text] = [Text(str(row[0]), style="bold")]
            for name, cell in zip(self._names(headers), row[1:], strict=True):
                parts += [f"  {name} ", cell if isinstance(cell, Text) else str(cell)]
            lines.append(Text.assemble(*parts))
        return Group(*lines)

    def _conversations(self, headers: list[str]) -> Table:
        from rich.table import Table

        table = Table(show_lines=False)
        widest = max((len(str(row[0])) for row in self.rows), default=4)
        # an id is never cut: whole on its line when it fits in the console less 20 columns (the other columns fold
        # around it); a longer one is folded onto more lines, as wide as the other columns leave at their narrowest
        # (scorers numbered), so a 3,000-character id never takes the room of the status, the gates and the scores
        whole = widest <= self.console.width - 20
        others = self._others_width([f"#{n}" for n in range(1, len(headers) + 1)])
        room = widest if whole else max(10, self.console.width - 4 - others)
        table.add_column("item", no_wrap=whole, overflow="fold", min_width=room, max_width=None if whole else room)
        table.add_column("form", overflow="fold")
        table.add_column("turns", justify="right", overflow="fold")
        for header in headers:
            table.add_column(header, justify="right", overflow="fold")
        if self.gate_ids:
            table.add_column("gates", justify="right", overflow="fold")
        table.add_column("status", overflow="fold")
        for row in self.rows:
            table.add_row(*row)
        return table

    def _print_failing(self, errors_only: bool = False) -> None:
        from rich.text import Text

        if not self.failing_count or not (self.result.verdict == "failed" or self.result.summary.errors):
            return
        if errors_only:
            shown = [item for item in self.failing if item.status != "ok"]
            if not shown:
                return
            count = self.result.summary.errors
            kinds = {"limited" if item.status == "limited" else "errored" for item in shown}
            title = "Limited" if kinds == {"limited"} else "Errored or limited" if len(kinds) > 1 else "Errored"
            self.console.print(Text(f"{title} conversations ({count}):", style="bold red"), soft_wrap=True)
        else:
            shown, count = self.failing, self.failing_count
            self.console.print(Text(f"Failing conversations ({count}):", style="bold red"), soft_wrap=True)
        for item in shown:
            self.console.print(Text.assemble(("  ", ""), (item.id, "bold"), f"  {one_line(why_failed(item))}"),
                               soft_wrap=True)
            shown_by = f"evalcli show {self.result.run_id} {_quoted(given_name(item))}{db_option(self.db_path)}"
            self.console.print(Text(f"    {shown_by}", style="dim"), soft_wrap=True)
        if count > len(shown):
            self.console.print(f"  ... and {count - len(shown)} more (evalcli show {self.result.run_id} -v"
                               f"{db_option(self.db_path)} lists more, --json - every one)", soft_wrap=True)


STABILITY_STYLE = {"stable-pass": "green", "flaky": "bold yellow", "stable-fail": "bold red"}


def status_text(item: ItemResult) -> Text:
    """``ok``, ``error`` or ``limited`` (a limit or a budget stopped it: docs/budgets.md, shown as such); under
    ``--repeat`` the conversation's stability and its passing plays (``flaky 2/3``)."""
    from rich.text import Text

    if item.status != "ok":
        return Text(item.status, style="bold red")
    if item.stability is None:
        return Text("ok", style="green")
    return Text(plays_words(item), style=STABILITY_STYLE[item.stability])


def _light(item: ItemResult) -> ItemResult:
    """A failing conversation kept for the list, without its (possibly large) messages."""
    from dataclasses import replace

    turns = [replace(t, output=[]) for t in item.turns]
    return replace(item, turns=turns, usage=[])


def _quoted(item_id: str) -> str:
    """An item id or a path as a shell reads it back (quoted only when it must be), and as the console prints it: an
    id holding a control or direction character is written as ``$'...'`` with escapes (``words.shell_word``)."""
    from ..words import shell_word

    return shell_word(item_id)


def aggregate_tables(summary: Summary, turn_misses: dict[tuple[int, str], list[str]] | None = None,
                     rule: str | None = None) -> list[RenderableType]:
    """The run's gates (titled with ``rule``, ``gate_rule``'s words under repeats), scores and turn results."""
    from rich.table import Table  # here: a --quiet run that passed prints no table (docs/performance.md)

    tables: list[RenderableType] = []
    if summary.gate_results:
        # the figures are never squeezed: on a narrow terminal a long id folds beside them (docs/history.md)
        gates = Table()
        gates.add_column("gate", overflow="fold")
        for column in ("score", ""):
            gates.add_column(column, no_wrap=True)
        for gate in summary.gate_results:
            gates.add_row(gate.id, fmt_against(gate.score, GATE), mark(gate.passed))
        tables.append(titled(f"Gates ({rule or 'each must average >= 1.0'})", gates))
    if summary.threshold_results or summary.scores:
        scores = Table()
        scores.add_column("scorer", overflow="fold")
        for column in ("mean", "threshold", ""):
            scores.add_column(column, no_wrap=True)
        thresholds = {t.id: t for t in summary.threshold_results}
        for scorer_id, mean in summary.scores.items():
            result = thresholds.get(scorer_id)
            scores.add_row(scorer_id, fmt_against(mean, result.threshold) if result else fmt(mean),
                           threshold_text(result.threshold) if result else "", mark(result.passed) if result else "")
        tables.append(titled("Scores (mean over conversations)", scores))
    if summary.turn_results:
        tables.append(_turns_table(summary, turn_misses or {}))
    return tables


def _turns_table(summary: Summary, turn_misses: dict[tuple[int, str], list[str]]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    turns = Table()
    for column in ("turn", "gates", "thresholds", "scores"):
        turns.add_column(column)
    for turn in summary.turn_results:
        gates_text = Text()
        for g in turn.gate_results:
            if g.passed:
                gates_text.append(f"{g.id}={fmt(g.score)} ", style="green")
                continue
            missed = turn_misses.get((turn.index, g.id), [])
            names = ", ".join(missed[:3]) + (f" +{len(missed) - 3} more" if len(missed) > 3 else "")
            gates_text.append(f"FAIL {g.id}={fmt_against(g.score, GATE)}" + (f" (failed by {names})" if names else "") + " ",
                              style="bold red")
        thresholds_text = Text()
        for t in turn.threshold_results:
            thresholds_text.append(f"{'' if t.passed else 'FAIL '}{t.id}={fmt_against(t.average_score, t.threshold)} "
                                   f"({threshold_text(t.threshold)}) ", style="green" if t.passed else "bold red")
        turns.add_row(str(turn.index), gates_text, thresholds_text,
                      " ".join(f"{k}={fmt(v)}" for k, v in turn.scores.items()))
    return titled("Turn results (mean per turn index across conversations)", turns)


def verdict_line(result: RunResult) -> Text:
    """``verdict: passed`` when every conversation was scored; with errors, what the verdict covers and the exit
    code: ``verdict: passed on 1 of 4 conversations; 3 errored (exit 4)``."""
    from rich.text import Text

    summary = result.summary
    text = Text("verdict: ")
    text.append(verdict_words(result), style=verdict_style(result))
    if not summary.errors and not summary.scorer_errors:
        text.append(f"   conversations: {summary.total_items}   errors: 0")
        return text
    text.append(f" (exit {result.exit_code})" if result.status != "running" else " (not finished)")
    return text


def resume_command(result: RunResult, db_path: str | None) -> str:
    """The command that continues an interrupted run (with its database unless it is the default one)."""
    return f"evalcli run {_quoted(result.dataset_path)} --resume {result.run_id}{db_option(db_path)}"


def interrupted_line(run_id: str | None, dataset_path: str, db_path: str | None) -> Text:
    """What an interrupt after the conversations (while a run was being finished or reported) prints."""
    from rich.text import Text

    text = Text("INTERRUPTED ", style="bold red")
    if run_id is None:
        return text.append("before any run started: nothing was stored")
    return text.append(f"while finishing run {run_id}: it is marked interrupted and keeps what it stored; continue "
                       f"with: evalcli run {_quoted(dataset_path)} --resume {run_id}{db_option(db_path)}")


def summary_line(result: RunResult, db_path: str | None, *, stored: bool = True) -> Text:
    """The run's last lines: the interrupt (with the command that resumes it), the verdict, pass@k, LLM use and,
    when ``stored``, where the run is stored. ``db_path`` is the run's database."""
    from rich.text import Text

    summary = result.summary
    text = Text()
    if result.status == "running":  # read back from the database (show): still playing, or its process is gone
        text.append("NOT FINISHED ", style="bold red")
        text.append(f"with {plural(result.completed, 'conversation')} stored: the run is still playing, or its "
                    "process was killed (kill -9, out of memory); continue a killed one with: "
                    f"{resume_command(result, db_path)}\n")
    if result.status == "interrupted":
        text.append("INTERRUPTED ", style="bold red")
        text.append(f"after {result.completed} of {plural(result.selected, 'conversation')}; "
                    f"continue with: {resume_command(result, db_path)}\n")
    if result.status == "failed":  # read back (show, report): a worker died, sys.exit(), a bug stopped it
        text.append("FAILED ", style="bold red")
        text.append(f"after {result.completed} of {plural(result.selected, 'conversation')}: the run stopped on an "
                    f"error, so its verdict covers only these; continue with: {resume_command(result, db_path)}\n")
    spent = budget_words(result)
    if spent is not None:
        label, _, rest = spent.partition(" after ")
        text.append(label.upper() + " ", style="bold red")
        text.append(f"after {rest} (those that needed a call of a spent budget are limited); continue with a larger "
                    f"--max-cost or --max-tokens: {resume_command(result, db_path)}\n")
    text.append_text(verdict_line(result))
    if summary.not_scorable:
        text.append(f"   not scorable: {sum(summary.not_scorable.values())}")
    if result.pass_at_k:
        text.append("\npass@k (a gate passed in at least one of the --repeat plays): " +
                    ", ".join(f"{g}={fmt(v)}" for g, v in result.pass_at_k.items()))
        text.append("\npass^k (a gate passed in all of the --repeat plays): " +
                    ", ".join(f"{g}={fmt(v)}" for g, v in result.pass_all_k.items()))
    stability = stability_words(result)
    if stability is not None:
        text.append("\n" + stability)
    usage = result.usage
    if usage.get("calls"):
        text.append(f"\nLLM calls: {usage['calls']} (cache hits: {usage['cache_hits']})   tokens: "
                    f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out   cost: ${usage['cost']:.4f}")
        parts = usage_parts(usage)
        if parts:
            text.append("\n  by purpose: " + "; ".join(parts))
    if db_path and stored:
        text.append(f"\nstored in {db_path} (run {result.run_id})", style="dim")
    text.append(f"   exit code {result.exit_code}" if result.status != "running" else "   no exit code yet", style="dim")
    return text
