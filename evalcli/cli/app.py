"""The ``evalcli`` command: parse, call the library, print, map errors to exit codes.

Heavy imports (pydantic, yaml, sqlite, litellm) happen inside commands, so ``evalcli --help`` is quick.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..streams import redact_terminal
from .cache import cache_app
from .console import make_console, plain_argument_help, quiet_target_output, user_errors
from .mocks import mocks_app
from .run_flags import (
    DEFAULT_DB,
    HELP_OPTIONS,
    DatasetsArgument,
    DbOption,
    DebugOption,
    FilterOption,
    HermeticOption,
    HtmlOption,
    JsonOption,
    JunitOption,
    LimitOption,
    MarkdownOption,
    MaxCostOption,
    MaxErrorsOption,
    MaxTokensOption,
    NoCacheOption,
    OtelEndpointOption,
    OtelFileOption,
    PassRateOption,
    QuietOption,
    RecordToolsOption,
    RepeatOption,
    RerunFailedOption,
    ResumeOption,
    ShardOption,
    StrictOption,
    TargetOption,
    TurnTimeoutOption,
    VerboseOption,
    WorkersOption,
)

plain_argument_help()

app = typer.Typer(
    name="evalcli",
    help="Run multi-turn evals of LLM agents from YAML datasets; verdicts, SQLite history and CI exit codes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,
)
app.add_typer(cache_app, name="cache", short_help="The judge and simulator response cache (clear, info).")
app.add_typer(mocks_app, name="mocks", short_help="Tool mocks made from recordings (from-tape).")

ScorersOption = Annotated[Optional[Path], typer.Option(metavar="PATH", help="scorers.yaml registry (default: next to the "
                                                                            "dataset, else in the current directory).")]
ConcurrencyOption = Annotated[Optional[int], typer.Option(min=1, metavar="N", help="Conversations in flight (default: the "
                                                                                   "dataset's 'concurrency', else 4).")]
JudgeConcurrencyOption = Annotated[int, typer.Option(min=1, metavar="N", help="Judge calls in flight.")]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"evalcli {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Run multi-turn evals of LLM agents from YAML datasets; verdicts, SQLite history and CI exit codes."""


