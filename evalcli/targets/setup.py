"""Per-conversation setup (docs/targets/frameworks.md): ``target_options.setup: module:function``, called like a pytest fixture.

The function is called once before a conversation's first turn with a ``ConversationInfo`` and returns a
mapping of run options merged over the YAML ones for that conversation only (PydanticAI ``deps``, an Agents
SDK ``context``, LangGraph ``input``). It may be sync or async, or a generator / async generator that yields
the mapping once and is resumed after the conversation (also when the conversation failed) to clean up.
Sync code runs in the run's target threads; all of it under ``--turn-timeout``, like a turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from ..errors import describe
from ..records import record
from .session import Calls, TurnTimedOut


@record(frozen=True)
class ConversationInfo:
    """What a setup function is told about the conversation it prepares."""

    thread: str | None
    """The conversation's thread id (``None`` for a single-turn item of a callable with no caller memory)."""
    resource: str | None
    """Its resource id (``memory.resource`` when pinned, else the thread; ``None`` where the adapter uses none)."""
    item_id: str
    """The item's id."""
    tags: list[str] = field(default_factory=list)
    """The item's tags."""
    ground_truth: Any = None
    """The item's ``ground_truth``, unchanged."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The item's ``metadata`` mapping (``{}`` when it has none)."""


class SetupFailed(Exception):
    """The setup raised, timed out or returned something that is not options: the conversation's error."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause


class Setup:
    """One conversation's setup call: ``enter`` gets its options, ``exit`` resumes a generator to clean up."""

    def __init__(self, spec: str, fn: Callable[..., Any], calls: Calls) -> None:
        self.spec = spec
        self.fn = fn
        self.calls = calls
        self._generator: Any = None
        self._async = False

    async def enter(self, info: ConversationInfo) -> dict[str, Any]:
        """Call the setup; the options it returned (or yielded)."""
        fn = self.fn
        try:
            if inspect.isasyncgenfunction(fn):
                self._generator, self._async = fn(info), True
                value = await self.calls.call_async(anext(self._generator))
            elif inspect.isgeneratorfunction(fn):
                self._generator = fn(info)
                value = await self.calls.call_sync(_step, self._generator)
            elif inspect.iscoroutinefunction(fn):
                value = await self.calls.call_async(fn(info))
            else:  # any other callable (a partial, an object): what it returns says what it is
                value = await self.calls.call_sync(fn, info)
                if inspect.isasyncgen(value):
                    self._generator, self._async = value, True
                    value = await self.calls.call_async(anext(value))
                elif inspect.isgenerator(value):
                    self._generator = value
                    value = await self.calls.call_sync(_step, value)
                elif inspect.isawaitable(value):
                    value = await self.calls.call_async(value)
        except (_Finished, StopAsyncIteration):
            self._generator = None
            raise SetupFailed(f"setup {self.spec} did not yield: a generator setup yields its options once, "
                              "then cleans up") from None
        except TurnTimedOut as exc:
            self._generator = None  # a setup that hung cannot be resumed
            raise SetupFailed(f"setup {self.spec} did not finish within {exc.seconds:g}s", exc) from None
        except Exception as exc:  # noqa: BLE001 - the setup's failure is this conversation's error
            self._generator = None
            raise SetupFailed(f"setup {self.spec} raised {describe(exc)}", exc) from None
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise SetupFailed(f"setup {self.spec} returned {type(value).__name__}, not a mapping of run options "
                              "(e.g. return {'deps': ...})")
        return {str(k): v for k, v in value.items()}

    async def exit(self) -> None:
        """Resume a generator setup after the conversation, for its cleanup; a plain function has none."""
        generator, self._generator = self._generator, None
        if generator is None:
            return
        try:
            if self._async:
                await self.calls.call_async(anext(generator))
            else:
                await self.calls.call_sync(_step, generator)
        except (_Finished, StopAsyncIteration):
            return
        except TurnTimedOut as exc:
            raise SetupFailed(f"setup {self.spec}: its cleanup did not finish within {exc.seconds:g}s", exc) from None
        except Exception as exc:  # noqa: BLE001 - a failed cleanup is this conversation's error
            raise SetupFailed(f"setup {self.spec}: its cleanup raised {describe(exc)}", exc) from None
        close = generator.aclose() if self._async else None
        if close is not None:
            await close
        else:
            generator.close()
        raise SetupFailed(f"setup {self.spec} yielded more than once: yield the options once, then clean up")


class _Finished(Exception):
    """A sync generator ended (``StopIteration`` cannot cross a future, so it travels as this)."""


def _step(generator: Any) -> Any:
    """``next(generator)``, its end raised as ``_Finished``."""
    try:
        return next(generator)
    except StopIteration:
        raise _Finished from None
