"""A run's lock while a process plays it (docs/reliability.md, "A run still playing").

The process that plays a run, new or resumed, holds an exclusive ``flock`` on a file beside the database
(``<db>.<run id>.playing``, its process id written in it) until the run ends. ``--resume`` of a run whose lock another
process holds is refused: both would play the conversations not yet stored. The operating system lets the lock go
when its process ends however it ends (``kill -9``, out of memory), so a killed run resumes at once; the file is
removed when the run ends, and one left by a killed process is taken over by the next. Where ``flock`` is missing
(Windows) there is no lock and no refusal.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def lock_path(db: str, run_id: str) -> Path:
    return Path(f"{db}.{run_id}.playing")


class RunLock:
    """A held lock (``take``); ``release`` it when the run ends."""

    def __init__(self, fd: int | None, path: Path | None) -> None:
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd is None or self.path is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before the lock goes: a process waiting on this file finds it gone and retries
        with contextlib.suppress(OSError):
            os.close(self.fd)  # closing lets the lock go
        self.fd = None


def take(db: str, run_id: str) -> RunLock | int:
    """The run's lock, or the process id of the process that holds it (``0`` when it wrote none)."""
    if fcntl is None or db == ":memory:":
        return RunLock(None, None)
    path = lock_path(db, run_id)
    for _ in range(5):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by the processes the run starts
        except OSError:  # a folder the database can be used in but no file made (its own permissions): no lock
            return RunLock(None, None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            return holder
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # removed by the process that held it, between our open and our lock: take the new file
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return RunLock(fd, path)
    return RunLock(None, None)  # pragma: no cover - a file replaced five times over: play unlocked


def hold(db: str, run_id: str) -> RunLock:
    """The lock of the run this process plays from now on, held until it ends; refused as ``refuse_if_playing`` is
    when another process took it since."""
    taken = take(db, run_id)
    if not isinstance(taken, RunLock):
        raise _playing(run_id, taken)
    return taken


def refuse_if_playing(db: str, run_id: str) -> None:
    """Refuse a ``--resume`` of a run another process is playing now: both would play the conversations not yet
    stored."""
    holder = playing(db, run_id)
    if holder is not None:
        raise _playing(run_id, holder)


def _playing(run_id: str, holder: int) -> UsageError:
    process = f"process {holder}" if holder else "another process"
    return UsageError(f"run {run_id} is running: {process} is playing it now, and resuming it beside that would play "
                      "its unfinished conversations twice",
                      f"wait for it to end, or stop it ({'kill ' + str(holder) if holder else 'Ctrl-C'}; it stays "
                      "resumable) and resume it then")


def playing(db: str, run_id: str) -> int | None:
    """The process id of the process playing ``run_id`` now (``0``: one that wrote none), or ``None``."""
    if fcntl is None or db == ":memory:" or not lock_path(db, run_id).exists():
        return None
    taken = take(db, run_id)
    if isinstance(taken, RunLock):
        taken.release()
        return None
    return taken


def _holder(fd: int) -> int:
    try:
        return int(os.pread(fd, 32, 0).decode() or 0)
    except (OSError, ValueError):
        return 0
