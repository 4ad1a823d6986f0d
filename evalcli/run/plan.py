"""A run, planned before it starts (docs/python-api.md): ``plan_run`` checks everything a run depends on once (the
LLM settings of the environment, the selection, the budgets, a resume or a re-run of failures against the stored
run) and returns a frozen ``RunPlan``; the runner takes the plan and checks nothing again. What depends only on
the dataset and the options is computed here, once per run, never per conversation (docs/performance.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from functools import cached_property
from typing import Any

from ..dataset import Dataset, Item, Selection, check_filter, dataset_models, model_routes, unregistered_warning
from ..errors import UsageError
from ..fingerprint import fingerprint, shards_salt
from ..llm import PURPOSES, LLMSettings, backend_from_env, check_settings, model_problem
from ..records import record
from ..results import ItemResult, Plan
from ..secret_references import secret_check
from ..store import Store, StoredOptions, stored_usage
from .notices import memory_warning
from .options import RunOptions, check_budgets, check_pass_rate, plan_of
from .tooling import check_hermetic
from .trust import check_calibrated
from .worker_checks import MAX_WORKERS, check_worker_run


@record(frozen=True)
class RunPlan:
    """One run of one dataset, decided: the options it runs with (a resumed run's own restored), the conversations
    it plays and those it keeps, and what the runner would otherwise work out per conversation."""

    dataset: Dataset
    options: RunOptions
    """The options as run: a resume's restored from the stored run, a re-run's conversations in ``only_indexes``."""
    run_id: str | None
    """The resumed run's id; ``None`` for a new run, whose id is made when it starts (ids sort by when runs
    began)."""
    items: tuple[Item, ...]
    """The selected conversations, in dataset order (those a resume keeps included)."""
    settings: LLMSettings
    """The environment's LLM settings, read and checked once."""
    kept: Mapping[int, ItemResult] = field(default_factory=dict)
    """A resume's finished conversations, by the index of the item each one is."""
    kept_usage: tuple[tuple[Any, ...], ...] = ()
    """A resume's LLM calls of every earlier invocation (``usage_summary`` rows), those of the conversations played
    again included: they count against the budget and in the run's totals."""
    target: str | None = None
    """The ``--target`` the dataset was loaded with (``None``: its own)."""
    notes: tuple[str, ...] = ()
    """What planning found that the user should know, said once before the runs start (conversations a re-run no
    longer finds)."""
    nothing: str | None = None
    """Why no conversation is selected when none is (``None``: some are, or none for a reason that needs no
    telling, such as an empty shard)."""

    @property
    def to_run(self) -> list[Item]:
        """The conversations to play (the selected ones a resume does not keep)."""
        return [item for item in self.items if item.index not in self.kept]

    @cached_property
    def scoring(self) -> Plan:
        """The dataset's top-level gates and scorers, and the scorers' thresholds."""
        return plan_of(self.dataset)

    @cached_property
    def warnings(self) -> tuple[str, ...]:
        """What the run says when it starts: the dataset's validation warnings, and a target without memory."""
        found = (*self.dataset.warnings, memory_warning(self.dataset, list(self.items)),
                 unregistered_warning(self.dataset))
        return tuple(text for text in found if text)

    @cached_property
    def controls_tools(self) -> bool:
        """Whether the dataset writes ``tools:`` or ``unmocked: error`` anywhere (a scan of every item, once)."""
        return self.dataset.controls_tools

    @cached_property
    def registered(self) -> frozenset[str]:
        """The ids of the scorers whose scores are stored beside each conversation (``scorers.yaml``'s)."""
        return frozenset(spec.id for spec in self.dataset.all_specs() if spec.registered)

    @cached_property
    def models(self) -> tuple[tuple[str, str | None], ...]:
        """(model, api_base) of every model the run may call that can be reached (judges, simulated users, a model
        target): imported while the first conversations start."""
        return tuple((model, base) for model, base in model_routes(self.dataset) if model_problem(model) is None)

    @cached_property
    def model_names(self) -> tuple[str, ...]:
        """The models the run may call, as ``dataset_models`` lists them (reachable ones only)."""
        return tuple(model for model, _ in dataset_models(self.dataset) if model_problem(model) is None)

    def stored(self) -> StoredOptions | None:
        """What a new run's row keeps of its options and the dataset's resolved configuration (its fingerprint, one
        walk of every item); ``None`` for a resumed run, whose row keeps its own."""
        make = self.stored_later()
        return None if make is None else make()

    def stored_later(self) -> Callable[[], StoredOptions] | None:
        """``stored`` in two steps: what the run starts with is taken here (the configuration's tree, its
        conversations made only as they are walked, the plan and the secrets known now); the function returned makes
        the fingerprint, the walk of every conversation, wherever it is called: a new run's in the writer thread,
        beside its first turns (docs/performance.md#the-first-turn). ``None`` for a resumed run."""
        if self.options.resume:
            return None
        options, scoring, bears, items = self.options, self.scoring, secret_check(), self.dataset.items
        tree = self.dataset.resolved_configuration(streamed=True)
        shard = options.selection.shard  # a split's shards share a salt: merge compares their configurations
        salt = shards_salt(self.dataset.hash, shard[1]) if shard is not None else None
        return lambda: options.stored(scoring, fingerprint(tree, salt, bears), options.selection.shards_held(items))


