"""One worker process of a ``--workers N`` run (docs/performance.md#workers): ``python -m evalcli.run.worker FD``.

It reads its job (JSON, on stdin): the dataset to load again, the item indexes to play and the options; it plays
them as a run's conversations are played, and writes each result to ``FD`` as soon as it is scored (a frame of
``evalcli.run.workers``), then ``done``. It writes nothing to the database but the response cache: the run's rows
are written by the process that started it. A mistake is sent as ``error`` (message, hint, exit code).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

from ..errors import EvalcliError, ExitCode, UsageError, describe, exit_called
from ..results import ItemResult
from ..streams import redact_terminal
from .events import Events
from .workers import FRAME, pickled

if TYPE_CHECKING:
    from ..dataset import Dataset
    from .options import RunOptions
    from .plan import RunPlan


class Channel:
    """The pipe to the run's process: one frame at a time, from any thread."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def send(self, kind: str, payload: Any) -> None:
        with self.lock:  # pickled under the lock too: it raises the interpreter's recursion limit meanwhile
            body = pickled((kind, payload))
            self.out.write(FRAME.pack(len(body)) + body)
            self.out.flush()


class WorkerEvents(Events):
    """What the run's process shows of a worker: its warnings, notices and throttled models (the progress line counts
    results)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def warning(self, text: str) -> None:
        self.channel.send("warning", text)

    def notice(self, text: str | None) -> None:
        self.channel.send("notice", text)

    def throttled(self, model: str, limit: int | None, ceiling: int) -> None:
        self.channel.send("throttled", (model, limit, ceiling))


async def play(job: dict[str, Any], channel: Channel) -> None:
    """Load the dataset as the run loaded it, check it is the same, play the job's conversations."""
    from ..dataset import load_dataset
    from ..store import Store
    from ..targets import cli_target
    from .options import RunOptions
    from .runner import Runner

    target = job["target"]
    # a target given in place of the file's: ``--target`` (its label), or load_dataset's ``target`` (the Python API)
    dataset = load_dataset(job["path"], job["scorers"], target=cli_target(target) if target else job["given"],
                           target_label=target)
    if dataset.hash != job["hash"] or dataset.target_spec != job["target_spec"]:
        raise UsageError(f"{job['path']} changed while the run started its workers",
                         "run it again once the files stay put")
    options = RunOptions(**job["options"], only_indexes=frozenset(job["indexes"]))
    store = Store(job["db"]) if job["db"] and options.use_cache else None  # the response cache only
    try:
        plan = share_plan(dataset, options, target)

        def finished(result: ItemResult) -> None:
            channel.send("item", result)

        await Runner(plan, store, WorkerEvents(channel)).play_share(finished)
        # what the target counted for its warnings goes to the run's process, which says each once for the whole run
        # ("in 14 replies", not one line per worker of its own share)
        if dataset.target is not None and (counts := dataset.target.run_counts()):
            channel.send("counts", counts)
    finally:
        if store is not None:
            store.close()


def share_plan(dataset: Dataset, options: RunOptions, target: str | None) -> RunPlan:
    """A worker's share of the run, its conversations (``options.only_indexes``) in dataset order. Nothing is
    checked again: the run's process planned the run and made every check, once, with its database (a calibrated
    gate's judge is measured there: a worker, planning again without it, refused every such run; docs/judges.md)."""
    from .plan import RunPlan, llm_settings

    wanted = options.only_indexes or frozenset()
    return RunPlan(dataset, options, None, tuple(item for item in dataset.items if item.index in wanted),
                   llm_settings(), target=target)


def main() -> int:
    # what the target prints (its own lines, its logging, a traceback) reaches the run's terminal redacted, as it does
    # from the run's own process (docs/secrets.md)
    redact_terminal()
    fd = int(sys.argv[1])
    # the pipe is this worker's alone: a process the target starts and leaves running (a server, `cmd &`) must not
    # hold it open, or the run's process waits for that process to end before it sees this worker end
    os.set_inheritable(fd, False)
    out = os.fdopen(fd, "wb")
    channel = Channel(out)
    try:
        import json

        job = json.loads(sys.stdin.read())
        sys.path[:] = list(dict.fromkeys([*job["sys_path"], *sys.path]))  # the run's process's imports first
        asyncio.run(play(job, channel))
    except EvalcliError as exc:
        channel.send("error", (exc.message, exc.hint, int(exc.exit_code)))
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except SystemExit as exc:  # evalcli never exits a worker this way: the agent (or a scorer) called sys.exit()
        channel.send("error", (exit_called(exc), "", int(ExitCode.INTERNAL)))
        return int(ExitCode.INTERNAL)
    except BaseException as exc:  # noqa: BLE001 - told to the run's process, which says which worker
        channel.send("error", (f"internal error in a worker: {describe(exc)}", "this is a bug in evalcli",
                               int(ExitCode.INTERNAL)))
        return int(ExitCode.INTERNAL)
    channel.send("done", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
