"""Continuing a stored run (``--resume``) and re-running its failures (``--rerun-failed``), checked first.

A resumed run must add up to the run it continues: the same dataset (by name and content), the same
configuration (the target and its options, every gate and scorer as resolved from the dataset and
``scorers.yaml``, the simulated users' models) and the same run options (selection, ``--repeat``,
``--strict``, ``--max-errors``, ``--hermetic``), which a resume restores, as it restores the ``--record-tools``
folder a resume names none of. Anything else is refused, naming what differs
(exit 2): never a run scored two ways under one verdict. A re-run of failures is a new run, but of the
same dataset: the failures of another dataset's run are refused too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..dataset import Dataset, Item, Selection
from ..dataset.target import CODE as dataset_code
from ..errors import UsageError
from ..fingerprint import KEY_VARIABLE, SALT, differences, leaves, paths, unverifiable
from ..identity import LEGACY, identity_of, pair_by_identity
from ..results import ItemResult
from ..secret_references import Unresolved
from ..secret_references import restored as with_values
from ..secrets import REDACTED, redact_text
from ..store import Store, StoredOptions
from ..store.light import stored_items
from .options import RunOptions, plan_of

FLAGS = {"filter": "--filter", "shard": "--shard", "limit": "--limit", "repeat": "--repeat", "strict": "--strict",
         "max_errors": "--max-errors", "only_indexes": "--rerun-failed", "sequential": "--repeat auto",
         "pass_rate": "--pass-rate", "hermetic": "--hermetic"}
"""The run options a run keeps (``StoredOptions``), by the command-line flag that sets each."""
SOURCE = "target.source"
"""The paths of the target module's file in the resolved configuration (``dataset.target.source_of``): a change is
said, never refused (fixing the agent a run stopped on and resuming it is what a stopped run's error suggests); a
run stored before evalcli kept them is compared without them."""
CODE = f"{dataset_code}."
"""The paths of the files of the modules a dataset imports besides its target (custom scorers, ``setup``:
``dataset.target.sources_of``): said as ``SOURCE`` is, and compared only with a run that kept them."""
DEFAULTS: dict[str, Any] = {"filter": None, "shard": None, "limit": None, "repeat": 1, "strict": False,
                            "max_errors": 0, "only_indexes": None, "sequential": False, "pass_rate": 1.0,
                            "hermetic": False}


def flag_text(name: str, value: Any) -> str:
    """How an option reads on a command line: ``--repeat 3``, ``--strict``, ``--shard 1/4``, ``no --filter``."""
    flag = FLAGS[name]
    if value == DEFAULTS[name]:
        return f"no {flag}"
    if name in ("strict", "sequential", "hermetic"):
        return flag
    if name == "shard":
        return f"{flag} {value[0]}/{value[1]}"
    if name == "filter":
        return f"{flag} '{value}'"
    if name == "only_indexes":
        return f"{flag} (items {', '.join(map(str, value[:5]))}{', ...' if len(value) > 5 else ''})"
    return f"{flag} {value}"


def _values(options: StoredOptions) -> dict[str, Any]:
    return {"filter": stored_filter(options), "shard": options.shard, "limit": options.limit, "repeat": options.repeat,
            "strict": options.strict, "max_errors": options.max_errors, "only_indexes": options.only_indexes,
            "sequential": options.sequential, "pass_rate": options.pass_rate, "hermetic": options.hermetic}


def check_same_dataset(row: Mapping[str, Any], dataset: Dataset, what: str) -> None:
    """Refuse a stored run of another dataset (``what``: ``resume`` or ``re-run the failures of``)."""
    if row["dataset"] not in (dataset.name, dataset.path):
        other = row.get("dataset_path") or row["dataset"]
        raise UsageError(f"run {row['id']} is of dataset {row['dataset']}, not {dataset.name or dataset.path}: "
                         f"cannot {what} it with {dataset.path}",
                         f"name its own dataset: evalcli run {other} --{'resume' if what == 'resume' else 'rerun-failed'} "
                         f"{row['id']}")


def stored_filter(options: StoredOptions) -> str | None:
    """The ``--filter`` a run was started with. One that held a secret is stored redacted, and beside it with each
    secret as ``${NAME}`` (``filter_written``), whose values are put back here: the redacted one (``[redacted]``, a
    character class of a regex) selected other conversations than the run's (docs/secrets.md)."""
    if options.filter_written is None:
        return options.filter
    if REDACTED in options.filter_written:
        raise UsageError(f"the run's --filter held a secret that evalcli keeps by no variable: {options.filter} "
                         "cannot select its conversations again", "start the run afresh")
    try:
        return with_values(options.filter_written)  # type: ignore[no-any-return]
    except Unresolved as exc:
        raise UsageError(f"the run's --filter held the secret ${{{exc.args[0]}}}, which has no value now",
                         f"set {exc.args[0]} as it was when the run started") from None


def configuration_changes(row: Mapping[str, Any], stored: StoredOptions, dataset: Dataset) -> list[str]:
    """What differs between the configuration a run began with and the dataset's now, one label each."""
    if stored.config is not None and SALT in stored.config:  # the resolved configuration's fingerprint (docs/identity.md)
        tree = dataset.resolved_configuration()
        changes = differences(stored.config, tree)
        for kept in (SOURCE, CODE):  # a run stored before evalcli kept the code's files is compared without them
            if not any(path.startswith(kept) for path in stored.config):
                changes = [change for change in changes if not change.startswith(kept)]
        changes = collapsed(changes, *paths(stored.config, tree)) if changes else []
        return files_named(tapes_named(changes, tree), tree)
    if stored.config is None:  # a run stored before evalcli kept its configuration: compare what it kept
        changes = [] if _same_target(row, dataset) else ["target"]
        return changes + ([] if stored.plan == plan_of(dataset) else ["gates, scorers or thresholds"])
    now = dataset.configuration()
    changed = [f"{label} (changed)" for label, digest in stored.config.items() if label in now and now[label] != digest]
    removed = [f"{label} (removed)" for label in stored.config if label not in now]
    added = [f"{label} (added)" for label in now if label not in stored.config]
    return changed + removed + added


def _ancestors(path: str) -> list[str]:
    """``data[1].turns[0].gates.includes(a.b)`` -> ``data``, ``data[1]``, ``data[1].turns``, ... and the path itself
    (a dot or bracket inside an id's parentheses does not split it)."""
    found, depth = [], 0
    for n, char in enumerate(path):
        depth += (char == "(") - (char == ")")
        if depth == 0 and n and char in ".[":
            found.append(path[:n])
    return [*found, path]


def collapsed(changes: list[str], then: set[str], now: set[str]) -> list[str]:
    """``differences``' leaves, each removed or added one named by the shortest path whose whole subtree went or came
    (``data[1].turns[1].gates.includes(fine) (removed)`` for its kind, arguments and threshold), once; changed leaves
    as they are."""
    under = {"removed": {a for p in now for a in _ancestors(p)}, "added": {a for p in then for a in _ancestors(p)}}
    named: dict[str, None] = {}
    for change in changes:
        path, _, kind = change.rpartition(" (")
        kind = kind.rstrip(")")
        if kind in under:
            whole = next((a for a in _ancestors(path) if a not in under[kind]), None)
            path, kind = (path, "changed") if whole is None else (whole, kind)  # a leaf that became a subtree
        named[f"{path} ({kind})"] = None
    return list(named)


def edited(changes: list[str], shown: int = 8) -> str:
    """What an edit of the dataset changed, for the refusal: the paths of the resolved configuration that differ
    (``data[3].turns[1].gates...``, a few and how many more), or, when none does, that only its text did."""
    if not changes:
        return "its text changed, though no path of its configuration differs (a comment, the layout or labels)"
    more = f" and {len(changes) - shown} more" if len(changes) > shown else ""
    return ", ".join(changes[:shown]) + more


def tapes_named(changes: list[str], tree: Any) -> list[str]:
    """Changes with a replayed tape's content named by the tape's file (``tools.tape (changed: the content of
    tapes/weather.tape.jsonl)``): a tape is part of the configuration by content (docs/hermetic.md)."""
    now = dict(leaves(tree))
    named = []
    for change in changes:
        path, _, state = change.partition(" ")
        replay = now.get(path[:-len("tape")] + "replay") if path == "tools.tape" or path.endswith(".tools.tape") \
            else None
        named.append(f"{path} ({state.strip('()')}: the content of {replay})" if isinstance(replay, str) else change)
    return named


def files_named(changes: list[str], tree: Any) -> list[str]:
    """Changes with a setting read from a file (``system_file``) named by the file: ``target.model.system (changed:
    the content of prompts/system.txt)``, as a replayed tape is."""
    files = {path.removesuffix("_file"): value for path, value in leaves(tree)
             if path.endswith("_file") and isinstance(value, str)}
    named = []
    for change in changes:
        path, _, state = change.rpartition(" (")
        named.append(f"{path} ({state.rstrip(')')}: the content of {files[path]})" if path in files else change)
    return named


def _same_target(row: Mapping[str, Any], dataset: Dataset) -> bool:
    """Whether a stored run was of the dataset's target: as stored, its secrets redacted (a model target's system
    prompt holding one was refused as another target, with the same text on both sides of its error)."""
    return row["target"] in (dataset.target_spec, redact_text(dataset.target_spec))


def check_resumable(store: Store, run_id: str, dataset: Dataset) -> tuple[dict[str, Any], StoredOptions, list[str]]:
    """The stored run to continue (its row, its options, and a note when only the target's code changed since it
    began), or a ``UsageError`` saying why it cannot be: another dataset, a dataset file that changed, or a
    configuration that changed since it began."""
    row = store.require_run(run_id)
    check_same_dataset(row, dataset, "resume")
    resume = row["id"]
    if not _same_target(row, dataset):
        raise UsageError(f"run {resume} was of target {row['target']}, not {dataset.target_spec}",
                         "resume it with the target it ran against (--target TARGET when it was given one)")
    stored = store.options(resume)
    changes = configuration_changes(row, stored, dataset)
    code = [change for change in changes if change.startswith((SOURCE, CODE))]  # said, not refused (docs/identity.md)
    changes = [change for change in changes if not change.startswith((SOURCE, CODE))] + (code if changes != code else [])
    if row["dataset_hash"] and row["dataset_hash"] != dataset.hash:
        raise UsageError(f"{dataset.path} changed since run {resume} started: {edited(changes)}; its "
                         "results would not add up", f"run it afresh (evalcli run {dataset.path}) instead of resuming")
    if changes:
        raise UsageError(f"the configuration of {dataset.path} changed since run {resume} started: "
                         f"{', '.join(changes)}; resuming would score its conversations two ways under one verdict",
                         f"run it afresh (evalcli run {dataset.path}), or restore the configuration the run began with "
                         "(scorers.yaml, environment variables the dataset reads)")
    whose = "the target's" if all(c.startswith(SOURCE) for c in code) else \
        "the custom scorers' (or setup's)" if not any(c.startswith(SOURCE) for c in code) else \
        "the target's and the custom scorers' (or setup's)"
    notes = [f"{whose} code changed since run {resume} started: {', '.join(code)}; the conversations this "
             "resume plays run the code as it is now, those the run kept ran the code as it was (for one verdict of "
             f"one code: evalcli run {dataset.path}, or --rerun-failed {resume} for its failed conversations)"
             ] if code else []
    return row, stored, notes


def unverified_secrets(stored: StoredOptions, run_id: str) -> list[str]:
    """The note a resume gives when the run's secret-bearing leaves were keyed with another digest key than this
    machine's: their secrets cannot be compared here, so a changed secret would go unnoticed (docs/reliability.md,
    "Secrets"). Empty when every leaf was compared."""
    config = stored.config or {}
    paths = unverifiable(config) if SALT in config else []
    if not paths:
        return []
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return [f"run {run_id} was fingerprinted with another digest key than this machine's: a secret changed since "
            f"in {', '.join(paths[:5])}{more} cannot be noticed by this resume (the rest of each was compared); set "
            f"{KEY_VARIABLE} to the key of the machine that started the run to compare the secrets too"]


def option_conflicts(stored: StoredOptions, current: StoredOptions, names: list[str] | None = None) -> list[str]:
    """The options (``names``, default all) ``current`` sets differently from ``stored``, as ``(now vs then)`` texts."""
    then, now = _values(stored), _values(current)
    differ = [name for name in names or list(FLAGS) if now[name] != then[name]]
    if "sequential" in differ or "repeat" in differ:  # one flag sets both: --repeat 3, --repeat auto:10
        differ = [name for name in differ if name != "sequential"]
        if "repeat" not in differ:
            differ.insert(0, "repeat")
    return [f"{_flag_of(name, now)} (the run has {_flag_of(name, then)})" for name in differ]


def _flag_of(name: str, values: Mapping[str, Any]) -> str:
    """``flag_text``, with ``repeat`` read together with ``sequential`` as the one ``--repeat`` flag sets them:
    ``--repeat auto:10``, ``--repeat 3``, ``no --repeat`` (docs/verdicts.md#sequential-repeats)."""
    if name == "repeat" and values["sequential"]:
        return f"--repeat auto:{values['repeat']}"
    return flag_text(name, values[name])


def resume_options(store: Store, run_id: str, dataset: Dataset, options: RunOptions,
                   given: Mapping[str, Any] | None = None) -> RunOptions:
    """``options`` to continue run ``run_id``, with every option the run keeps restored from it (selection,
    ``repeat``, ``strict``, ``max_errors``, the items of a re-run). ``given`` holds the options a caller set
    explicitly (by ``RunOptions`` field or ``StoredOptions`` name: ``filter``, ``shard``, ``limit``, ``repeat``,
    ``strict``, ``max_errors``); one that differs from the run's is a ``UsageError``."""
    row, stored, _ = check_resumable(store, run_id, dataset)  # the note is the run's to say
    return restored(options, row, stored, given)


def restored(options: RunOptions, row: Mapping[str, Any], stored: StoredOptions,
             given: Mapping[str, Any] | None = None) -> RunOptions:
    """``options`` to continue the run of ``row`` (checked resumable), with the options it keeps (``stored``)
    restored; one of ``given`` (those a caller set explicitly) that differs from the run's is a ``UsageError``."""
    if given and given.get("sequential") and not stored.sequential and stored.repeat > 1:
        raise UsageError(f"--repeat auto cannot resume run {row['id']}: it plays every conversation a fixed "
                         f"{stored.repeat} times, and the conversations it finished were not decided by the sequential "
                         "rule, so one run would count its conversations two ways",
                         f"resume it as it was started (leave --repeat out, or --repeat {stored.repeat}), or start a "
                         "new run with --repeat auto")
    if given:
        asked = replace(stored, **{name: value for name, value in given.items() if name in FLAGS})
        conflicts = option_conflicts(stored, asked, [name for name in FLAGS if name in given])
        if conflicts:
            raise UsageError(f"resuming run {row['id']}: {'; '.join(conflicts)}",
                             "leave those flags out: resuming restores the options the run was started with "
                             "(or start a new run)")
    if options.record_tools is None and stored.record_tools is not None:  # the tape the run began (docs/hermetic.md)
        options = replace(options, record_tools=stored.record_tools, tape_name=stored.tape_name)
    return replace(options, resume=row["id"], selection=Selection(stored_filter(stored), stored.shard, stored.limit),
                   repeat=stored.repeat, sequential=stored.sequential, pass_rate=stored.pass_rate,
                   strict=stored.strict, max_errors=stored.max_errors, hermetic=stored.hermetic,
                   only_indexes=set(stored.only_indexes) if stored.only_indexes else None)


def rerun_indexes(store: Store, run_id: str, dataset: Dataset) -> set[int]:
    """The item indexes of ``dataset`` whose conversations errored or missed a gate in run ``run_id`` (a run of
    this dataset: another dataset's is a ``UsageError``), matched by identity (``evalcli.identity``)."""
    return rerun_selection(store, run_id, dataset)[0]


def rerun_selection(store: Store, run_id: str, dataset: Dataset) -> tuple[set[int], int]:
    """``rerun_indexes``, and how many of the run's failed conversations the dataset no longer has: an edited
    dataset plays exactly the failed conversations that still exist, wherever they moved."""
    row = store.require_run(run_id)
    check_same_dataset(row, dataset, "re-run the failures of")
    failed = [item for item in store.load_items(row["id"]) if not item.passed]
    pairs = pair_by_identity(failed, dataset.items)
    return {item.index for stored, item in pairs if stored is not None and item is not None}, \
        sum(1 for _, item in pairs if item is None)


def kept_results(store: Store, run_id: str, items: Sequence[Item], dataset_hash_matches: bool) -> KeptResults:
    """The finished conversations a resumed run keeps, by the index of the item each one is (matched by identity).
    Rows stored before evalcli kept identities are matched by position, which only a dataset of unchanged content
    (``dataset_hash_matches``: the resume checks it) makes the same conversation. Only which stored conversation is
    which item is held (one light pass over the stored run); the results themselves are read back one at a time when
    the run folds them (``KeptResults.results``: a resume of 100,000 conversations never holds them all,
    docs/performance.md#memory)."""
    by_identity = {item.identity: item.index for item in items}
    positions = {item.index for item in items} if dataset_hash_matches else set()
    found: dict[int, int] = {}
    for result in stored_items(store.conn, run_id, light=True):
        if result.status != "ok":
            continue
        index = by_identity.get(identity_of(result))
        if index is None and result.identity.startswith(LEGACY) and result.index in positions:
            index = result.index
        if index is not None:
            found[index] = result.index
    return KeptResults(store, run_id, found)


class KeptResults(Mapping[int, ItemResult]):
    """A resumed run's kept conversations by the index of the item each one is now, read from the store when
    asked (``results`` streams them all, in stored order)."""

    def __init__(self, store: Store, run_id: str, stored_index: dict[int, int]) -> None:
        self.store, self.run_id, self.stored_index = store, run_id, stored_index

    def __getitem__(self, index: int) -> ItemResult:
        for result in stored_items(self.store.conn, self.run_id, index=self.stored_index[index]):
            return replace(result, index=index)
        raise KeyError(index)

    def __contains__(self, index: object) -> bool:
        return index in self.stored_index

    def __iter__(self) -> Iterator[int]:
        return iter(self.stored_index)

    def __len__(self) -> int:
        return len(self.stored_index)

    def results(self, store: Store | None = None) -> Iterator[ItemResult]:
        """Every kept conversation, one at a time, with the index of its item now, read from ``store`` (the run's
        own: the one it was planned with may be closed by then; default: that one)."""
        now = {stored: index for index, stored in self.stored_index.items()}
        for result in (store or self.store).load_items(self.run_id):
            if result.index in now:
                yield replace(result, index=now[result.index])


def kept_values(kept: Mapping[int, ItemResult], store: Store | None) -> Iterator[ItemResult]:
    """A plan's kept conversations, streamed from ``store`` when they are a resume's (``KeptResults``)."""
    return kept.results(store) if isinstance(kept, KeptResults) else iter(kept.values())
