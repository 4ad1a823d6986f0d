"""``evalcli cache``: the judge and simulator response cache (clear, info)."""

from __future__ import annotations

import contextlib

import typer

from .console import make_console, user_errors
from .run_flags import DEFAULT_DB, HELP_OPTIONS, DbOption, DebugOption

cache_app = typer.Typer(help="The judge and simulator response cache.", no_args_is_help=True,
                        context_settings=HELP_OPTIONS)


@cache_app.command("clear", short_help="Delete every cached reply in the database.")
def cache_clear(db: DbOption = DEFAULT_DB, debug: DebugOption = False) -> None:
    """Delete every cached judge and simulator reply in the database."""
    with user_errors(debug):
        from ..store import open_cache

        with contextlib.closing(open_cache(db, write=True)) as cache:
            removed = cache.clear()
        make_console().print(f"removed {removed} cached repl{'y' if removed == 1 else 'ies'} from {db}", markup=False)


@cache_app.command("info", short_help="How many replies are cached, and how often they were reused.")
def cache_info(db: DbOption = DEFAULT_DB, debug: DebugOption = False) -> None:
    """How many judge and simulator replies are cached, and how often they were reused."""
    with user_errors(debug):
        from ..store import open_cache

        with contextlib.closing(open_cache(db, write=False)) as cache:
            stats = cache.stats()
        make_console().print(f"{stats['entries']} cached repl{'y' if stats['entries'] == 1 else 'ies'}, reused "
                         f"{stats['hits']} time{'' if stats['hits'] == 1 else 's'} ({db})", markup=False)