@app.command(short_help="Run datasets against their agents; print, store, exit with a CI code.")
def run(
    datasets: DatasetsArgument,
    db: DbOption = DEFAULT_DB,
    scorers: ScorersOption = None,
    json_out: JsonOption = None,
    junit: JunitOption = None,
    markdown: MarkdownOption = None,
    html: HtmlOption = None,
    concurrency: ConcurrencyOption = None,
    judge_concurrency: JudgeConcurrencyOption = 8,
    no_cache: NoCacheOption = False,
    strict: StrictOption = False,
    max_errors: MaxErrorsOption = None,
    filter_: FilterOption = None,
    limit: LimitOption = None,
    shard: ShardOption = None,
    workers: WorkersOption = None,
    repeat: RepeatOption = None,
    pass_rate: PassRateOption = None,
    turn_timeout: TurnTimeoutOption = None,
    max_cost: MaxCostOption = None,
    max_tokens: MaxTokensOption = None,
    resume: ResumeOption = None,
    rerun_failed: RerunFailedOption = None,
    target: TargetOption = None,
    record_tools: RecordToolsOption = None,
    hermetic: HermeticOption = False,
    otel_endpoint: OtelEndpointOption = None,
    otel_file: OtelFileOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    """Run datasets against their agents, print the verdict, store everything, exit with a CI code."""
    with user_errors(debug):
        from .progress import CliEvents
        from .run import RunRequest, run_command

        request = RunRequest(datasets=datasets, db=db, scorers=scorers, json_out=json_out, junit=junit,
                             markdown=markdown, html=html, concurrency=concurrency,
                             judge_concurrency=judge_concurrency, use_cache=not no_cache, strict=strict,
                             max_errors=max_errors, filter=filter_, limit=limit, shard=shard, repeat=repeat,
                             workers=workers,
                             pass_rate=pass_rate, turn_timeout=turn_timeout, resume=resume, rerun_failed=rerun_failed, quiet=quiet,
                             verbose=verbose, targets=list(target or []), max_cost=max_cost, max_tokens=max_tokens,
                             record_tools=record_tools, hermetic=hermetic, otel_endpoint=otel_endpoint,
                             otel_file=otel_file)
        with quiet_target_output(quiet):  # the agent's own log lines do not pass through --quiet
            events = CliEvents(quiet)
            try:
                code = run_command(request, events, out=lambda: make_console(stderr=json_out == "-"))
            finally:
                events.close()
    raise typer.Exit(code)


@app.command(short_help="Measure each labelled scorer (judges above all) against the labels; exit 1 below "
                        "--min-agreement.")
def calibrate(
    datasets: Annotated[list[Path], typer.Argument(metavar="DATASET", show_default=False,
                                                   help="Datasets whose items carry labels: {SCORER_ID: pass|fail|0..1}.")],
    scorer: Annotated[Optional[list[str]], typer.Option("--scorer", metavar="ID", help="Calibrate this gate or scorer "
                                                                                       "only (repeatable; default: "
                                                                                       "every labelled one).")] = None,
    min_agreement: Annotated[Optional[float], typer.Option(min=0, max=1, metavar="X",
                                                           help="Exit 1 when a scorer's accuracy is below X (0 to "
                                                                "1).")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Write the measurements as JSON to "
                                                                                   "PATH ('-' for stdout).")] = None,
    db: DbOption = DEFAULT_DB,
    scorers: ScorersOption = None,
    concurrency: ConcurrencyOption = None,
    judge_concurrency: JudgeConcurrencyOption = 8,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ask the judges again instead of reusing cached "
                                                              "replies.")] = False,
    labels_from_db: Annotated[bool, typer.Option("--labels-from-db", help="Also use the labels made in 'evalcli "
                                                                          "view' and stored in --db (newest wins over "
                                                                          "the dataset's own).")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
) -> None:
    """Run the labelled scorers on the labelled conversations (recorded transcripts as they are, other items against
    the target) and measure each against its labels: accuracy, Cohen's kappa and the confusion matrix (binary
    labels), mean absolute error (scale labels), a panel's Fleiss' kappa, and every disagreement with the
    scorer's reason. Stored as a run and in the calibrations table."""
    with user_errors(debug):
        from .calibrate import CalibrateRequest, calibrate_command
        from .progress import CliEvents

        request = CalibrateRequest(datasets=datasets, db=db, scorer_ids=list(scorer or []), min_agreement=min_agreement,
                                   scorers=scorers, json_out=json_out, concurrency=concurrency,
                                   judge_concurrency=judge_concurrency, use_cache=not no_cache,
                                   labels_from_db=labels_from_db)
        events = CliEvents(quiet=False)
        try:
            code = calibrate_command(request, events, out=make_console(stderr=json_out == "-"))
        finally:
            events.close()
    raise typer.Exit(code)


JsonListOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("judges", short_help="List each LLM judge of datasets, its latest calibration and whether it may gate.")
def list_judges(datasets: Annotated[list[Path], typer.Argument(metavar="DATASET", show_default=False,
                                                               help="Dataset files whose judges to list.")],
                db: DbOption = DEFAULT_DB, scorers: ScorersOption = None, as_json: JsonListOption = False,
                debug: DebugOption = False) -> None:
    """List every LLM judge of the datasets with the latest calibration of its exact configuration in --db, and
    whether it may gate: a gate with calibrated: {...} only when that calibration meets it."""
    with user_errors(debug):
        from .judges import judges_listing

        _print_listing(judges_listing(datasets, scorers, db, as_json))


@app.command(short_help="Check datasets, their registry, agent and scorers without running anything.")
def validate(
    datasets: Annotated[list[Path], typer.Argument(metavar="DATASET", show_default=False,
                                                   help="Dataset files to check.")],
    scorers: Annotated[Optional[Path], typer.Option(metavar="PATH", help="scorers.yaml registry.")] = None,
    debug: DebugOption = False,
) -> None:
    """Check datasets (and their registry, target and custom scorers) without running anything."""
    with user_errors(debug):
        from .validate import validate_command

        lines, warnings = validate_command(datasets, scorers)
        for line in lines:
            make_console().print(line, markup=False, soft_wrap=True)
        for warning in warnings:
            make_console(stderr=True).print("warning: " + warning, style="yellow", markup=False, soft_wrap=True)


