"""The generated parts of the docs, from the code: every command and option (walking the typer app's command
tree), the exit codes (``evalcli.errors.ExitCode``), the scorer kinds (``evalcli.scorers.docs``) and every key of a
dataset file (``evalcli.dataset.scaffold.key_reference``, from the models that validate datasets).

    python docs/gen_reference.py --write    # refresh the pages (``make docs`` runs this, then mkdocs)
    python docs/gen_reference.py --check    # exit 1, naming each stale page, when one differs from the code

Each generated part sits between two markers in its page, so the text around it is written by hand.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this tree's evalcli, wherever the script is run from

import typer  # noqa: E402

from evalcli.dataset.scaffold import key_reference  # noqa: E402
from evalcli.errors import EXIT_PRECEDENCE, ExitCode  # noqa: E402
from evalcli.scorers import docs as scorer_docs  # noqa: E402

START = "<!-- generated:{name}:start (python docs/gen_reference.py --write; do not edit) -->"
END = "<!-- generated:{name}:end -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _paragraphs(text: str | None) -> str:
    """A docstring as Markdown paragraphs: lines of one paragraph joined, blank lines kept."""
    blocks = re.split(r"\n\s*\n", inspect.cleandoc(text or ""))
    return "\n\n".join(" ".join(block.split()) for block in blocks if block.strip())


def _commands(command: Any, ctx: typer.Context) -> Iterator[tuple[Any, typer.Context]]:
    """Every command under ``command`` (itself first), depth first in the order they were added. Typer's click
    commands are walked by what they have (``commands`` for a group), whichever click typer uses."""
    yield command, ctx
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, typer.Context(sub, info_name=name, parent=ctx))


def cli_reference() -> str:
    """Each command: its usage, what it does, and a table of its arguments and options with their defaults."""
    from evalcli.cli.app import app

    root = typer.main.get_command(app)
    lines: list[str] = []
    for command, ctx in _commands(root, typer.Context(root, info_name="evalcli")):
        path = ctx.command_path
        lines += [f"### `{path}`", "", _paragraphs(command.help), "", "```text",
                  f"{path} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
        if getattr(command, "commands", None):
            lines += ["| command | what it does |", "|---|---|"]
            for name, sub in command.commands.items():
                anchor = f"{path} {name}".replace(" ", "-")
                lines.append(f"| [`{name}`](#{anchor}) | {_cell(sub.get_short_help_str(limit=200))} |")
            lines.append("")
        records = [param.get_help_record(ctx) for param in command.params]
        rows = [f"| `{names}` | {_cell(help_text)} |" for names, help_text in (r for r in records if r)]
        if rows:
            lines += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    return "\n".join(lines).rstrip() + "\n"


def exit_code_table() -> str:
    """The exit codes of ``evalcli run`` with their meaning, and which wins when several apply."""
    rows = [f"| {int(code)} | {_cell(code.meaning)} |" for code in ExitCode]
    order = ", then ".join(str(int(code)) for code in EXIT_PRECEDENCE)
    return "\n".join(["| code | meaning |", "|---|---|", *rows, "", f"When several apply, the first of {order} wins."]) + "\n"


PARTS: dict[str, tuple[str, Callable[[], str]]] = {
    "cli": ("docs/reference/cli.md", cli_reference),
    "exit-codes": ("docs/reference/exit-codes.md", exit_code_table),
    "dataset-keys": ("docs/datasets.md", key_reference),
}
"""Each generated part: the page that holds it and the function that writes it."""


def with_part(text: str, name: str, body: str) -> str:
    """``text`` with ``body`` between the part's markers, which must be there once each, in order."""
    start, end = START.format(name=name), END.format(name=name)
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"the page must hold the markers {start!r} and {end!r} once each, in that order")
    before, rest = text.split(start)
    _, after = rest.split(end)
    return f"{before}{start}\n{body.rstrip()}\n{end}{after}"


def fresh_pages(root: Path = ROOT) -> dict[Path, tuple[str, str]]:
    """Each page with a generated part: (its text now, its text as the code says it should be)."""
    current: dict[Path, str] = {}
    fresh: dict[Path, str] = {}
    for name, (page, make) in PARTS.items():
        path = root / page
        current.setdefault(path, path.read_text(encoding="utf-8"))
        fresh[path] = with_part(fresh.get(path, current[path]), name, make())
    scorers = root / scorer_docs.PAGE
    current[scorers] = scorers.read_text(encoding="utf-8")
    fresh[scorers] = scorer_docs.with_table(current[scorers])
    return {path: (current[path], fresh[path]) for path in current}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/gen_reference.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="refresh the generated parts of the pages")
    action.add_argument("--check", action="store_true", help="exit 1 when a page's generated part is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository whose docs/ to refresh or check")
    args = parser.parse_args(argv)
    stale = {path: fresh for path, (current, fresh) in fresh_pages(args.root).items() if current != fresh}
    if args.check:
        for path in stale:
            print(f"{path.relative_to(args.root)}: its generated part is out of date; run python "
                  f"docs/gen_reference.py --write (make docs does)", file=sys.stderr)
        return 1 if stale else 0
    for path, fresh in stale.items():
        path.write_text(fresh, encoding="utf-8")
        print(f"wrote {path.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
