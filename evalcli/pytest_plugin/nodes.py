"""The pytest nodes of a dataset: its file, one item per conversation, and its ``::verdict`` item.

The file is validated when collected (one collection error with every problem, file:line:col). Its selected
conversations are played once, together, when the first of its items runs (``play``); each item then reads its
own outcome: a conversation fails when it errored or missed a gate, the verdict item when the run's verdict is
``failed`` (or ``scored``, with ``--evalcli-strict``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .session import DatasetSession, EvalFailed

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from ..dataset import Dataset, Item
    from .play import Played

VERDICT = "verdict"
"""The name of each dataset's verdict item (``datasets/weather.yaml::verdict``)."""


def node_name(item: Item) -> str:
    """A conversation's name under pytest: its id, or for an item without one its identity (``evalcli.identity``: the
    start of its content's digest, ``#2`` for the second identical item), never its position, so ``--lf`` re-plays
    the conversations that failed wherever they moved (give items an ``id`` for names people read). An id holding a
    secret is named with it as ``${NAME}`` (``d.yaml::${TENANT}-refund``), as its identity holds it: pytest writes
    node ids to the terminal, its JUnit XML and ``.pytest_cache``, none of which evalcli redacts."""
    if item.id_given:  # as its identity holds it: a secret in it as ``${NAME}`` (pytest prints and caches node ids)
        return item.identity[len("id:"):] if item.identity.startswith("id:") else item.id
    digest, _, nth = item.identity.partition("#")
    return digest[:10] + (f"#{nth}" if nth else "")


class DatasetFile(pytest.File):
    """An evalcli dataset file, collected as its conversations and its verdict."""

    def __init__(self, *, plugin: DatasetSession, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plugin = plugin
        self.dataset: Dataset | None = None
        self._played: Played | None = None
        self._failure: tuple[str, BaseException] | None = None

    def collect(self) -> Iterator[pytest.Item]:
        from ..dataset import load_dataset
        from ..errors import EvalcliError

        self.plugin.datasets.append(Path(os.path.abspath(self.path)))
        try:
            dataset = load_dataset(self.plugin.shown(self.path))
        except EvalcliError as exc:
            self.plugin.invalid.add(self.nodeid)
            raise self.CollectError(f"invalid evalcli dataset (none of it runs):\n{exc}") from None
        clash = next((item for item in dataset.items if item.id == VERDICT), None)
        if clash is not None:
            self.plugin.invalid.add(self.nodeid)
            raise self.CollectError(f"{dataset.path}: item {clash.index} has the id '{VERDICT}', the name of the "
                                    f"dataset's verdict item under pytest\n  hint: give it another id")
        self.dataset = dataset
        for item in dataset.items:
            yield ConversationItem.from_parent(self, name=node_name(item), conversation=item)
        yield VerdictItem.from_parent(self, name=VERDICT)

    def played(self, asking: pytest.Item) -> Played:
        """The run of this dataset's selected conversations, played when the first of its items asks."""
        if self._played is not None:
            return self._played
        if self._failure is not None:
            first, exc = self._failure
            from ..errors import EvalcliError

            if isinstance(exc, EvalcliError):
                raise exc
            raise EvalFailed(f"the run of {self.plugin.shown(self.path)} failed in {first}: "
                             f"{type(exc).__name__}: {exc}".strip())
        from .play import play

        items = [i for i in self.session.items if i.parent is self]
        wanted = {i.conversation.index for i in items if isinstance(i, ConversationItem)}
        assert self.dataset is not None
        # the verdict alone is the verdict of every conversation; all of them selected is an ordinary full run
        indexes = None if not wanted or len(wanted) == len(self.dataset.items) else wanted
        try:
            self._played = play(self.plugin, self, self.dataset, indexes)
        except Exception as exc:
            self._failure = (asking.nodeid, exc)
            raise
        return self._played


def _repr(item: pytest.Item, excinfo: ExceptionInfo[BaseException], line: int | None) -> str | TerminalRepr | None:
    """The failure of an evaluation as its text, with a one-line message; ``None`` for a bug (pytest's traceback)."""
    from ..errors import EvalcliError
    from ..secrets import redact_text

    if isinstance(excinfo.value, EvalFailed):
        text, message = excinfo.value.text, excinfo.value.message
    elif isinstance(excinfo.value, EvalcliError):
        text = str(excinfo.value)
        message = text.splitlines()[0]
    else:
        return None
    text, message = redact_text(text), redact_text(message)  # pytest prints it and writes it to its JUnit XML
    try:
        from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative
    except ImportError:  # pragma: no cover - pytest moved its classes: the text alone still reads well
        return text
    # a native "traceback" of one entry, our text: printed as is, serialised as is by pytest-xdist, and its crash
    # message is the one line that JUnit's message and the short summary show
    return ReprExceptionInfo(reprtraceback=ReprTracebackNative([text + "\n"]),
                             reprcrash=ReprFileLocation(str(item.path), line or 1, message))


class ConversationItem(pytest.Item):
    """One conversation: fails when it errored or missed a gate (of the dataset or of a turn)."""

    def __init__(self, *, conversation: Item, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conversation = conversation
        file = self.dataset_file
        for tag in conversation.tags:
            self.extra_keyword_matches.add(tag)
            if file.plugin.marker(tag):
                self.add_marker(tag)

    @property
    def dataset_file(self) -> DatasetFile:
        assert isinstance(self.parent, DatasetFile)
        return self.parent

    def runtest(self) -> None:
        self.dataset_file.played(self).conversation_outcome(self.conversation)

    def repr_failure(self, excinfo: ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        return _repr(self, excinfo, self.conversation.line) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = self.conversation.line
        return self.path, line - 1 if line else None, f"evalcli conversation {self.name}"


class VerdictItem(pytest.Item):
    """The dataset's verdict: fails when it is ``failed`` (a gate's mean below 1), and with ``--evalcli-strict``
    when it is ``scored`` (a threshold missed)."""

    @property
    def dataset_file(self) -> DatasetFile:
        assert isinstance(self.parent, DatasetFile)
        return self.parent

    def runtest(self) -> None:
        self.dataset_file.played(self).verdict_outcome()

    def repr_failure(self, excinfo: ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        return _repr(self, excinfo, None) or super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"evalcli verdict of {self.dataset_file.plugin.shown(self.path)}"