def llm_settings() -> LLMSettings:
    """The environment's LLM settings, checked: ``EVALCLI_LLM_BACKEND``, then every other setting, each mistake a
    ``EvalcliError`` (exit 2) before anything runs (docs/models.md)."""
    backend_from_env()
    check_settings()
    return LLMSettings.from_env()


def check_budget_amounts(budget: Mapping[str | None, float], option: str) -> None:
    """``--max-cost`` / ``--max-tokens`` as ``RunOptions`` holds them: per purpose (``None``: every purpose
    together), each a finite amount of 0 or more (docs/models.md)."""
    for purpose, amount in budget.items():
        if purpose is not None and purpose not in PURPOSES:
            raise UsageError(f"{option}: '{purpose}' is not a purpose (target, simulator or judge)",
                             f"write e.g. {option} judge=2,target=3")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount < 0:
            raise UsageError(f"{option}: {amount!r} is not an amount (a number of 0 or more)",
                             f"write e.g. {option} 5")


# the bounds the command line's flags have (docs/python-api.md "One run plan"): (field, flag, least, integer)
_BOUNDS: tuple[tuple[str, str, float, bool], ...] = (
    ("concurrency", "--concurrency", 1, True), ("judge_concurrency", "--judge-concurrency", 1, True),
    ("max_errors", "--max-errors", 0, True), ("repeat", "--repeat", 1, True), ("turn_timeout", "--turn-timeout", 0.001, False),
    ("grace_seconds", "the grace after an interrupt", 0, False))


def check_numbers(options: RunOptions) -> None:
    """A number of ``RunOptions`` out of its flag's range, or not a number, is a ``UsageError`` as the flag's would be:
    the library's callers have no flag parser to refuse ``concurrency=0`` or ``turn_timeout=0`` (every conversation an
    error) before the run."""
    if not isinstance(options, RunOptions):
        raise UsageError(f"options must be a RunOptions, not {type(options).__name__}",
                         "write options=RunOptions(concurrency=4, ...) (from evalcli import RunOptions)")
    values = [(name, flag, least, whole, getattr(options, name)) for name, flag, least, whole in _BOUNDS]
    values.append(("selection.limit", "--limit", 0, True, options.selection.limit))
    for name, flag, least, whole, value in values:
        if value is None and name in ("concurrency", "turn_timeout", "selection.limit"):
            continue
        kind = int if whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or value < least:
            what = "a whole number" if whole else "a number"
            raise UsageError(f"RunOptions({name}={value!r}): {flag} takes {what} of at least {least:g}",
                             f"give {name} {what} of {least:g} or more" + (" (or None)" if name in (
                                 "concurrency", "turn_timeout", "selection.limit") else ""))


def check_options(options: RunOptions) -> None:
    """What the options say by themselves: numbers within their flags' ranges, a ``--filter`` that is a regular
    expression, budgets of known purposes."""
    check_numbers(options)
    check_filter(options.selection.filter)
    check_budget_amounts(options.max_cost, "--max-cost")
    check_budget_amounts(options.max_tokens, "--max-tokens")
    check_pass_rate(options.pass_rate)
    workers = options.workers
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        # as the other numbers: a caller's RunOptions, not the flag (was '--workers 2: ...' for workers='2')
        raise UsageError(f"RunOptions(workers={workers!r}): --workers takes a whole number from 1 to {MAX_WORKERS}",
                         f"give workers a whole number from 1 to {MAX_WORKERS} (evalcli.run.worker_checks.usable_cores()"
                         " is what --workers auto uses)")
    if options.sequential and options.repeat < 2:
        raise UsageError(f"--repeat auto:{options.repeat}: at most {options.repeat} play leaves nothing to decide",
                         "write --repeat auto (at most 10 plays) or --repeat auto:MAX with MAX of 2 or more")


