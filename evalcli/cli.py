"""The ``evalcli`` command: parse, call the library, print, map errors to exit codes.

Heavy imports (pydantic, yaml, sqlite, litellm) happen inside commands, so ``evalcli --help`` is quick.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from .result import ItemResult

app = typer.Typer(
    name="evalcli",
    help="Run multi-turn evals of LLM agents from YAML datasets; verdicts, SQLite history and CI exit codes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
cache_app = typer.Typer(help="The judge response cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")

DbOption = Annotated[Path, typer.Option("--db", help="SQLite file of runs (created if missing).")]
DEFAULT_DB = Path("evalcli.db")
INTERNAL_ERROR = 70


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal:
        # a log or a pipe has no width to fit: keep rows whole instead of 80 columns
        console = Console(stderr=stderr, highlight=False, soft_wrap=False, width=160)
    return console


@contextlib.contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    """The one place user errors become messages and exit codes; bugs keep their traceback behind --debug."""
    from .errors import EvalcliError

    try:
        yield
    except EvalcliError as exc:
        err = _console(stderr=True)
        err.print("error: " + str(exc), style="red", markup=False)
        raise typer.Exit(exc.exit_code) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        if debug:
            raise
        _console(stderr=True).print(f"internal error: {type(exc).__name__}: {exc}\n"
                                    "  this is a bug in evalcli; run again with --debug for the traceback",
                                    style="red", markup=False)
        raise typer.Exit(INTERNAL_ERROR) from None


class CliEvents:
    """Progress bar (only on a terminal) and warnings, on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.err = _console(stderr=True)
        self.quiet = quiet
        self.progress: Any = None
        self.task: Any = None
        self.signals = 0

    def started(self, run_id: str, total: int, done: int) -> None:
        if self.quiet or not self.err.is_terminal:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("conversations"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=self.err, transient=True)
        self.progress.start()
        self.task = self.progress.add_task("run", total=total, completed=done)

    def item_done(self, result: ItemResult) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)

    def warning(self, text: str) -> None:
        self.err.print("warning: " + text, style="yellow", markup=False)

    def stopping(self) -> None:
        self.signals += 1
        text = ("interrupted: finishing conversations in flight (press Ctrl-C again to stop now)..."
                if self.signals == 1 else "stopping now: cancelling conversations in flight...")
        self.err.print(text, style="yellow", markup=False)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


