"""How a dataset is run (``RunOptions``) and its scoring plan: what the runner and a resume both read, and what a
run's row keeps of them (``StoredOptions``). ``plan_run`` (``run/plan.py``) checks them, once."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import field
from pathlib import Path

from ..dataset import Dataset, Selection, model_uses
from ..errors import UsageError
from ..llm import check_cost_budget, check_limit_prices
from ..passrate import DEFAULT_MAX_PLAYS
from ..records import record
from ..results import ItemResult, Plan
from ..secret_references import bears_secret
from ..secret_references import stored as with_references
from ..store import StoredOptions


@record(frozen=True)
class RunOptions:
    """How to run a dataset; every field has the CLI's default. Checked once, where the run is planned
    (``plan_run``)."""

    concurrency: int | None = None
    """Conversations in flight; ``None`` takes the dataset's ``concurrency``."""
    judge_concurrency: int = 8
    """Judge calls in flight across all conversations."""
    use_cache: bool = True
    """Reuse cached judge and simulator replies (``--no-cache`` turns it off)."""
    strict: bool = False
    """Exit 3 on a ``scored`` verdict."""
    max_errors: int = 0
    """Item errors tolerated before the exit code says 4."""
    selection: Selection = field(default_factory=Selection)
    turn_timeout: float | None = None
    """Seconds one target call may take (its own call only, not time spent waiting) before the conversation
    is an error; ``None``: no limit."""
    resume: str | None = None
    """Continue this run id: keep finished conversations, run the rest."""
    rerun_failed: str | None = None
    """Run only the conversations that failed or errored in this run id (matched by identity, docs/history.md); the
    plan turns it into ``only_indexes``."""
    only_indexes: frozenset[int] | set[int] | None = None
    """Run only these item indexes (what ``rerun_failed`` selects)."""
    keep_items: bool = True
    """Keep every ``ItemResult`` in ``RunResult.items`` (the CLI reads them back from the store instead)."""
    handle_signals: bool = False
    """Install SIGINT/SIGTERM/SIGHUP handlers that stop the run cleanly (the CLI does: ``interrupting_signals``)."""
    grace_seconds: float = 5.0
    """After an interrupt, how long conversations in flight may take to finish before they are cancelled."""
    repeat: int = 1
    """Play each conversation this many times (with ``sequential``: at most); results are reduced by mean (pass@k
    and pass^k for gates)."""
    sequential: bool = False
    """``--repeat auto[:MAX]``: play a conversation again only while the sequential rule has not settled it
    (``passrate.settle``, docs/verdicts.md#sequential-repeats), at most ``repeat`` times."""
    pass_rate: float = 1.0
    """``--pass-rate P``: under repeats a gate passes on a conversation when at least P of its plays passed it
    (``passrate.passes_at_rate``); the sequential rule's threshold."""
    hermetic: bool = False
    """Every tool call no mock answers, and every replay miss, is the conversation's error (docs/hermetic.md)."""
    record_tools: str | None = None
    """Write every tool call to ``DIR/<dataset stem>.tape.jsonl`` (``--record-tools DIR``)."""
    tape_name: str | None = None
    """The tape's name in ``record_tools`` instead of the dataset's stem: the CLI gives each run of a command of
    several (datasets with one stem, several ``--target``) a tape of its own (docs/hermetic.md, "Tapes")."""
    max_cost: dict[str | None, float] = field(default_factory=dict)
    """``--max-cost``: US dollars per purpose (``target``, ``simulator``, ``judge``), or for all (key ``None``)."""
    max_tokens: dict[str | None, float] = field(default_factory=dict)
    """``--max-tokens``: tokens (in and out) per purpose, or for all (key ``None``)."""
    workers: int = 1
    """``--workers N``: processes playing the run's conversations (docs/performance.md#workers)."""
    on_stored: Callable[[ItemResult], None] | None = None
    """Called in the writer thread with each conversation as it is stored (read back from the rows just written, as
    ``Store.load_items`` reads it), in the order they finish; it must not raise. The CLI renders each one's JSON
    there, while the run goes on, instead of reading them all back after it."""

    def stored(self, plan: Plan, config: dict[str, str] | None = None,
               shards_held: list[int] | None = None) -> StoredOptions:
        """What the run's row keeps of these options (and of its plan, the dataset's configuration and, sharded, the
        shards that hold a conversation: ``Selection.shards_held``)."""
        selection = self.selection
        written = None if selection.filter is None or not bears_secret(selection.filter) else with_references(selection.filter)
        return StoredOptions(plan, selection.filter, selection.shard, selection.limit, self.strict, self.max_errors,
                             self.repeat, sorted(self.only_indexes or []) or None, config, self.sequential,
                             self.pass_rate, shards_held, written, self.hermetic,
                             str(Path(self.record_tools).absolute()) if self.record_tools else None, self.tape_name)


