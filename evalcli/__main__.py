"""``python -m evalcli`` runs the CLI."""

from .cli import main

main()