@app.command("scorers", short_help="List registered scorers and every scorer kind installed, with its arguments.")
def list_scorers(
    scorers: Annotated[Optional[Path], typer.Option(metavar="PATH", help="scorers.yaml registry (default: "
                                                                         "./scorers.yaml).")] = None,
    as_json: JsonListOption = False,
    debug: DebugOption = False,
) -> None:
    """List registered scorers, then every scorer kind (checks, judges, custom) with its arguments and the package
    that declares it: evalcli's own, and those of installed packages (docs/extending.md)."""
    with user_errors(debug):
        from .commands import scorers_listing

        _print_listing(scorers_listing(scorers, as_json))


@app.command("adapters", short_help="List the adapters installed (evalcli's own and those of packages).")
def list_adapters(as_json: JsonListOption = False, debug: DebugOption = False) -> None:
    """List every adapter installed: how a target of it is written, what it runs, and the package that declares it
    (evalcli's own, and those of installed packages: docs/extending.md)."""
    with user_errors(debug):
        from .commands import adapters_listing

        _print_listing(adapters_listing(as_json))


def _print_listing(listing: object) -> None:
    """A listing's JSON text as it is, or its table on the console."""
    if isinstance(listing, str):
        sys.stdout.write(listing + "\n")
    else:
        make_console().print(listing)


@app.command(short_help="Print a JSON Schema of the dataset format (for editors).")
def schema(debug: DebugOption = False) -> None:
    """Print a JSON Schema of the dataset format (for editors: validation and completion of YAML)."""
    with user_errors(debug):
        import json

        from ..dataset.scaffold import dataset_schema

        sys.stdout.write(json.dumps(dataset_schema(), indent=2) + "\n")


@app.command(short_help="Write a starter dataset, registry and agent here (existing files are kept).")
def init(
    force: Annotated[bool, typer.Option(help="Overwrite existing files.")] = False,
    debug: DebugOption = False,
) -> None:
    """Write a starter dataset (eval.yaml), scorers.yaml, an example agent and the JSON Schema here."""
    with user_errors(debug):
        from ..dataset.scaffold import init_project

        written, skipped = init_project(Path.cwd(), force)
        for path in written:
            make_console().print(f"wrote {path.name}", markup=False)
        for path in skipped:
            make_console().print(f"kept {path.name} (it exists; --force overwrites it)", markup=False)
        make_console().print("next: evalcli run eval.yaml", markup=False)


HistoryDbOption = Annotated[Path, typer.Option("--db", metavar="PATH", help="SQLite file of runs (must exist).")]
RunIdArgument = Annotated[str, typer.Argument(metavar="RUN_ID", show_default=False,
                                              help="A run id, a unique prefix of one, or 'latest'.")]


@app.command("runs", short_help="List recent runs, newest first.")
def list_runs(
    db: HistoryDbOption = DEFAULT_DB,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="Show at most N runs.")] = 20,
    debug: DebugOption = False,
) -> None:
    """List recent runs, newest first: when, dataset, target, verdict, items, scores, LLM use."""
    with user_errors(debug):
        from ..reports import runs_table
        from ..store import open_existing

        store = open_existing(db)
        try:
            make_console().print(runs_table(store, limit))
        finally:
            store.close()


