"""``evalcli mocks``: tool mocks made from what really happened (docs/hermetic.md, "Mocks from recordings")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .console import make_console, user_errors
from .run_flags import HELP_OPTIONS, DebugOption

mocks_app = typer.Typer(help="Tool mocks made from what really happened (docs/hermetic.md).", no_args_is_help=True,
                        context_settings=HELP_OPTIONS)


@mocks_app.command("from-tape", short_help="Write the tools: block that answers a tape's recorded calls.")
def mocks_from_tape(
    tape: Annotated[Optional[Path], typer.Argument(metavar="TAPE", show_default=False,
                                                   help="A tape written by --record-tools.")] = None,
    from_traces: Annotated[Optional[Path], typer.Option("--from-traces", metavar="FILE",
                                                        help="OTLP/JSON traces whose tool spans to answer too.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE",
                                                   help="Write the YAML there (default: stdout).")] = None,
    debug: DebugOption = False,
) -> None:
    """Write the tools: YAML (mocks by tool, 'when' the recorded arguments) that answers every recorded call, for a
    person to edit and paste into a dataset (docs/hermetic.md, "Mocks from recordings")."""
    with user_errors(debug):
        from .commands import mocks_command

        text = mocks_command(tape, from_traces)
        if output is None:
            sys.stdout.write(text)
        else:
            output.write_text(text, encoding="utf-8")
            make_console(stderr=True).print(f"wrote {output}", markup=False)
