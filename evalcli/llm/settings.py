"""The LLM settings of the environment (docs/models.md): ``EVALCLI_LLM_BACKEND``, retries, timeouts, back-off and
concurrency. Every run reads them when it is planned, so they live apart from the client (``client``), which a run
imports only when it calls a model (docs/performance.md "Start-up and finish")."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import field

from ..errors import EvalcliError
from ..records import record
from .preflight import BACKENDS


def backend_from_env(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """``EVALCLI_LLM_BACKEND`` (``auto`` when unset); anything else is a user error naming the choices."""
    source = os.environ if env is None else env
    value = (source.get("EVALCLI_LLM_BACKEND") or "auto").strip().lower()
    if value not in BACKENDS:
        raise EvalcliError(f"EVALCLI_LLM_BACKEND={source.get('EVALCLI_LLM_BACKEND')!r} is not a backend",
                           "set EVALCLI_LLM_BACKEND=litellm to send every model call through litellm, "
                           "or leave it unset (auto)")
    return value


@record
class LLMSettings:
    """How model calls behave: retries, timeouts, back-off, judge concurrency, caching."""

    retries: int = 4
    """Retries after the first attempt, on 429, 5xx, timeouts and connection errors."""
    timeout: float = 60.0
    """Seconds allowed for one attempt."""
    backoff_base: float = 0.5
    """First back-off in seconds; doubled on each retry, with jitter."""
    backoff_max: float = 30.0
    """Longest back-off in seconds (a provider's ``Retry-After`` may ask for longer)."""
    judge_concurrency: int = 8
    """Judge calls in flight at once, across all conversations."""
    model_concurrency: int = 64
    """Calls in flight to one (provider, model) at most; halved on a 429, it grows back to this (docs/budgets.md)."""
    cache: bool = True
    """Whether judge calls use the response cache."""
    backend: str = field(default_factory=backend_from_env)
    """``auto`` or ``litellm`` (``EVALCLI_LLM_BACKEND``)."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> LLMSettings:
        """Defaults, overridden by ``EVALCLI_LLM_RETRIES`` and ``EVALCLI_LLM_TIMEOUT`` when set."""
        source = os.environ if env is None else env
        settings = cls(backend=backend_from_env(source))
        try:
            if source.get("EVALCLI_LLM_RETRIES"):
                settings.retries = max(0, int(source["EVALCLI_LLM_RETRIES"]))
            if source.get("EVALCLI_LLM_TIMEOUT"):
                settings.timeout = float(source["EVALCLI_LLM_TIMEOUT"])
        except ValueError as exc:
            raise EvalcliError(
                f"invalid LLM setting in the environment: {exc}",
                "EVALCLI_LLM_RETRIES takes a whole number, EVALCLI_LLM_TIMEOUT a number of seconds",
            ) from None
        return settings


def import_http_client(models: Iterable[str] = (), *, always: bool = False) -> None:
    """Import aiohttp now, before a run's clock starts, when its turns will make HTTP requests: calls to a model
    other than the embedded one (``models``), or ``always`` (an ``http`` or ``mastra`` target). Imported at the
    first request instead, its 0.3-0.5 s of CPU stalled every conversation's first turn and counted in their
    durations. A missing package stays the first request's error."""
    names = () if always else tuple(models)
    if names:
        from .local_model import is_local

        always = any(not is_local(model) for model in names)
    if always:
        with contextlib.suppress(ImportError):
            import aiohttp  # noqa: F401