@app.command(short_help="Show a stored run, or one conversation of it turn by turn.")
def show(
    run_id: RunIdArgument,
    item: Annotated[Optional[str], typer.Argument(metavar="ITEM", show_default=False,
                                                  help="An item id or index: show that conversation turn by "
                                                       "turn.")] = None,
    db: HistoryDbOption = DEFAULT_DB,
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Write the run's (or the "
                                                                                   "conversation's) JSON to PATH "
                                                                                   "('-' for stdout).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every conversation.")] = False,
    play: Annotated[Optional[int], typer.Option("--play", metavar="N", min=1,
                                                help="With ITEM of a --repeat run: show only its play N (from 1; "
                                                     "without it every play is shown, failing ones first).")] = None,
    debug: DebugOption = False,
) -> None:
    """Show a stored run as 'evalcli run' prints it, or one conversation turn by turn (with ITEM)."""
    with user_errors(debug):
        from .commands import show_item, show_run

        out = make_console(stderr=json_out == "-")
        if item is None and play is not None:
            from ..errors import UsageError

            raise UsageError("--play N shows one play of one conversation: name the conversation",
                             f"evalcli show {run_id} ITEM --play {play}")
        if item is None:
            show_run(db, run_id, json_out, verbose, out=out)
        else:
            show_item(db, run_id, item, json_out, out=out, play=play)


AlphaOption = Annotated[Optional[float], typer.Option(metavar="X", help="Exit 1 only when B is worse than A (with "
                                                                        "compare: a later run than the first) beyond the "
                                                                        "noise: the pass/fail change is significant "
                                                                        "(McNemar p < X, more conversations lost than "
                                                                        "gained) or a gate's 95% interval lies below "
                                                                        "0.")]
DetectOption = Annotated[Optional[float], typer.Option(metavar="D", help="Also say how many conversations detecting "
                                                                         "a change in pass rate of D (0.05 = 5 "
                                                                         "points) would take.")]


@app.command(short_help="Compare run B with run A; exit 1 when B is worse.")
def diff(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", show_default=False,
                                         help="The baseline run id (a prefix, or 'latest').")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", show_default=False, help="The run compared with it.")],
    db: HistoryDbOption = DEFAULT_DB,
    tolerance: Annotated[float, typer.Option(min=0, metavar="X", help="Drops of averages up to this much are not "
                                                                      "regressions.")] = 0.0,
    allow_different: Annotated[bool, typer.Option("--allow-different", help="Compare runs of different "
                                                                           "datasets.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show unchanged conversations too.")] = False,
    alpha: AlphaOption = None,
    detect: DetectOption = None,
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Write the diff and its "
                                                                                   "statistics as JSON to PATH "
                                                                                   "('-' for stdout).")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", metavar="PATH", help="Write the diff and its "
                                                                                       "statistics as Markdown (a "
                                                                                       "PR comment).")] = None,
    debug: DebugOption = False,
) -> None:
    """Compare run B with run A, with paired statistics over the conversations both have; exit 1 when B is worse
    beyond --tolerance (regressions are named), or with --alpha only when B is worse beyond the noise."""
    with user_errors(debug):
        from .commands import diff_command

        code = diff_command(db, run_a, run_b, tolerance, verbose, out=make_console(stderr=json_out == "-"),
                            allow_different=allow_different, alpha=alpha, detect=detect, json_out=json_out,
                            markdown=markdown)
    raise typer.Exit(code)


@app.command(short_help="Stored runs of one dataset side by side (e.g. one per target).")
def compare(
    runs: Annotated[list[str], typer.Argument(metavar="RUN", show_default=False,
                                              help="Two or more run ids (prefixes, or 'latest').")],
    db: HistoryDbOption = DEFAULT_DB,
    html: Annotated[Optional[Path], typer.Option("--html", metavar="PATH", help="Also write the comparison as one "
                                                                               "self-contained HTML page, with each "
                                                                               "conversation's transcripts side by "
                                                                               "side.")] = None,
    allow_different: Annotated[bool, typer.Option("--allow-different", help="Compare runs of different "
                                                                           "datasets.")] = False,
    alpha: AlphaOption = None,
    detect: DetectOption = None,
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Write the comparison and its "
                                                                                   "statistics as JSON to PATH "
                                                                                   "('-' for stdout).")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", metavar="PATH", help="Write the comparison and "
                                                                                       "its statistics as "
                                                                                       "Markdown.")] = None,
) -> None:
    """Stored runs of one dataset side by side: a row per scorer and gate, a column per run (means, pass rates,
    verdict, errors, tokens, cost, wall time), then per conversation the gates that differ, and each later run's
    paired statistics against the first. Exit 0; with --alpha, 1 when a later run is worse beyond the noise."""
    with user_errors():
        from .commands import compare_command

        code = compare_command(db, runs, html, out=make_console(stderr=json_out == "-"),
                               allow_different=allow_different, alpha=alpha, detect=detect, json_out=json_out,
                               markdown=markdown)
    raise typer.Exit(code)


