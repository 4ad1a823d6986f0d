"""The one family of user errors. Each says what is wrong, where, and what to do instead.

The CLI turns an ``EvalcliError`` into its ``exit_code`` in exactly one place; anything else that
escapes is a bug and keeps its traceback (behind ``--debug``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import Any

from .records import record


class ExitCode(IntEnum):
    """Every exit code of evalcli, stated once (docs/reference/exit-codes.md is generated from ``MEANINGS``)."""

    OK = 0
    FAILED = 1
    """A gate missed (``run``); B worse than A (``diff``, ``compare --alpha``); below ``--min-agreement``."""
    BAD_INPUT = 2
    SCORED = 3
    """``--strict`` and the verdict ``scored``."""
    ERRORED = 4
    BUDGET = 5
    INTERNAL = 70
    """A bug in evalcli (never a user mistake); such a run is stored as ``failed``."""
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        """What the code says, as the reference page words it."""
        return MEANINGS[self]

    @classmethod
    def worst(cls, codes: Iterable[int]) -> ExitCode:
        """One code for several (datasets, targets, runs): the first of ``EXIT_PRECEDENCE`` among them."""
        found = set(codes)
        return next((code for code in EXIT_PRECEDENCE if code in found), cls.OK)


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "verdict `passed`, or no verdict, and no conversation errored (also `scored` unless `--strict`)",
    ExitCode.FAILED: "verdict `failed`: a gate missed",
    ExitCode.BAD_INPUT: "bad invocation or invalid dataset/registry, an LLM setting that cannot be read "
                        "(`EVALCLI_LLM_RETRIES=abc`), an output path that cannot be written (or whose folder does not "
                        "exist), no conversation selected, a `--resume` of a run whose configuration changed or with a "
                        "flag that contradicts it, a `--resume`/`--rerun-failed` of another dataset's run: nothing was "
                        "run, no run row written",
    ExitCode.SCORED: "with `--strict`: verdict `scored` (a threshold missed), or a declared gate that was not scorable "
                     "on any conversation (nothing was checked)",
    ExitCode.ERRORED: "some conversations errored (the target raised, a provider failed after retries) or a scorer "
                      "failed on a conversation (it raised, returned a non-finite score, its judge's model cannot be "
                      "reached: that scorer's error, the conversation and the verdict stand), and none of the above is "
                      "worse; the verdict line says what the verdict covers (`verdict: passed on 1 of 4 conversations; "
                      "3 errored (exit 4)`, `verdict: passed; 1 scorer error: grounded (exit 4)`); a conversation a "
                      "`limits:` entry stopped (status `limited`) counts as errored unless `on_limit: score`",
    ExitCode.BUDGET: "a budget (`--max-cost`, `--max-tokens`) ended the run before every conversation finished: no new "
                     "LLM call of a spent purpose was started, the conversations that needed one are `limited`, the run "
                     "is marked `budget`; `--resume RUN_ID` with a larger budget continues it (a failed gate still "
                     "says 1)",
    ExitCode.INTERNAL: "a bug in evalcli (`internal error`; `--debug`, which every command takes, shows the traceback); "
                       "the run is stored as `failed`. A database write that fails is not one: the run's own code "
                       "stands and the failure is printed beside it",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C / SIGTERM), during the conversations or after them (while the run is "
                          "finished or its reports written); the run is marked `interrupted`, what finished is kept; "
                          "`--resume RUN_ID` continues",
}
"""What each exit code of ``evalcli run`` means (the reference page's table is generated from it)."""
EXIT_PRECEDENCE = (ExitCode.INTERRUPTED, ExitCode.BAD_INPUT, ExitCode.FAILED, ExitCode.BUDGET, ExitCode.ERRORED,
                   ExitCode.SCORED, ExitCode.OK)
"""Which code wins when several apply (several datasets or targets, or a run that is both failed and errored)."""


def describe(exc: BaseException) -> str:
    """``TypeName: message`` (or just the type name when there is no message), on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def exit_called(exc: SystemExit) -> str:
    """What ended a run that evalcli never ends with ``sys.exit()`` (docs/reliability.md): the user's code did."""
    return f"ended by SystemExit({exc.code!r}) (the target or a scorer called sys.exit())"


LITELLM_PLACEHOLDERS = ("https://api.openai.com/v1", "https://litellm.ai")
"""The URLs litellm gives the requests of its exceptions whatever was requested (``httpx.Request(method="POST",
url="https://api.openai.com/v1")``): never the URL a call went to, which an exception it was raised from holds."""


def _placeholder(exc: BaseException, url: str) -> bool:
    return type(exc).__module__.startswith("litellm") and url.rstrip("/") in LITELLM_PLACEHOLDERS


def requested_url(exc: BaseException) -> str | None:
    """The URL a failed request was for, found on the exception or on one it was raised from (``request.url`` of
    httpx and the SDKs built on it, or ``url``), without credentials or query; ``None`` when none says. litellm's
    placeholder requests (``LITELLM_PLACEHOLDERS``) say nothing: the search goes on down the chain."""
    from urllib.parse import urlsplit

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 12:
        seen.add(id(current))
        for holder in ("request", None):
            try:
                source = getattr(current, holder) if holder else current
                url = getattr(source, "url", None)
            except Exception:  # noqa: BLE001 - httpx raises when an exception has no request attached
                url = None
            if url is not None and str(url).startswith(("http://", "https://")) \
                    and not _placeholder(current, str(url)):
                parts = urlsplit(str(url))
                return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"
        current = current.__cause__ or current.__context__
    return None


@record(frozen=True)
class Problem:
    """One thing wrong in a file: ``where`` is ``FILE:LINE:COL`` (or just ``FILE``)."""

    where: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text}\n  hint: {self.hint}" if self.hint else text


