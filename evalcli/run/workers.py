"""``--workers N``: one run's conversations played by N processes (docs/performance.md#workers).

The run stays one run: this process plans it, owns its row, its one progress line, the aggregate and every write to
the database (through the run's one writer thread); each worker is a fresh interpreter (``python -m
evalcli.run.worker``) that loads the dataset again, plays its share of the conversations (every N-th one, as
``--shard`` splits a run over machines) and sends each result back over a pipe, as soon as it is scored. The results
are folded in dataset order, so they are those of a single process. A worker that dies takes only its conversations
in flight: what it finished is stored, the rest is played by ``--resume``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from ..dataset import Item
from ..errors import EvalcliError, ExitCode
from ..records import record
from ..results import ItemResult
from .options import RunOptions

FRAME = struct.Struct("!I")
"""A message from a worker: its length, then a pickle of ``(kind, payload)``."""
PICKLE_DEPTH = 5000
"""The recursion pickling a worker's message may use: a stored message nests up to what JSON can be written at
(about 1,000 levels, docs/targets/python.md), and pickling takes a few levels of recursion for each of its levels;
at the interpreter's 1,000 a message of 500 levels, stored by one process, ended the worker (exit 70)."""


def pickled(value: Any) -> bytes:
    """``pickle.dumps`` of a worker's message, however deep a stored message nests (``PICKLE_DEPTH``)."""
    with _deep():
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpickled(body: bytes) -> Any:
    """``pickle.loads`` of a worker's message (``pickled``)."""
    with _deep():
        return pickle.loads(body)


@contextlib.contextmanager
def _deep() -> Iterator[None]:
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, PICKLE_DEPTH))  # the interpreter's; other threads only gain by it meanwhile
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


class WorkerFailed(EvalcliError):
    """A worker ended without finishing its share (killed, out of memory, or an error of its own)."""

    exit_code = ExitCode.INTERNAL


def shares(items: list[Item], workers: int) -> list[list[int]]:
    """The item indexes each worker plays: every ``workers``-th conversation to run, in dataset order."""
    return [[item.index for item in items[n::workers]] for n in range(workers)]


def import_path() -> list[str]:
    """This process's ``sys.path``, each entry absolute: a worker imports from where this process does (a script's own
    folder, a folder the script or a plugin put on ``sys.path``), not only from its ``PYTHONPATH`` and working
    directory."""
    return [os.path.abspath(entry) if entry else os.getcwd() for entry in sys.path]