@app.command(short_help="Write a self-contained HTML report of a stored run (charts, transcripts, baseline).")
def report(
    run_id: RunIdArgument,
    html: Annotated[Path, typer.Option("--html", metavar="PATH", help="Write the HTML report to PATH.")],
    baseline: Annotated[Optional[str], typer.Option(metavar="RUN_ID", help="Show regressions and improvements "
                                                                          "against this run (as 'evalcli diff').")] = None,
    db: HistoryDbOption = DEFAULT_DB,
    tolerance: Annotated[float, typer.Option(min=0, metavar="X", help="With --baseline: drops up to this much are "
                                                                      "not regressions.")] = 0.0,
    allow_different: Annotated[bool, typer.Option("--allow-different", help="Allow a baseline of another "
                                                                           "dataset.")] = False,
    debug: DebugOption = False,
) -> None:
    """Write one self-contained HTML file of a stored run: header, results, charts, a filterable list of
    conversations with their transcripts, and with --baseline the regressions against that run."""
    with user_errors(debug):
        from .commands import report_command

        written = report_command(db, run_id, html, baseline, tolerance, allow_different=allow_different)
        make_console().print(written.line(), markup=False, soft_wrap=True)


@app.command(short_help="Merge the shard runs of each dataset into one run.")
def merge(
    databases: Annotated[list[Path], typer.Argument(metavar="DB", show_default=False,
                                                    help="Databases of the shards ('evalcli run --shard I/N').")],
    out: Annotated[Path, typer.Option("--out", metavar="PATH", help="Database the merged run is written to "
                                                                    "(created if missing).")],
    run: Annotated[Optional[list[str]], typer.Option("--run", metavar="RUN_ID", help="Merge these run ids "
                                                                                     "(repeatable; default: the "
                                                                                     "latest run of each dataset in "
                                                                                     "each database).")] = None,
    debug: DebugOption = False,
) -> None:
    """Merge the shard runs of each dataset into one run, recomputed as if unsharded; exits with their code."""
    with user_errors(debug):
        from ..evaluate import check_outputs
        from ..reports import merge_lines
        from ..store.merge import merge_databases, merged_exit_code

        check_outputs([], db=("--out", out))
        results = merge_databases(databases, out, run)
        console = make_console()
        for line in (line for result in results for line in merge_lines(result)):
            console.print(line, soft_wrap=True)
    raise typer.Exit(merged_exit_code(results))


from .review import labels_app, view  # noqa: E402 - declared there to keep this file readable

app.command(short_help="Browse runs, transcripts and comparisons in a local web app; label conversations.")(view)
app.add_typer(labels_app, name="labels", short_help="Labels made in 'evalcli view' (export).")


def invoked(argv: list[str]) -> typer.Typer:
    """The app as typer builds it for ``argv``: with only the command (or group of commands) ``argv`` names, when it
    names one, else whole. typer builds every command it holds before it runs one, each parameter's annotations
    evaluated: building the 18 unused ones cost every run 0.03-0.04 s (docs/performance.md "Start-up and
    finish"). The usage, help and errors of that command are the same: its parent is the same group, callback and
    name."""
    import copy

    import typer.main

    if not argv or argv[0].startswith("-"):
        return app
    commands = [c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__ if c.callback else "")) == argv[0]]
    groups = [g for g in app.registered_groups if g.name == argv[0]]
    if len(commands) + len(groups) != 1:
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def main() -> None:
    """Console-script entry point: every byte it prints is redacted (docs/secrets.md)."""
    redact_terminal()
    if sys.argv[1:2] == ["run"]:  # nothing collected until run_command freezes what it loaded (docs/performance.md)
        gc.disable()
    invoked(sys.argv[1:])()


if __name__ == "__main__":  # pragma: no cover
    main()
