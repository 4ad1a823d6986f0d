"""Budgets (docs/reliability.md, Budgets): ``--max-cost`` and ``--max-tokens``, per purpose or for every purpose
together. A call asks ``Budget.refusal`` at the moment it would be sent (``LLMClient``, after every wait), so a run
passes a budget by at most the calls already in flight when it was spent; a resumed run's budget starts from what
every earlier attempt spent. A cost budget needs prices: ``check_cost_budget`` refuses one over a model litellm's
table does not price."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import Any

from ..errors import UsageError
from ..records import record

PURPOSES = ("target", "simulator", "judge")
"""What LLM calls are for, as usage is reported (docs/budgets.md); ``evalcli.Agent``'s calls (purpose ``agent``) and a
framework agent's count as ``target``."""


def dollars(amount: float) -> str:
    """An amount of US dollars as a person reads it: four places (``$0.0420``), or two significant digits below a
    hundredth of a cent (``$4.2e-05``), so a spent limit never reads ``$0.0000``."""
    return f"${amount:.4f}" if amount == 0 or abs(amount) >= 0.0001 else f"${amount:.2g}"


def purpose_group(purpose: str) -> str:
    """The purpose a call's usage is reported under: ``agent`` (evalcli.Agent, the target) as ``target``."""
    return "target" if purpose == "agent" else purpose


