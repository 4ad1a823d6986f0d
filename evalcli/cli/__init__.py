"""The ``evalcli`` command (docs/reference/exit-codes.md, docs/reference/cli.md): the typer app (``app``), each command's plain
function (``run``,
``commands``), output planning (``outputs``) and the console (``console``). It parses, calls the library,
prints, and turns user errors into exit codes in one place."""

from __future__ import annotations

import os

from .app import app
from .app import main as _command


def main() -> None:
    """Console-script entry point (``app.main``). litellm, whoever imports it (evalcli, or a target's framework: ADK's
    ``LiteLlm``), reads its bundled price table and never fetches one (docs/models.md), unless
    ``LITELLM_LOCAL_MODEL_COST_MAP`` is set otherwise."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    _command()


__all__ = ["app", "main"]