def plan_run(dataset: Dataset, options: RunOptions | None = None, store: Store | None = None, *,
             given: Mapping[str, Any] | None = None, settings: LLMSettings | None = None,
             target: str | None = None) -> RunPlan:
    """Check and plan one run of ``dataset``: the options and the LLM settings (``settings``: read, and the options
    checked, by a caller planning several runs, ``plan_runs``), a re-run of ``options.rerun_failed``'s failures and
    a resume of ``options.resume`` against ``store`` (each a ``UsageError`` saying why it cannot be). With ``given``
    (the options a caller set explicitly, by name: ``filter``, ``shard``, ``limit``, ``repeat``, ``strict``,
    ``max_errors``) a resume restores every option the run keeps and refuses only a given one that differs; without
    it, ``options`` must already be the run's own."""
    options = options or RunOptions()
    if settings is None:
        check_options(options)
        settings = llm_settings()
    notes: list[str] = []
    if options.rerun_failed:
        options, note = _rerun(dataset, options, _needs(store, "--rerun-failed"))
        notes += [note] if note else []
    run_id: str | None = None
    kept: Mapping[int, ItemResult] = {}
    kept_usage: tuple[tuple[Any, ...], ...] = ()
    if options.resume:
        options, row, unchecked = _resume(dataset, options, _needs(store, "--resume"), given)
        run_id = row["id"]
        notes += unchecked
    check_budgets(dataset, options)  # a resume's restored options included
    check_hermetic(dataset, options.hermetic)
    check_worker_run(dataset, options)
    check_calibrated(dataset, store)  # a gate on an unmeasured judge: refused (docs/judges.md#calibrated-gates)
    items = _selected(dataset, options)
    if options.resume:
        assert store is not None and run_id is not None
        from .resume import kept_results  # only a resume reads what it keeps (docs/performance.md)

        kept = kept_results(store, run_id, items, row["dataset_hash"] == dataset.hash)
        kept_usage = tuple(stored_usage(store, run_id))
    return RunPlan(dataset, options, run_id, tuple(items), settings, kept, kept_usage, target, tuple(notes),
                   None if items else _why_none(dataset, options))


def _needs(store: Store | None, flag: str) -> Store:
    if store is None:
        raise UsageError(f"{flag} needs a database", "pass --db PATH")
    return store


def _rerun(dataset: Dataset, options: RunOptions, store: Store) -> tuple[RunOptions, str | None]:
    """The options playing only the failed conversations of ``options.rerun_failed`` that the dataset still has,
    and a note when some of them are gone."""
    from .resume import rerun_selection

    run_id = options.rerun_failed
    assert run_id is not None
    indexes, gone = rerun_selection(store, run_id, dataset)
    note = None
    if gone:
        note = (f"{gone} failed conversation{'s' if gone != 1 else ''} of run {run_id} "
                f"{'is' if gone == 1 else 'are'} no longer in {dataset.path} (by identity: an edited or removed item "
                f"is another conversation); re-running the {len(indexes)} that still exist")
    return replace(options, only_indexes=frozenset(indexes)), note


def _resume(dataset: Dataset, options: RunOptions, store: Store,
            given: Mapping[str, Any] | None) -> tuple[RunOptions, Mapping[str, Any], list[str]]:
    """The resumed run's options (restored when ``given`` says which the caller set), its row and what the resume
    could not check (``unverified_secrets``); a ``UsageError`` when it cannot be resumed with this dataset and these
    options."""
    from ..store.run_lock import refuse_if_playing
    from .resume import check_resumable, option_conflicts, restored, unverified_secrets

    assert options.resume is not None
    row, stored, code = check_resumable(store, options.resume, dataset)
    refuse_if_playing(store.path, row["id"])
    unchecked = code + unverified_secrets(stored, row["id"])
    if given is not None:
        return restored(options, row, stored, given), row, unchecked
    conflicts = option_conflicts(stored, options.stored(plan_of(dataset)))
    if conflicts:
        raise UsageError(f"resuming run {row['id']} with other options: {'; '.join(conflicts)}",
                         "continue it with the options it was started with (evalcli.run.resume_options reads them)")
    return options, row, unchecked


def _selected(dataset: Dataset, options: RunOptions) -> list[Item]:
    items = options.selection.apply(dataset.items)
    if options.only_indexes is not None:
        items = [item for item in items if item.index in options.only_indexes]
    return items


def _why_none(dataset: Dataset, options: RunOptions) -> str | None:
    """Why the options select no conversation, when that needs saying (``None``: an empty shard, or a re-run whose
    failures are all gone)."""
    items = dataset.items
    if options.only_indexes is not None:
        items = [item for item in items if item.index in options.only_indexes]
        if not items:
            return None
    selection = options.selection
    if selection.filter and not Selection(filter=selection.filter).apply(items):
        return (f"--filter '{selection.filter}' matches no conversation of {dataset.path} (it searches ids, tags "
                "and first inputs)")
    if selection.limit == 0:
        return "--limit 0 selects no conversation"
    return None