@app.command()
def run(
    datasets: Annotated[list[Path], typer.Argument(help="Dataset files (YAML, or JSONL with a header line).")],
    db: DbOption = DEFAULT_DB,
    scorers: Annotated[Optional[Path], typer.Option(help="scorers.yaml registry (default: next to the dataset, "
                                                         "else in the current directory).")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the JSON result to PATH ('-' for stdout).")] = None,
    junit: Annotated[Optional[Path], typer.Option(help="Write a JUnit XML report to PATH.")] = None,
    markdown: Annotated[Optional[Path], typer.Option(help="Write a Markdown summary to PATH.")] = None,
    concurrency: Annotated[Optional[int], typer.Option(min=1, help="Conversations in flight (default: the "
                                                                   "dataset's 'concurrency', else 4).")] = None,
    judge_concurrency: Annotated[int, typer.Option(min=1, help="Judge calls in flight.")] = 8,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached judge replies.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 when the verdict is 'scored'.")] = False,
    max_errors: Annotated[int, typer.Option(min=0, help="Item errors tolerated before exit code 4.")] = 0,
    filter_: Annotated[Optional[str], typer.Option("--filter", help="Regex searched in each item's id, tags "
                                                                    "and first input.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=0, help="Run at most N items.")] = None,
    shard: Annotated[Optional[str], typer.Option(help="Run shard I of N (I/N), a stable split by item id.")] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Run each conversation N times (scores averaged).")] = 1,
    turn_timeout: Annotated[Optional[float], typer.Option(min=0.001, help="Seconds one target call may take.")] = None,
    resume: Annotated[Optional[str], typer.Option(help="Continue this interrupted run id.")] = None,
    rerun_failed: Annotated[Optional[str], typer.Option(help="Run only the items that failed or errored in "
                                                              "this run id.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdict line.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every conversation.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
) -> None:
    """Run datasets against their targets, print the verdict, store everything, exit with a CI code."""
    with user_errors(debug):
        from .commands import RunRequest, run_command

        request = RunRequest(datasets=datasets, db=db, scorers=scorers, json_out=json_out, junit=junit,
                             markdown=markdown, concurrency=concurrency, judge_concurrency=judge_concurrency,
                             use_cache=not no_cache, strict=strict, max_errors=max_errors, filter=filter_,
                             limit=limit, shard=shard, repeat=repeat, turn_timeout=turn_timeout, resume=resume,
                             rerun_failed=rerun_failed, quiet=quiet, verbose=verbose)
        events = CliEvents(quiet)
        try:
            code = run_command(request, events, out=_console(stderr=json_out == "-"))
        finally:
            events.close()
    if _hung_target_threads():
        # a sync target stuck in a call Python cannot cancel (after --turn-timeout or an interrupt) must
        # not hold up the exit: everything is written and reported by now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


def _hung_target_threads() -> bool:
    import threading
    import time

    workers = [t for t in threading.enumerate() if t.name.startswith("evalcli-target")]
    deadline = time.monotonic() + 0.5  # idle workers end at once after the executor's shutdown
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    return any(t.is_alive() for t in workers)


@app.command()
def validate(
    datasets: Annotated[list[Path], typer.Argument(help="Dataset files to check.")],
    scorers: Annotated[Optional[Path], typer.Option(help="scorers.yaml registry.")] = None,
) -> None:
    """Check datasets (and their registry, target and custom scorers) without running anything."""
    with user_errors():
        from .commands import validate_command

        for line in validate_command(datasets, scorers):
            _console().print(line, markup=False)


@app.command("scorers")
def list_scorers(
    scorers: Annotated[Optional[Path], typer.Option(help="scorers.yaml registry (default: ./scorers.yaml).")] = None,
) -> None:
    """List registered scorers and the built-in checks."""
    with user_errors():
        from .commands import scorers_table

        _console().print(scorers_table(scorers))


@app.command()
def schema() -> None:
    """Print a JSON Schema of the dataset format (for editors: validation and completion of YAML)."""
    with user_errors():
        import json

        from .scaffold import dataset_schema

        sys.stdout.write(json.dumps(dataset_schema(), indent=2) + "\n")


@app.command()
def init(
    force: Annotated[bool, typer.Option(help="Overwrite existing files.")] = False,
) -> None:
    """Write a starter dataset (eval.yaml), scorers.yaml, an example agent and the JSON Schema here."""
    with user_errors():
        from .scaffold import init_project

        for path in init_project(Path.cwd(), force):
            _console().print(f"wrote {path.name}", markup=False)
        _console().print("next: evalcli run eval.yaml", markup=False)


@cache_app.command("clear")
def cache_clear(db: DbOption = DEFAULT_DB) -> None:
    """Delete every cached judge reply in the database."""
    with user_errors():
        from .llm import ResponseCache

        with contextlib.closing(ResponseCache(str(db))) as cache:
            removed = cache.clear()
        _console().print(f"removed {removed} cached judge repl{'y' if removed == 1 else 'ies'} from {db}", markup=False)


@cache_app.command("info")
def cache_info(db: DbOption = DEFAULT_DB) -> None:
    """How many judge replies are cached, and how often they were reused."""
    with user_errors():
        from .llm import ResponseCache

        with contextlib.closing(ResponseCache(str(db))) as cache:
            stats = cache.stats()
        _console().print(f"{stats['entries']} cached judge replies, reused {stats['hits']} times ({db})", markup=False)


HistoryDbOption = Annotated[Path, typer.Option("--db", help="SQLite file of runs (must exist).")]


@app.command("runs")
def list_runs(
    db: HistoryDbOption = DEFAULT_DB,
    limit: Annotated[int, typer.Option(min=1, help="Show at most N runs.")] = 20,
) -> None:
    """List recent runs, newest first: when, dataset, target, verdict, items, scores, LLM use."""
    with user_errors():
        from .history import open_existing, runs_table

        store = open_existing(db)
        try:
            _console().print(runs_table(store, limit))
        finally:
            store.close()


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix of one).")],
    db: HistoryDbOption = DEFAULT_DB,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the run's JSON result to PATH "
                                                                   "('-' for stdout).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every conversation.")] = False,
) -> None:
    """Show a stored run as the table 'evalcli run' prints (and its JSON with --json)."""
    with user_errors():
        from .history import show_run

        show_run(db, run_id, json_out, verbose, out=_console(stderr=json_out == "-"))


@app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="The baseline run id (or unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="The run compared with it.")],
    db: HistoryDbOption = DEFAULT_DB,
    tolerance: Annotated[float, typer.Option(min=0, help="Drops of averages up to this much are not "
                                                        "regressions.")] = 0.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show unchanged conversations too.")] = False,
) -> None:
    """Compare run B with run A; exit 1 when B is worse beyond --tolerance (regressions are named)."""
    with user_errors():
        from .diff import diff_command

        code = diff_command(db, run_a, run_b, tolerance, verbose, out=_console())
    raise typer.Exit(code)


@app.command()
def merge(
    databases: Annotated[list[Path], typer.Argument(help="Databases of the shards ('evalcli run --shard I/N').")],
    out: Annotated[Path, typer.Option("--out", help="Database the merged run is written to (created if "
                                                    "missing).")],
    run: Annotated[Optional[list[str]], typer.Option("--run", help="Merge these run ids (repeatable; default: "
                                                                   "the latest run of the dataset in each "
                                                                   "database).")] = None,
) -> None:
    """Merge the shard runs of one dataset into one run, recomputed as if unsharded; exits with its code."""
    with user_errors():
        from .merge import merge_databases, merge_lines

        result = merge_databases(databases, out, run)
        console = _console()
        for line in merge_lines(result):
            console.print(line)
    raise typer.Exit(result.exit_code)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
