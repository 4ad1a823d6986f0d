"""What each command but ``run`` does, as plain functions over the library (``app`` only parses and prints)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.table import Table

from ..errors import DatasetError
from ..evaluate import check_apart, check_outputs, open_for_writing
from ..records import record
from ..reports import (
    JsonReport,
    TerminalReport,
    deliver,
    diff_json,
    diff_markdown,
    item_document,
    plural,
    render_diff,
    render_item,
    titled,
)
from ..secrets import Redactor
from ..store import diff_runs, find_item, find_play, load_run, open_existing

if TYPE_CHECKING:
    from ..plugins import Entry


def scorers_listing(path: Path | None, as_json: bool) -> RenderableType | str:
    """``evalcli scorers``: the registry's scorers, then every scorer kind with its arguments and the package that
    declares it (docs/extending.md); as a table, or as JSON."""
    from ..dataset import find_registry, load_registry
    from ..scorers import all_kinds, origin

    registry = load_registry(find_registry(Path.cwd() / "_", str(path) if path else None))
    if registry.problems:
        raise DatasetError(registry.problems)
    if as_json:
        return json.dumps({
            "registry": registry.path,
            "registered": [{"id": spec.id, "kind": spec.kind, "args": spec.args} for spec in registry.scorers.values()],
            "kinds": [{"name": kind.name, "aliases": list(kind.aliases), "group": kind.group, "summary": kind.summary,
                       "needs_model": kind.needs_model, "example": kind.example,
                       "arguments": [{"name": name, "default": default, "description": text}
                                     for name, default, text in kind.argument_docs()], **_provenance(origin(kind))}
                      for kind in all_kinds()]}, ensure_ascii=False, indent=2)
    table = Table()
    table.add_column("id", no_wrap=True)
    for column in ("kind", "arguments / description", "from"):
        table.add_column(column)
    for spec in registry.scorers.values():
        table.add_row(spec.id, spec.kind, json.dumps(spec.args, ensure_ascii=False), "")
    for kind in all_kinds():
        args = ", ".join(f"{name}" + ("" if default == "required" else f"={default}")
                         for name, default, _ in kind.argument_docs())
        label = {"check": "check", "judge": "LLM judge", "custom": "custom"}[kind.group]
        table.add_row(kind.name, label, f"({args}) {kind.summary}", origin(kind).origin, style="dim")
    return titled(f"Registered scorers ({registry.path or 'no scorers.yaml found'})", table)


def adapters_listing(as_json: bool) -> RenderableType | str:
    """``evalcli adapters``: every adapter installed, evalcli's own first, with what it runs and the package that
    declares it (docs/extending.md); as a table, or as JSON."""
    from ..targets import declared

    found = declared()
    if as_json:
        return json.dumps({"adapters": [
            {"name": name, "summary": d.declaration.summary, "mapping": d.declaration.mapping,
             "recognises": list(d.declaration.recognises), **_provenance(d.entry)} for name, d in found.items()]},
            ensure_ascii=False, indent=2)
    table = Table()
    for column in ("adapter", "target", "runs", "from"):
        table.add_column(column, no_wrap=column in ("adapter", "from"))
    for name, d in found.items():
        table.add_row(name, _written(name, d.declaration.mapping), d.declaration.summary, d.entry.origin)
    return titled(f"Adapters ({plural(len(found), 'adapter')} installed)", table,
                  "an imported object gets the first adapter that recognises it (else callable); "
                  "target_options.adapter names one")


def _written(name: str, mapping: bool) -> str:
    """How a dataset names a target of this adapter."""
    return f"{{{name}: ...}}" if mapping else "module:attribute"


def _provenance(entry: Entry) -> dict[str, Any]:
    """Where a listed adapter or kind comes from, in the JSON of ``evalcli adapters`` and ``evalcli scorers``."""
    return {"package": entry.package, "version": entry.version, "builtin": entry.builtin,
            "entry_point": f"{entry.name} = {entry.value}"}


def show_run(db: Path, run_id: str, json_out: str | None, verbose: bool, out: Console) -> None:
    """``evalcli show RUN``: the stored run as the table ``evalcli run`` prints, and optionally its JSON; with
    ``--json -`` the JSON alone, on stdout, and nothing on stderr (docs/history.md)."""
    check_outputs([("--json", Path(json_out))] if json_out and json_out != "-" else [], reads=db)
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        terminal = None if json_out == "-" else TerminalReport(out, run.result, run.plan.scorer_ids, run.plan.gate_ids,
                                                               verbose=verbose, db_path=str(db))
        with contextlib.ExitStack() as files:
            reports: list[Any] = [] if terminal is None else [terminal]
            if json_out:
                stream = sys.stdout if json_out == "-" else files.enter_context(open_for_writing(Path(json_out)))
                json_report = JsonReport(stream, run.result, Redactor())
                reports.append(json_report)
            deliver(run.items(), reports)
            if json_out:
                json_report.close()
                stream.write("\n")
        if terminal is not None:
            terminal.close()
    finally:
        store.close()



def show_item(db: Path, run_id: str, key: str, json_out: str | None, out: Console, play: int | None = None) -> None:
    """``evalcli show RUN ITEM``: one conversation turn by turn, with every gate's and scorer's reason (every play of
    a ``--repeat`` run, failing ones first; only play ``play`` when given)."""
    check_outputs([("--json", Path(json_out))] if json_out and json_out != "-" else [], reads=db)
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        item = find_item(store, run.result.run_id, key)
        if play is not None:
            item = find_play(item, play)
    finally:
        store.close()
    if json_out:
        text = Redactor().dumps(item_document(run.result, item), ensure_ascii=False, indent=2) + "\n"
        if json_out == "-":
            sys.stdout.write(text)
        else:
            with open_for_writing(Path(json_out)) as handle:
                handle.write(text)
        if json_out == "-":
            return
    out.print(render_item(run.result, item))


def diff_command(db: Path, run_a: str, run_b: str, tolerance: float, verbose: bool, out: Console, *,
                 allow_different: bool = False, alpha: float | None = None, detect: float | None = None,
                 json_out: str | None = None, markdown: Path | None = None) -> int:
    """``evalcli diff``: print the comparison with its paired statistics (and write it as JSON and Markdown);
    return its exit code (1 when B is worse than A; with ``alpha``, only beyond the noise)."""
    files = output_paths(json_out, markdown)
    check_outputs(files, reads=db)
    check_apart(files)
    store = open_existing(db)
    try:
        diff = diff_runs(store, run_a, run_b, tolerance, allow_different=allow_different, statistics=True,
                         alpha=alpha, detect=detect)
    finally:
        store.close()
    render_diff(out, diff, verbose=verbose)
    if json_out:
        write_text(json_out, Redactor().dumps(diff_json(diff), ensure_ascii=False, indent=2) + "\n")
    if markdown is not None:
        write_text(str(markdown), Redactor()(diff_markdown(diff)))
    return diff.exit_code


def output_paths(json_out: str | None, markdown: Path | None) -> list[tuple[str, Path]]:
    """The files ``--json`` (unless ``-``) and ``--markdown`` name, to check before anything is read."""
    found = [("--json", Path(json_out))] if json_out and json_out != "-" else []
    return found + ([("--markdown", markdown)] if markdown is not None else [])


def write_text(target: str, text: str) -> None:
    """Write to a path, or to stdout for ``-``."""
    if target == "-":
        sys.stdout.write(text)
        return
    with open_for_writing(Path(target)) as handle:
        handle.write(text)


@record(frozen=True)
class Written:
    """What ``evalcli report`` wrote."""

    path: Path
    run_id: str
    dataset: str
    conversations: int
    baseline: str | None

    def line(self) -> str:
        against = f", compared with run {self.baseline}" if self.baseline else ""
        return (f"wrote {self.path}: run {self.run_id} of {self.dataset}, {self.conversations} "
                f"conversation{'' if self.conversations == 1 else 's'}{against}")


def report_command(db: Path, run_id: str, html: Path, baseline: str | None = None, tolerance: float = 0.0, *,
                   allow_different: bool = False) -> Written:
    """``evalcli report``: read the stored run (read-only) and write its HTML report to ``html``."""
    check_outputs([("--html", html)], reads=db)
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        from ..reports.html import HtmlReport, report_sources

        sources = report_sources(store, run.result.run_id, baseline, tolerance, allow_different=allow_different)
        report = HtmlReport(run.result, sources, Redactor())
        deliver(run.items(), [report])
    finally:
        store.close()
    report.write(html)
    base = sources.baseline.diff.a.run_id if sources.baseline else None
    return Written(html, run.result.run_id, run.result.dataset_path, len(report.rows), base)


def compare_command(db: Path, run_ids: list[str], html: Path | None, out: Console, *,
                    allow_different: bool = False, alpha: float | None = None, detect: float | None = None,
                    json_out: str | None = None, markdown: Path | None = None) -> int:
    """``evalcli compare``: the runs side by side with each later run's paired statistics against the first, and
    with ``html`` the same as a page with the transcripts; the exit code (with ``alpha``: 1 on a regression beyond
    the noise, else 0)."""
    from ..reports import compare_json, compare_markdown, render_comparison
    from ..store import compare_runs

    files = [*([("--html", html)] if html is not None else []), *output_paths(json_out, markdown)]
    check_outputs(files, reads=db)
    check_apart(files)
    store = open_existing(db)
    try:
        comparison = compare_runs(store, run_ids, allow_different=allow_different, statistics=True, alpha=alpha,
                                  detect=detect, transcripts=html is not None)
    finally:
        store.close()
    render_comparison(out, comparison)
    if html is not None:
        from ..reports.html import comparison_page

        with open_for_writing(html) as handle:
            handle.write(comparison_page(comparison, Redactor()))
        out.print(f"wrote {html}: {len(comparison.columns)} runs, {plural(len(comparison.items), 'conversation')}",
                  markup=False, soft_wrap=True)
    if json_out:
        write_text(json_out, Redactor().dumps(compare_json(comparison), ensure_ascii=False, indent=2) + "\n")
    if markdown is not None:
        write_text(str(markdown), Redactor()(compare_markdown(comparison)))
    return comparison.regression_exit_code


def mocks_command(tape: Path | None, traces: Path | None) -> str:
    """``evalcli mocks from-tape``: the ``tools:`` YAML answering a tape's calls, and those of OTLP/JSON traces'
    tool spans (docs/hermetic.md, "Mocks from recordings")."""
    from ..errors import Problem
    from ..tools import TapeError, read_tape
    from ..tools.fromtape import tools_yaml
    from ..tools.traces import TracesError, read_trace_calls

    if tape is None and traces is None:
        raise DatasetError([Problem("", "evalcli mocks from-tape needs a TAPE, or --from-traces FILE",
                                    "write e.g. 'evalcli mocks from-tape tapes/weather.tape.jsonl'")])
    calls: dict[str, Any] = {}
    sources = []
    if tape is not None:
        try:
            calls.update(read_tape(tape).calls)
        except TapeError as exc:
            raise DatasetError([Problem(exc.where(tape), f"tape: {exc.message}",
                                        "give a tape written by --record-tools DIR")]) from None
        sources.append(str(tape))
    if traces is not None:
        try:
            for identity, found in read_trace_calls(traces).items():
                calls.setdefault(identity, []).extend(found)
        except TracesError as exc:
            raise DatasetError([Problem(str(traces), f"traces: {exc}", "give an OTLP/JSON export (a file of "
                                                                       "resourceSpans, or one such object a line)")]) \
                from None
        sources.append(str(traces))
    return tools_yaml(calls, " and ".join(sources))