def not_utf8(path: Any) -> Problem:
    """Where a file that is not UTF-8 text first breaks (``FILE:LINE:COL``, the byte), read again a line at a time as
    bytes: the one wording of that mistake for every file a dataset names (docs/datasets.md)."""
    with open(path, "rb") as handle:
        packed = _packed(handle.read(6), str(path))
        if packed is not None:
            return packed
        handle.seek(0)
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                column = len(raw[:exc.start].decode("utf-8", "replace")) + 1
                return Problem(f"{path}:{number}:{column}", f"the file is not UTF-8 text (byte {raw[exc.start]:#04x})",
                               "save it as UTF-8")
    return Problem(str(path), "the file is not UTF-8 text", "save it as UTF-8")


COMPRESSED = {b"\x1f\x8b": ("gzip", "gunzip -k"), b"\x28\xb5\x2f\xfd": ("zstd", "zstd -d"),
              b"\xfd7zXZ\x00": ("xz", "unxz -k")}
"""A compressed file's magic bytes (none of them UTF-8 text), its format and the command that decompresses it."""
PROTOBUF_SUFFIXES = (".pb", ".binpb", ".protobuf")


def _packed(head: bytes, path: str) -> Problem | None:
    """A file that is compressed, or named as OTLP protobuf, said as such rather than as text that is not UTF-8
    (docs/datasets.md)."""
    for magic, (name, command) in COMPRESSED.items():
        if head.startswith(magic):
            return Problem(f"{path}:1:1", f"the file is {name}-compressed, not text",
                           f"decompress it ({command} {path}) and name the file it gives")
    if path.lower().endswith(PROTOBUF_SUFFIXES):
        return Problem(f"{path}:1:1", "the file is not UTF-8 text: binary (protobuf) traces are not read",
                       "export OTLP JSON instead (the OpenTelemetry collector's file exporter writes it by default)")
    return None


LONE_SURROGATE = ("the escape {escape} names half of a UTF-16 surrogate pair alone, not a character: no text can "
                  "hold it")
"""The one wording of a lone surrogate escape in any file a dataset names (docs/datasets.md)."""
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
"""One escape of a JSON string; read left to right, ``\\\\`` is an escape of its own (no backslash stands outside a
string in valid JSON)."""


def lone_surrogate(path: Any, text: str, first_line: int = 1) -> Problem | None:
    """Where valid JSON ``text`` (starting on line ``first_line`` of ``path``) escapes half a surrogate pair alone
    (``"\\ud800"``): ``json`` reads it into a string that cannot be written as UTF-8, so nothing could store it.
    ``None`` when every ``\\uD800``-``\\uDFFF`` escape is one half of a pair (a character past U+FFFF)."""
    found = lone_surrogate_at(text)
    if found is None:
        return None
    line, column, escape = found
    where = f"{path}:{first_line + line - 1}:{column}"
    return Problem(where, LONE_SURROGATE.format(escape=escape),
                   "write the character itself, or both halves of its pair (\\ud83d\\ude00), or remove the escape")