def plan_of(dataset: Dataset) -> Plan:
    """The dataset's top-level gates and scorers, by id, with the scorers' thresholds."""
    return Plan([g.id for g in dataset.gates], [s.id for s in dataset.scorers],
                {s.id: s.threshold.raw for s in dataset.scorers if s.threshold is not None})


def check_budgets(dataset: Dataset, options: RunOptions) -> None:
    """A ``UsageError`` before anything runs when the options' budgets cannot be counted for this dataset: a
    ``--max-cost`` over a model without a price (docs/reliability.md, Budgets), or a conversation's ``limits: {cost}``
    over one (docs/budgets.md)."""
    check_cost_budget(options.max_cost, model_uses(dataset), dataset.path)
    check_limit_prices(limited_uses(dataset), dataset.path)


def limited_uses(dataset: Dataset) -> Iterator[tuple[str, str, str]]:
    """(model, purpose, what uses it) of the models a conversation under ``limits: {cost}`` is known to call: a model
    target's, and its own simulated user's (what a conversation's limits count: docs/reliability.md)."""
    target = dataset.target.target_model if dataset.target is not None else None
    for item in dataset.items:
        limits = dataset.limits_of(item)
        if limits is None or limits.cost is None:
            continue
        if target is not None:
            yield target, "target", f"the target {dataset.target_spec}"
            target = None  # named once
        if item.simulation is not None:
            yield item.simulation.model, "simulator", f"the simulated user of item {item.id}"


def parse_repeat(text: str) -> tuple[int, bool]:
    """``--repeat N`` -> (N, False); ``--repeat auto[:MAX]`` -> (MAX, True), MAX default 10 and at least 2
    (docs/verdicts.md#sequential-repeats)."""
    written = text.strip().lower()
    auto = written == "auto" or written.startswith("auto:")
    count = written.removeprefix("auto").removeprefix(":") if auto else written
    if auto and written == "auto":
        return DEFAULT_MAX_PLAYS, True
    if re.fullmatch(r"[0-9]+", count) is None or int(count) < (2 if auto else 1):  # ASCII digits: '²' is isdigit()
        raise UsageError(f"--repeat {text}: not {'a maximum of 2 plays or more' if auto else 'a number of plays'}",
                         "write --repeat 5 (every conversation 5 times), --repeat auto (again only while undecided, "
                         "at most 10 times) or --repeat auto:20")
    return int(count), auto


def check_pass_rate(pass_rate: float) -> None:
    """``--pass-rate``: a share above 0 and at most 1."""
    if isinstance(pass_rate, bool) or not isinstance(pass_rate, int | float) or not 0 < pass_rate <= 1:
        raise UsageError(f"--pass-rate {pass_rate}: not a share of plays above 0 and at most 1",
                         "write --pass-rate 0.8 (at least 80% of the plays), or leave it out (every play)")


def interrupting_signals() -> tuple[signal.Signals, ...]:
    """The signals that interrupt a run (docs/reliability.md): Ctrl-C, SIGTERM, and SIGHUP where there is one (a
    closed terminal, a dropped SSH session: it ended the process at once, its run left ``running``) unless it is
    ignored (``nohup evalcli run``: left so, the run goes on)."""
    hangup: signal.Signals | None = getattr(signal, "SIGHUP", None)
    if hangup is None or signal.getsignal(hangup) is signal.SIG_IGN:
        return (signal.SIGINT, signal.SIGTERM)
    return (signal.SIGINT, signal.SIGTERM, hangup)
