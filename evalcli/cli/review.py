"""``evalcli view`` and ``evalcli labels export``: the history in a browser and the labels made there (docs/view.md).
Declared here and added to the app by ``app.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .console import user_errors
from .run_flags import HELP_OPTIONS, DebugOption

ViewDbOption = Annotated[Path, typer.Option("--db", metavar="PATH", help="SQLite file of runs (must exist).")]
labels_app = typer.Typer(help="Labels people made in 'evalcli view'.", no_args_is_help=True, context_settings=HELP_OPTIONS)


def view(
    db: ViewDbOption = Path("evalcli.db"),
    port: Annotated[int, typer.Option(min=0, max=65535, metavar="N", help="Port to listen on (0: any free one).")] = 8765,
    host: Annotated[str, typer.Option(metavar="HOST", help="Address to listen on; other than loopback it needs "
                                                           "--token.")] = "127.0.0.1",
    token: Annotated[Optional[str], typer.Option(metavar="TOKEN", envvar="EVALCLI_VIEW_TOKEN",
                                                 help="Every request must carry it (the URL's token query "
                                                      "parameter, a cookie, or 'Authorization: Bearer'); needed "
                                                      "with --host.")] = None,
    reviewer: Annotated[Optional[str], typer.Option(metavar="NAME", help="Who the labels made here are by (default: "
                                                                         "your login name).")] = None,
    debug: DebugOption = False,
) -> None:
    """Serve the run history as a local web app: runs, transcripts, live runs, two runs side by side, and human
    review with the keyboard. Ctrl-C stops it."""
    with user_errors(debug):
        from ..view import ViewSettings, check_database, check_settings, serve

        settings = ViewSettings(db, host, port, token if token and token.strip() else None, reviewer or _login())
        check_settings(settings)
        applied = check_database(db)
        if applied:
            print(f"migrated {db} to this evalcli ({', '.join(applied)})", flush=True)

        def started(url: str) -> None:
            hint = " (open it with ?token=YOUR_TOKEN)" if settings.token else ""
            print(f"evalcli view: {db} at {url}{hint}; Ctrl-C stops", flush=True)

        try:
            import asyncio  # here: `evalcli validate` and --help never import it (tests/test_startup.py)

            asyncio.run(serve(settings, started))
        except KeyboardInterrupt:
            pass
    raise typer.Exit(0)


def _login() -> str:
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


@labels_app.command("export", short_help="Write the labels as YAML (the labels: a dataset item takes).")
def labels_export(
    db: ViewDbOption = Path("evalcli.db"),
    dataset: Annotated[Optional[str], typer.Option(metavar="NAME", help="Only this dataset's (its stable name, as "
                                                                        "'evalcli runs' shows it).")] = None,
    run_id: Annotated[Optional[str], typer.Option("--run", metavar="RUN_ID", help="Only the conversations of this "
                                                                                  "run.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", metavar="PATH", help="Write to PATH (default: "
                                                                                    "stdout).")] = None,
    debug: DebugOption = False,
) -> None:
    """Write every conversation's newest labels as YAML: per dataset and conversation its id, identity,
    labels: {SCORER_ID: pass|fail|score}, its own review and who labelled it when, with the note."""
    with user_errors(debug):
        from ..evaluate import check_outputs
        from ..store import open_existing
        from ..store.labels import export_labels

        check_outputs([("--out", out)] if out is not None else [], reads=db)
        store = open_existing(db)
        try:
            text = export_labels(store, dataset=dataset, run_id=store.require_run(run_id)["id"] if run_id else None)
        finally:
            store.close()
        if out is None:
            sys.stdout.write(text)
        else:
            out.write_text(text, encoding="utf-8")