def lone_surrogate_at(text: str) -> tuple[int, int, str] | None:
    """The line and column (1-based) in valid JSON ``text`` of the first escape of half a surrogate pair alone, and
    that escape; ``None`` when there is none (``lone_surrogate``: the one test of every JSON file a dataset names,
    docs/datasets.md)."""
    if "\\u" not in text or _SURROGATE.search(text) is None:  # the common case, at C speed
        return None
    pending: re.Match[str] | None = None  # a high half waiting for its low half right after it
    for match in _ESCAPE.finditer(text):
        code = int(match[1], 16) if match[1] else -1
        if pending is not None:
            if match.start() == pending.end() and 0xDC00 <= code <= 0xDFFF:
                pending = None
                continue
            break
        if 0xD800 <= code <= 0xDBFF:
            pending = match
        elif 0xDC00 <= code <= 0xDFFF:
            pending = match
            break
    if pending is None:
        return None
    start = pending.start()
    return 1 + text.count("\n", 0, start), start - text.rfind("\n", 0, start), pending[0]


class EvalcliError(Exception):
    """A mistake the user can fix; never shown with a traceback unless ``--debug``."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class DatasetError(EvalcliError):
    """A dataset or registry file that cannot be used; carries every problem found, in file order (files in the order
    first met, then by line and column), each once, and without the consequences of an unset environment variable
    (the value it left empty) at the variable's own place."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = in_file_order(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return self.message


UNSET_VARIABLE = "environment variable "
"""How the problem of an unset ``${VARIABLE}`` begins: a problem at its place reads its empty value."""


def _place(where: str) -> tuple[str, int, int]:
    """``FILE:LINE:COL`` (or ``FILE:LINE``, or ``FILE``) as (file, line, column); no line sorts first."""
    parts = where.rsplit(":", 2)
    numbers = [p for p in parts[1:] if p.isdigit()]
    file = where if not numbers else where[: len(where) - len(":".join(numbers)) - 1]
    line, column = ([int(n) for n in numbers] + [0, 0])[:2]
    return file, line, column


def in_file_order(problems: list[Problem]) -> list[Problem]:
    """Problems each once, files in the order first met and each file's by line and column. A problem at the place
    of an unset environment variable other than that one is its consequence (the empty value): left out."""
    unset = {p.where for p in problems if p.message.startswith(UNSET_VARIABLE) and p.message.endswith(" is not set")}
    kept: list[Problem] = []
    for problem in problems:
        consequence = problem.where in unset and not problem.message.startswith(UNSET_VARIABLE)
        if problem not in kept and not consequence:
            kept.append(problem)
    files = {file: n for n, file in enumerate(dict.fromkeys(_place(p.where)[0] for p in kept))}
    return sorted(kept, key=lambda p: (files[_place(p.where)[0]], *_place(p.where)[1:]))


class TargetError(EvalcliError):
    """The target named by ``module:attribute`` cannot be imported or called."""


class UsageError(EvalcliError):
    """A bad command-line invocation (unknown run id, bad --shard, ...)."""


class StoreError(EvalcliError):
    """The SQLite store cannot be opened or does not hold what was asked for."""


def locked_database(exc: BaseException) -> StoreError | None:
    """SQLite's "database is locked" (another program held the file past the store's busy timeout): the user's
    situation, said as such (exit 2), not a bug's internal error; ``None`` for anything else (docs/storage.md)."""
    if type(exc).__module__ == "sqlite3" and "database is locked" in str(exc):
        return StoreError("the database is locked by another program (evalcli waited 30 s for it to let go)",
                          "wait for the other evalcli command or program using it to finish, or give another --db")
    return None


class PluginError(EvalcliError):
    """An installed package's entry point in evalcli's groups cannot be used (docs/extending.md): it cannot be
    loaded, it is not what its group takes, or its name is taken. The message names the package and the entry point."""


def base_url(value: Any) -> Any:
    """A check for a model's ``api_base`` (docs/models.md): an http:// or https:// URL. ``localhost:8000/v1``, the
    scheme forgotten, was taken, then every call failed at run time, each conversation's error (``None`` and a blank
    value, as ``${JUDGE_API_BASE:-}`` gives, pass: the provider's environment variables decide then)."""
    if isinstance(value, str) and value.strip() and not value.strip().lower().startswith(("http://", "https://")):
        shown = value.strip()
        hint = f": write http://{shown}" if shown and "://" not in shown else ""
        raise ValueError(f"api_base must be an http:// or https:// URL, got {shown!r}{hint}")
    return value


def not_blank(message: str) -> Callable[[Any], Any]:
    """A check for a pydantic ``AfterValidator``: a string that is empty or only white space is a mistake, and
    ``message`` says what to write instead (``None``, for an optional field, passes)."""
    def check(value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError(message)
        return value

    return check
