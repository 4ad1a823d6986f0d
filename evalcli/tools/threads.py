"""A conversation's tool plan in the threads its turn starts (docs/hermetic.md, "Tools on other threads").

The plan is a context variable, and a thread Python starts does not inherit the context of the code that started
it: a tool a framework runs on its executor's thread (smolagents' ``ThreadPoolExecutor``) or on a thread of its own
would see no plan and run live, even under ``--hermetic``. ``install`` (done once, when a run first plays a
conversation) makes both carry the plan of the code that started them:

- ``threading.Thread.start`` gives the new thread the starting code's plan;
- ``ThreadPoolExecutor.submit`` runs each task under the plan of the code that submitted it (a worker serves many
  conversations, so the plan goes with the task, never with the worker thread).

Either holds the plan only until the turn that started it ends (a lease on the plan's ``epoch``, read by
``current_plan``): a thread that outlives its turn (a worker started lazily that then serves every conversation)
would otherwise answer every later conversation's calls from the first one's mocks. Only the plan is carried
(nothing else of the context), and code running outside a conversation (no plan) starts and submits exactly as
before.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import thread as pool_threads
from typing import Any, TypeVar

from .plan import CURRENT, LEASE, ToolPlan, current_plan

T = TypeVar("T")

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Carry the current plan into started threads and submitted tasks, from now on (idempotent)."""
    global _installed
    if _installed:
        return  # every conversation asks: once installed, no lock to take (it is never uninstalled)
    with _lock:
        if _installed:
            return
        _installed = True
        start: Callable[[threading.Thread], None] = threading.Thread.start
        submit: Callable[..., Future[Any]] = ThreadPoolExecutor.submit

        def planned_start(self: threading.Thread) -> None:
            plan = current_plan()
            # an executor's worker serves every conversation: its tasks carry their own plan (planned_submit)
            if plan is not None and getattr(self, "_target", None) is not pool_threads._worker:
                self.run = functools.partial(_run_with, _carried(plan), self.run)  # type: ignore[method-assign]
            start(self)

        def planned_submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any,
                           **kwargs: Any) -> Future[Any]:
            plan = current_plan()
            return submit(self, functools.partial(_run_with, _carried(plan) if plan else None, fn), *args, **kwargs)

        functools.update_wrapper(planned_start, start)
        functools.update_wrapper(planned_submit, submit)
        setattr(threading.Thread, "start", planned_start)  # noqa: B010 - the one place the stdlib is changed
        setattr(ThreadPoolExecutor, "submit", planned_submit)  # noqa: B010


def _carried(plan: ToolPlan) -> tuple[ToolPlan, int]:
    """The plan and the lease a started thread or a submitted task holds it by: the current one's, else this turn's."""
    lease = LEASE.get()
    return plan, plan.epoch if lease is None else lease


def _run_with(carried: tuple[ToolPlan, int] | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    plan, lease = carried if carried is not None else (None, None)
    token, leased = CURRENT.set(plan), LEASE.set(lease)
    try:
        return fn(*args, **kwargs)
    finally:
        LEASE.reset(leased)
        CURRENT.reset(token)
