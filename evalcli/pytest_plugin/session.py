"""What one pytest session knows about evalcli datasets, and shares with their nodes (``DatasetSession``): how it
plays them (its ``Settings``, read from its options), the datasets it collected, the runs it played, its event loop,
and how an item fails (``EvalFailed``).

Nothing here imports more than pytest and the standard library, and ``settings`` (whose dataclasses take longer to
make than all the rest) only once the settings are read: importing the plugin costs about 1 ms.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..dbname import DEFAULT_DATABASE
from ..words import inert

if TYPE_CHECKING:
    import asyncio

    from .settings import RunLine, Settings

RESERVED_MARKERS = frozenset({"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings"})
"""pytest's own markers: a tag with one of these names matches ``-k`` but is not applied as a marker."""
LOCKS = "evalcli-pytest"
"""The folder (in the system's temporary folder) where pytest-xdist workers agree on who plays a dataset."""


class EvalFailed(Exception):
    """A conversation or a verdict that failed: ``text`` says why (no traceback: it is not a bug), ``message`` in
    one line (the short summary's and JUnit's message); neither holds a terminal control character that an agent, a
    tool or a scorer wrote (docs/history.md#what-a-terminal-is-sent)."""

    def __init__(self, text: str, message: str | None = None) -> None:
        text, message = inert(text), None if message is None else inert(message)
        super().__init__(text)
        self.text = text
        self.message = message or text.splitlines()[0]


class DatasetSession:
    """What one pytest session knows about evalcli datasets, and what their nodes use of it (the plugin's hooks,
    ``DatasetPlugin``, keep the rest)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.here = config.invocation_params.dir
        self._settings: Settings | None = None
        self.invalid: set[str] = set()
        """Node ids of the dataset files that did not validate (each one collection error)."""
        self.datasets: list[Path] = []
        """Every dataset file collected, in order (an HTML report per dataset is named after them). pytest makes a
        node for each file of a folder it enters and keeps those asked for: only these are collected."""
        self.markers: set[str] = set()
        self._taking_arguments: set[str] | None = None
        self.runs: list[RunLine] = []
        self._loop: asyncio.Runner | None = None

    @property
    def settings(self) -> Settings:
        """How datasets are played (read from the options when first needed)."""
        if self._settings is None:
            self._settings = settings_of(self.config, self.here)
        return self._settings

    def shown(self, path: Path) -> str:
        """A path as the user would type it: relative to the current directory when inside it."""
        return shown_path(path, self.here)

    def marker(self, tag: str) -> bool:
        """Register ``tag`` as a marker (so ``--strict-markers`` passes); whether it can be one. A marker that takes
        arguments (``skip(reason=None)``, ``timeout(timeout)`` of pytest-timeout...) means something to pytest or a
        plugin: a tag of that name is only a keyword for ``-k``."""
        if self._taking_arguments is None:
            lines = [line.split(":", 1)[0] for line in self.config.getini("markers")]
            self._taking_arguments = {line.split("(", 1)[0].strip() for line in lines if "(" in line}
        if (tag in RESERVED_MARKERS or tag in self._taking_arguments or not tag or tag[0] == "_"
                or any(c in tag for c in ":( \t\n")):
            return False
        if tag not in self.markers:
            self.markers.add(tag)
            self.config.addinivalue_line("markers", f"{tag}: evalcli dataset tag")
        return True

    # the session's event loop: frameworks that keep clients per process stay bound to a live loop

    def loop(self) -> asyncio.Runner:
        if self._loop is None:
            import asyncio

            # a loop of our own, never set as the thread's current loop: the session's other tests do not see it
            self._loop = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        return self._loop

    def lock_folder(self) -> Path | None:
        """Under pytest-xdist, where this test run's workers agree on who plays a dataset (else ``None``)."""
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is None:
            return None
        return Path(tempfile.gettempdir()) / LOCKS / str(workerinput["testrunuid"])

    def close_loop(self) -> None:
        """Close the session's event loop, if a dataset was played on it."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def settings_of(config: pytest.Config, here: Path) -> Settings:
    """The options, paths resolved from ``here`` and checked (``pytest.UsageError``, before anything runs)."""
    from .settings import Settings

    db_option = config.getoption("evalcli_db")
    db = absolute_path(here / db_option) if db_option else here / DEFAULT_DATABASE
    if db_option and db.is_dir():
        raise pytest.UsageError(f"--evalcli-db {db_option} is a directory; give a database file, "
                                f"e.g. --evalcli-db {Path(db_option) / 'evalcli.db'}")
    if db_option and not db.parent.is_dir():
        raise pytest.UsageError(f"--evalcli-db {db_option}: the folder {db.parent} does not exist; create it first")
    if db_option and not os.access(db if db.exists() else db.parent, os.W_OK):
        raise pytest.UsageError(f"--evalcli-db {db_option} cannot be written (permission denied)")
    html_option = config.getoption("evalcli_html")
    html = absolute_path(here / html_option) if html_option else None
    if html is not None and html.is_dir():
        raise pytest.UsageError(f"--evalcli-html {html_option} is a directory; give a file, e.g. report.html")
    return Settings(db, html, bool(config.getoption("evalcli_strict")), not config.getoption("evalcli_no_cache"),
                    shown_path(db, here))


def absolute_path(path: Path) -> Path:
    return Path(os.path.abspath(path))


def shown_path(path: Path, here: Path) -> str:
    """A path relative to ``here`` when inside it, else absolute."""
    absolute = absolute_path(path)
    return os.path.relpath(absolute, here) if here in absolute.parents else str(absolute)