@record
class Budget:
    """``--max-cost`` and ``--max-tokens`` (docs/reliability.md, Budgets): per purpose, or for every purpose together
    (key ``None``). No call of a purpose whose budget is spent is sent; what was spent is counted as calls are
    recorded (on a resume, every earlier invocation's calls included)."""

    max_cost: dict[str | None, float] = field(default_factory=dict)
    max_tokens: dict[str | None, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    """Spent so far, per purpose."""
    tokens: dict[str, int] = field(default_factory=dict)
    spent: str | None = None
    """Why the first call was refused (``None`` while none was): the run is marked ``budget``."""

    @property
    def active(self) -> bool:
        return bool(self.max_cost or self.max_tokens)

    def add(self, purpose: str, tokens: int, cost: float) -> None:
        group = purpose_group(purpose)
        self.tokens[group] = self.tokens.get(group, 0) + tokens
        self.cost[group] = self.cost.get(group, 0.0) + cost

    def add_rows(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """``usage_summary`` rows (a resumed run's kept conversations)."""
        for purpose, _calls, _hits, prompt, completion, cost in rows:
            self.add(str(purpose), int(prompt or 0) + int(completion or 0), float(cost or 0))

    def refusal(self, purpose: str) -> str | None:
        """Why a new call for ``purpose`` may not start (a budget of it, or of every purpose, is spent), or ``None``."""
        group = purpose_group(purpose)
        for key, limit in self.max_cost.items():
            used = sum(self.cost.values()) if key is None else self.cost.get(group, 0.0)
            if (key is None or key == group) and used >= limit:
                return self._refuse(f"the {'' if key is None else key + ' '}cost budget of ${limit:g} is spent "
                                    f"({dollars(used)})")
        for key, most in self.max_tokens.items():
            count = sum(self.tokens.values()) if key is None else self.tokens.get(group, 0)
            if (key is None or key == group) and count >= most:
                return self._refuse(f"the {'' if key is None else key + ' '}token budget of {most} is spent "
                                    f"({count} tokens)")
        return None

    def _refuse(self, reason: str) -> str:
        self.spent = self.spent or reason
        return reason


def parse_budget(text: str, option: str, whole: bool) -> dict[str | None, float]:
    """``--max-cost 5`` (every purpose together) or ``--max-cost judge=2,target=3,simulator=1`` (per purpose; both may
    be mixed: ``5,judge=2``). ``whole``: the amounts are counts (tokens). A mistake is a ``ValueError`` saying what to
    write."""
    budget: dict[str | None, float] = {}
    example = "--max-tokens 100000 or --max-tokens judge=20000,target=50000" if whole else \
        "--max-cost 5 or --max-cost judge=2,target=3,simulator=1"
    for part in (p.strip() for p in text.split(",")):
        name, _, amount = part.rpartition("=")
        key = name.strip() or None
        if key is not None and key not in PURPOSES:
            raise ValueError(f"{option}: '{key}' is not a purpose (target, simulator or judge); write {example}")
        try:
            value = float(amount)
        except ValueError:
            raise ValueError(f"{option}: '{amount.strip()}' is not a number; write {example}") from None
        if not value >= 0 or value == float("inf") or (whole and not value.is_integer()):
            raise ValueError(f"{option}: '{amount.strip()}' must be a {'whole number' if whole else 'number'} of "
                             f"{'tokens' if whole else 'US dollars'}, 0 or more; write {example}")
        if key in budget:
            raise ValueError(f"{option} names {key or 'the overall budget'} twice; write {example}")
        budget[key] = int(value) if whole else value
    return budget


def check_cost_budget(max_cost: dict[str | None, float], uses: Iterable[tuple[str, str, str]], where: str) -> None:
    """A ``UsageError`` (exit 2) when ``--max-cost`` covers a purpose one of whose models has no price: its calls
    would cost $0 and the budget would never be spent. ``uses``: (model, purpose, what uses it) of every model the
    run is known to call; ``where``: the dataset, for the message. The embedded local model is free: priced at 0."""
    if not max_cost:
        return
    covered = set(PURPOSES) if None in max_cost else {key for key in max_cost if key is not None}
    unpriced = _unpriced(uses, covered)
    if unpriced:
        named = "; ".join(f"{model} ({_first(users)})" for model, users in unpriced.items())
        their = "its" if len(unpriced) == 1 else "their"
        raise UsageError(f"{where}: --max-cost cannot be counted: litellm's price table has no price for "
                         f"{named}, so {their} calls would cost $0 and the budget would never be spent",
                         "bound the run with --max-tokens instead (e.g. --max-tokens judge=20000,target=50000), or "
                         "give --max-cost only for the purposes whose models are priced")


def check_limit_prices(uses: Iterable[tuple[str, str, str]], where: str) -> None:
    """A ``UsageError`` (exit 2) when a conversation's ``limits: {cost}`` counts calls of a model litellm's table does
    not price (docs/budgets.md): they would cost $0 and the limit would never be reached. ``uses``: (model, purpose,
    what uses it) of the models the limited conversations are known to call (the target's and simulated users')."""
    listed = list(uses)
    unpriced = _unpriced(listed, set(PURPOSES)) if listed else {}  # no cost limit: litellm's table is not read
    if unpriced:
        named = "; ".join(f"{model} ({_first(users)})" for model, users in unpriced.items())
        their = "its" if len(unpriced) == 1 else "their"
        raise UsageError(f"{where}: limits.cost cannot be counted: litellm's price table has no price for {named}, "
                         f"so {their} calls would cost $0 and the limit would never be reached",
                         "bound the conversations with limits: {tokens: N} instead (tokens in and out of their calls)")


def _unpriced(uses: Iterable[tuple[str, str, str]], covered: set[str]) -> dict[str, list[str]]:
    """The models of ``uses`` of a ``covered`` purpose that have no price, each with what uses it."""
    from .catalog import priced  # litellm's table, read only for a cost bound (docs/performance.md)
    from .local_model import is_local

    unpriced: dict[str, list[str]] = {}
    for model, purpose, user in uses:
        if purpose_group(purpose) in covered and not is_local(model) and not priced(model):
            unpriced.setdefault(model, []).append(user)
    return unpriced


NAMED = 3
"""How many users of an unpriced model the ``--max-cost`` refusal names (then how many more)."""


def _first(users: list[str]) -> str:
    """The first ``NAMED`` users, then how many more (a dataset of a thousand simulated users is one line)."""
    return ", ".join(users[:NAMED]) + (f" and {len(users) - NAMED} more" if len(users) > NAMED else "")
