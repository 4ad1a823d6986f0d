"""Where the reports of several runs go, checked before anything runs (docs/ci.md).

A path that cannot be written is exit 2, with no conversation played and no LLM money spent. With several
datasets each file output gets one file per dataset, with distinct names.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from ..errors import UsageError
from ..records import record


def per_run(path: Path, runs: list[tuple[Path, str | None]]) -> list[Path]:
    """One output path per run (a dataset, and the ``--target`` it runs against or ``None``): the path itself for one
    run, else ``out.<name>.ext`` with the names of ``run_names``."""
    if len(runs) == 1:
        return [path]
    return [path.with_name(f"{path.stem}.{name}{path.suffix}") for name in run_names(runs)]


def run_names(runs: list[tuple[Path, str | None]]) -> list[str]:
    """A distinct name per run of a command: the dataset's stem (then its folder and stem) when there are several
    datasets, the target when there are several targets, then a number."""
    datasets = list(dict.fromkeys(d for d, _ in runs))
    names = {d: d.stem for d in datasets}
    if len(set(names.values())) < len(names):
        names = {d: f"{d.resolve().parent.name}-{d.stem}" for d in datasets}
    parts = []
    for dataset, target in runs:
        part = [names[dataset]] if len(datasets) > 1 else []
        if target is not None and len({t for _, t in runs}) > 1:
            part.append(_slug(target))
        parts.append(".".join(part) or "run")
    if len(set(parts)) < len(parts):
        parts = [f"{p}-{i + 1}" for i, p in enumerate(parts)]
    return parts


def tape_names(runs: list[tuple[Path, str | None]]) -> list[str | None]:
    """The name of each run's ``--record-tools`` tape (docs/hermetic.md, "Tapes"): ``None``, the dataset's stem, when
    no two runs share a stem; else ``run_names``' (prefixed by the stem of a lone dataset run against several
    targets), so no run's tape overwrites another's."""
    stems = [d.stem for d, _ in runs]
    if len(set(stems)) == len(stems):
        return [None] * len(runs)
    names = run_names(runs)
    if len({d for d, _ in runs}) == 1:
        names = [f"{stems[0]}.{name}" for name in names]
    return list(names)


def check_tapes(tapes: Sequence[Path], replayed: Sequence[Path]) -> None:
    """``--record-tools``' tapes, before anything runs: each can be written (its folder is made when missing), and
    none is a tape a dataset of the command replays, which recording would rewrite under the run replaying it (an
    interrupted run would leave only the conversations it played, and its resume would be refused)."""
    problems = [problem for path in tapes if (problem := tape_problem(path)) is not None]
    if problems:
        raise UsageError(problems[0].message, problems[0].hint)
    read = {path.resolve(): path for path in replayed}
    for path in tapes:
        if path.resolve() in read:
            raise UsageError(f"--record-tools would write {path}, the tape the dataset replays (tools.replay: "
                             f"{read[path.resolve()]})", "record into another folder (--record-tools tapes-new), then "
                                                         "replace the tape with the new one once the run is done")


def check_not_read(written: Sequence[tuple[str, Path]], datasets: Sequence[tuple[str, str | None]],
                   db: Path | None) -> None:
    """No file a command writes (``written``: option, path) is one it reads: a dataset file, its ``data_file``
    (``datasets``: each dataset's path and data file) or the database: a report there would destroy it, an
    ``--otel-file`` appended to the traces it scores would be read back as conversations next time (docs/ci.md)."""
    read: list[tuple[str, Path]] = [("the database (--db)", db)] if db is not None else []
    for dataset, data_file in datasets:
        read.append((f"the dataset {dataset}", Path(dataset)))
        if data_file is not None:
            read.append((f"the data_file the dataset {dataset} reads", Path(data_file)))
    for what, path in written:
        for role, source in read:
            if _same_file(path, source):
                raise UsageError(f"{what} {path} is {role}: the run would write over what it reads",
                                 f"give {what} another path")


def _same_file(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (yet): compared by the paths they name
        return one.resolve() == other.resolve()


def tape_problem(path: Path) -> PathProblem | None:
    """Why a tape cannot be written at ``path`` (made with its missing folders), or ``None``."""
    if path.is_dir():
        return PathProblem(f"--record-tools: {path} is a directory", "move it away, or record into another folder")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return PathProblem(f"--record-tools {path.parent}: {folder} is a file, not a folder",
                           "give the folder the tapes go to, e.g. --record-tools tapes")
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(folder, os.W_OK):
        return PathProblem(f"--record-tools: {path} cannot be written (permission denied)",
                           "record into a folder you can write")
    return None


def _slug(text: str) -> str:
    """A target as a file-name part: ``model:openai/gpt-4o`` -> ``model-openai-gpt-4o``."""
    import re

    for prefix in ("http://", "https://"):
        text = text.replace(prefix, "")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return slug[:60] or "target"


@record(frozen=True)
class PathProblem:
    """Why an output path cannot be used: the message names the option and the path; ``folder`` is the folder that
    does not exist, if that is why."""

    message: str
    hint: str
    folder: Path | None = None


def check_outputs(files: Sequence[tuple[str, Path]], db: tuple[str, Path] | None = None,
                  reads: Path | None = None) -> None:
    """Every output path of a command, checked before anything runs or is written: ``files`` are (option, path) of
    the reports, ``db`` the database (created when missing, its folder must exist). One ``UsageError`` names every
    path that cannot be used, each missing folder in the hint once. ``reads``: the database a command that only
    reads it (``show``, ``report``, ``diff``, ``compare``, ``labels export``) was given; no report may be it
    (``report RUN --html evalcli.db`` wrote the page over every stored run: docs/ci.md)."""
    if reads is not None:
        for what, path in files:
            if _same_file(path, reads):
                raise UsageError(f"{what} {path} is the database this command reads (--db {reads}): writing it "
                                 "would destroy every run stored there", f"give {what} another path")
    problems = [problem for problem in ([database_problem(*db)] if db else []) if problem is not None]
    problems += [problem for what, path in files if (problem := file_problem(path, what)) is not None]
    if not problems:
        return
    folders = list(dict.fromkeys(str(p.folder) for p in problems if p.folder is not None))
    hints = list(dict.fromkeys(p.hint for p in problems if p.folder is None))
    if folders:
        made = " ".join(shlex.quote(folder) for folder in folders)
        hints.insert(0, f"create {'it' if len(folders) == 1 else 'them'} first (mkdir -p {made}), or choose "
                        f"{'another path' if len(problems) == 1 else 'other paths'}")
    if len(problems) == 1:
        raise UsageError(problems[0].message, hints[0])
    raise UsageError(f"{len(problems)} output paths cannot be used:\n" + "\n".join(f"  {p.message}" for p in problems),
                     "; ".join(hints))


def check_apart(files: Sequence[tuple[str, Path]]) -> None:
    """No two reports of one command go to one file (``--json out.json --junit out.json``): the one written last
    would replace the other, silently (docs/reference/cli.md#notes). A special file (``/dev/null``) may take several."""
    seen: dict[Path, tuple[str, Path]] = {}
    for what, path in files:
        if path.exists() and not path.is_file():
            continue
        other = seen.setdefault(path.resolve(), (what, path))
        if other != (what, path):
            raise UsageError(f"{what} {path} is the file {other[0]} {other[1]} writes too: one report would write "
                             "over the other", "give each report its own path, e.g. --json out.json --junit out.xml")


def database_problem(what: str, db: Path) -> PathProblem | None:
    """Why the database ``db`` (``--db``, ``--out``) cannot be opened or created there, or ``None``."""
    if str(db) == ":memory:":  # SQLite's name for a database of one connection: the run's writer has its own
        return PathProblem(f"{what} :memory: is not kept: runs are stored in a database file",
                           f"give a file path (e.g. {what} /tmp/scratch.db, removed when you are done)")
    if db.is_dir():
        return PathProblem(f"{what} {db} is a directory", f"give a database file, e.g. {what} {db / 'evalcli.db'}")
    if not db.parent.is_dir():
        return PathProblem(f"{what} {db}: the folder {db.parent} does not exist", "", db.parent)
    if not os.access(db if db.exists() else db.parent, os.W_OK):
        return PathProblem(f"{what} {db} cannot be written (permission denied)", "choose a database path you can write")
    return None


def file_problem(path: Path, what: str) -> PathProblem | None:
    """Why ``path`` cannot be written as the report ``what``, or ``None``; checked by writing: an existing file is
    opened for appending (its content untouched), a new one is created and removed again. A folder that does not
    exist is a problem (nothing is created where a typo points); a special file (``/dev/null``, a pipe) needs only
    the permission."""
    if path.is_dir():
        return PathProblem(f"{what} {path} is a directory", f"give a file path, e.g. {path / ('out' + _ext(what))}")
    folder = path.parent
    if not folder.is_dir():
        return PathProblem(f"{what} {path}: the folder {folder} does not exist", "", folder)
    try:
        if path.exists():
            if not path.is_file():
                if not os.access(path, os.W_OK):
                    raise PermissionError(13, "permission denied")
                return None
            with path.open("a", encoding="utf-8"):
                pass
        else:
            with path.open("x", encoding="utf-8"):
                pass
            path.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return PathProblem(f"cannot write {what} {path}: {reason.lower()}", "choose a path in a folder you can write")
    return None


def _ext(what: str) -> str:
    return {"--json": ".json", "--junit": ".xml", "--markdown": ".md", "--html": ".html"}.get(what, "")


def open_for_writing(path: Path) -> IO[str]:
    """The output file, truncated (its folder was checked to exist before anything ran)."""
    return path.open("w", encoding="utf-8")


@record(frozen=True)
class Outputs:
    """The report files of a set of runs, one list per kind with a path (or ``None``) per run, in the runs' order;
    every path checked writable before anything runs."""

    json: tuple[Path | None, ...]
    junit: tuple[Path | None, ...]
    markdown: tuple[Path | None, ...]
    html: tuple[Path | None, ...]
    tapes: tuple[str | None, ...] = ()
    """Each run's ``--record-tools`` tape name (``None``: its dataset's stem; ``tape_names``)."""
    step_summary: Path | None = None
    """A file every run's Markdown summary is appended to (GitHub Actions' ``$GITHUB_STEP_SUMMARY``)."""

    @classmethod
    def plan(cls, runs: list[tuple[Path, str | None]], *, json: Path | None = None, junit: Path | None = None,
             markdown: Path | None = None, html: Path | None = None, db: Path | None = None,
             step_summary: Path | None = None) -> Outputs:
        """Each report's path per run (a dataset and its ``--target``, ``per_run`` naming them apart), all of them
        and the database ``db`` checked at once."""
        def paths(value: Path | None) -> tuple[Path | None, ...]:
            return (None,) * len(runs) if value is None else tuple(per_run(value, runs))

        outputs = cls(paths(json), paths(junit), paths(markdown), paths(html), tuple(tape_names(runs)), step_summary)
        files = [(what, path) for what, chosen in outputs.named() for path in chosen if path is not None]
        check_outputs(files, db=("--db", db) if db is not None else None)
        check_apart(files)
        return outputs

    def named(self) -> list[tuple[str, tuple[Path | None, ...]]]:
        """(option, its path per run) of each report."""
        return [("--json", self.json), ("--junit", self.junit), ("--markdown", self.markdown), ("--html", self.html)]

    def ci(self, n: int) -> bool:
        """Whether run ``n`` has a report besides its JSON (each reads every conversation)."""
        return any(paths[n] is not None for paths in (self.junit, self.markdown, self.html)) \
            or self.step_summary is not None
