"""The ``evalcli`` command (docs/reference/exit-codes.md, docs/reference/cli.md): the typer app (``app``), each command's plain
function (``run``,
``commands``), output planning (``outputs``) and the console (``console``). It parses, calls the library,
prints, and turns user errors into exit codes in one place."""

from __future__ import annotations

from .app import app, main

__all__ = ["app", "main"]