def split(total: int, parts: int) -> list[int]:
    """``total`` shared between ``parts`` as evenly as whole numbers go, summing to ``total`` (each at least 1: a part
    of a total smaller than ``parts`` gets 1)."""
    return [max(1, total // parts + (1 if n < total % parts else 0)) for n in range(parts)]


def worker_options(options: RunOptions, workers: int, concurrency: int, number: int = 0) -> dict[str, Any]:
    """What worker ``number`` (from 0) of ``workers`` runs with: the run's options, its concurrency and judge
    concurrency split between the workers so that all of them together keep to the run's (docs/performance.md)."""
    return {"concurrency": split(concurrency, workers)[number],
            "judge_concurrency": split(options.judge_concurrency, workers)[number],
            "use_cache": options.use_cache, "turn_timeout": options.turn_timeout, "repeat": options.repeat,
            "sequential": options.sequential, "pass_rate": options.pass_rate, "hermetic": options.hermetic,
            "grace_seconds": options.grace_seconds, "handle_signals": True}


@record
class _Worker:
    """One worker process and what it said."""

    number: int
    process: subprocess.Popen[bytes]
    share: int
    finished: int = 0
    done: bool = False
    error: tuple[str, str, int] | None = None
    said: list[str] = field(default_factory=list)
    waiting: str | None = None
    """The long step it said it waits on (``notice``), until it says it is over."""


class WorkerPool:
    """The run's worker processes: started, read until each ends, told to stop on an interrupt."""

    def __init__(self, runner: Any, finished: Callable[[ItemResult], None], keep_up: Callable[[], Any]) -> None:
        self.runner = runner
        """The run's ``Runner`` (run/runner.py, which imports this module: typed loosely to keep the two apart)."""
        self.finished = finished
        self.keep_up = keep_up
        self.workers: list[_Worker] = []
        self.told = 0
        """Stops passed on to the workers (a second one: stop now)."""
        self.warned: set[str] = set()
        self.noticed: set[str] = set()

    async def play(self, items: list[Item]) -> None:
        """Play ``items`` in the workers; a ``WorkerFailed`` when one did not finish its share."""
        runner = self.runner
        concurrency = max(1, runner.options.concurrency or runner.dataset.concurrency)
        # never more workers than conversations in flight: each plays one at least (docs/performance.md#workers)
        count = min(runner.options.workers, len(items), concurrency)
        job = {"path": runner.dataset.path, "scorers": runner.dataset.registry.path or None,
               "target": runner.plan.target, "given": None if runner.plan.target else runner.dataset.target_given,
               "hash": runner.dataset.hash, "target_spec": runner.dataset.target_spec,
               "db": runner.store.path if runner.store is not None else None, "sys_path": import_path(),
               "options": {}}
        restore = runner._install_signals() if runner.options.handle_signals else None
        try:
            readers = [self._start(n, share, {**job, "options": worker_options(runner.options, count, concurrency, n)})
                       for n, share in enumerate(shares(items, count))]
            watch = asyncio.ensure_future(self._pass_on_stops())
            try:
                await asyncio.gather(*readers)
            except BaseException:
                for worker in self.workers:  # this process is going: so are its workers (what they finished is kept)
                    with contextlib.suppress(ProcessLookupError):
                        worker.process.kill()
                raise
            finally:
                watch.cancel()
        finally:
            if restore:
                restore()
            for worker in self.workers:
                await self._reap(worker)
        self.runner.say_target_warnings()  # what every worker counted (``add_run_counts``), said once for the run
        self._check()

    def _start(self, number: int, share: list[int], job: dict[str, Any]) -> Any:
        read_end, write_end = os.pipe()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the evalcli this process runs, not another
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            process = subprocess.Popen([sys.executable, "-m", "evalcli.run.worker", str(write_end)],
                                       stdin=subprocess.PIPE, pass_fds=(write_end,), env=env, start_new_session=True)
        finally:
            os.close(write_end)
        worker = _Worker(number + 1, process, len(share))
        self.workers.append(worker)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(json.dumps({**job, "indexes": share}).encode())
            process.stdin.close()
        return self._follow(worker, read_end)

    async def _follow(self, worker: _Worker, fd: int) -> None:
        """Read one worker until it ends. One that ended interrupted when no interrupt was passed on to it (its target
        raised ``KeyboardInterrupt``, or it was sent SIGINT itself) interrupts the run, as that interrupt does in one
        process: the other workers are told to stop (their conversations in flight get the grace period), the run is
        marked interrupted, exits 130 and resumes (docs/performance.md#workers)."""
        await self._read(worker, fd)
        await asyncio.to_thread(worker.process.wait)
        if not self.runner.stopping and _stopped(worker):
            self.runner.stopping = self.runner.interrupted = True
            self.runner.events.stopping()

    async def _read(self, worker: _Worker, fd: int) -> None:
        """Every message of one worker, until it closes its end (on finishing, or dying)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(fd, "rb", 0))
        try:
            while True:
                try:
                    size = FRAME.unpack(await reader.readexactly(FRAME.size))[0]
                    kind, payload = unpickled(await reader.readexactly(size))
                except asyncio.IncompleteReadError:
                    return
                await self._message(worker, kind, payload)
        finally:
            transport.close()

    async def _message(self, worker: _Worker, kind: str, payload: Any) -> None:
        if kind == "item":
            worker.finished += 1
            self.finished(payload)
            await self.keep_up()
        elif kind == "warning" and payload not in self.warned:
            self.warned.add(payload)
            self.runner.run_warnings.append(payload)
            self.runner.events.warning(payload)
        elif kind == "counts" and self.runner.dataset.target is not None:
            self.runner.dataset.target.add_run_counts(payload)
        elif kind == "notice":
            self._notice(worker, payload)
        elif kind == "throttled":  # a worker's model met 429s: its calls in flight are held (docs/models.md)
            self.runner.events.throttled(*payload)
        elif kind == "error":
            worker.error = payload
        elif kind == "done":
            worker.done = True

    def _notice(self, worker: _Worker, text: str | None) -> None:
        """A long step a worker waits on (``loading the local model ...``: every worker loads it), said once for the
        run, as one process says it; over when no worker is still on one."""
        worker.waiting = text
        if text is None:
            if not any(other.waiting for other in self.workers):
                self.runner.events.notice(None)
        elif text not in self.noticed:
            self.noticed.add(text)
            self.runner.events.notice(text)

    async def _pass_on_stops(self) -> None:
        """An interrupt of this process is passed on to every worker (each gives its conversations in flight the
        grace period; a second one stops them now): they run in sessions of their own, out of the terminal's reach."""
        while True:
            await asyncio.sleep(0.05)
            wanted = (1 if self.runner.stopping else 0) + (1 if self.runner.stopping and
                                                           self.runner.grace_seconds <= 0 else 0)
            while self.told < wanted:
                self.told += 1
                for worker in self.workers:
                    with contextlib.suppress(ProcessLookupError):
                        worker.process.send_signal(signal.SIGINT)

    async def _reap(self, worker: _Worker) -> None:
        try:
            await asyncio.wait_for(asyncio.to_thread(worker.process.wait), timeout=30)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            await asyncio.to_thread(worker.process.wait)

    def _check(self) -> None:
        """A ``WorkerFailed`` naming each worker that did not finish, and how it ended."""
        failed = [w for w in self.workers if not w.done or w.error is not None]
        if self.runner.interrupted:  # each worker stopped as it was told: the run is interrupted, not failed
            failed = [w for w in failed if not _stopped(w)]
        if not failed:
            return
        errors = [w.error for w in failed if w.error is not None]
        if len(errors) == len(self.workers) and all(e == errors[0] for e in errors) and \
                errors[0][2] != int(ExitCode.INTERNAL):
            message, hint, code = errors[0]  # the same mistake (of the user's) in every worker: said once, as itself
            error = WorkerFailed(message, hint)
            error.exit_code = ExitCode(code)
            raise error
        said = "; ".join(_ending(w) for w in failed)
        raise WorkerFailed(f"{len(failed)} of {len(self.workers)} workers did not finish: {said}; the conversations "
                           "they finished are stored", f"play the rest with: {self.runner.resume_command()}")


def _stopped(worker: _Worker) -> bool:
    """Whether a worker ended because an interrupt was passed on to it (exit 130, or the signal itself), having said
    no error of its own: what it finished is stored, the rest is resumable."""
    code = worker.process.returncode
    interrupted = code in (int(ExitCode.INTERRUPTED), -signal.SIGINT, -signal.SIGTERM)
    return interrupted and (worker.error is None or worker.error[2] == int(ExitCode.INTERRUPTED))


def _ending(worker: _Worker) -> str:
    """How a worker ended, in words."""
    code = worker.process.returncode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    if worker.error is not None:
        how = worker.error[0]
    return f"worker {worker.number} (pid {worker.process.pid}) {how} after {worker.finished} of {worker.share} " \
           "conversations"
