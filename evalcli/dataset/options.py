"""Each conversation's ``target_options`` (docs/targets/frameworks.md), checked before anything runs.

An item's own ``target_options`` are merged over the dataset's key by key (``targets.merge_options``) and
checked against the target's adapter like the dataset's: an option the agent does not take, or a value that
does not fit, is an error at the item. ``setup`` (dataset-wide or per item) is imported like a custom scorer.
A ``resume`` turn needs an agent that can be interrupted. What the adapter warns about the options the
conversations will run with (deps an agent declares but does not get, state keys a graph's input lacks) is
gathered into the dataset's warnings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import EvalcliError, Problem
from ..targets import DATASET_ONLY_OPTIONS, Adapter, merge_options, options_hint
from .imports import resolve_import
from .items import Item
from .located import Located
from .yamlsrc import Path, Positions


def item_options(items: list[Item], located: Located, dataset_options: dict[str, Any], adapter: Adapter | None,
                 problems: list[Problem]) -> list[Item]:
    """The items with their own ``target_options`` merged over the dataset's and checked (``adapter`` is ``None``
    when the target did not resolve: then only what needs no agent is checked)."""
    out = []
    for item in items:
        if item.target_options is not None:  # where the item is, only for an item that may have a problem
            _, pos, at = located[item.index]
            own = item.target_options
            where = (*at, "target_options")
            fixed = [name for name in own if name in DATASET_ONLY_OPTIONS]
            for name in fixed:
                problems.append(pos.problem((*where, name), f"item {item.index} ({item.id}): '{name}' holds for the "
                                                            "whole run and cannot be set per item",
                                            f"move '{name}' to the dataset's target_options", key=True))
            merged = merge_options(dataset_options, own)
            if adapter is not None and not fixed:
                found = type(adapter).option_problems(adapter.obj, merged)
                if found:
                    problems.append(pos.problem(where, f"item {item.index} ({item.id}): target_options: "
                                                       f"{'; '.join(found)}", options_hint(found), key=True))
            item = replace(item, target_options=merged)
        if adapter is not None and not adapter.resumes:
            for t, turn in enumerate(item.turns or ()):
                if turn.resume is not None:
                    _, pos, at = located[item.index]
                    problems.append(pos.problem((*at, "turns", t, "resume"),
                                                f"item {item.index} ({item.id}): turn {t} gives 'resume', but a "
                                                f"{adapter.name} target never waits on an interrupt",
                                                "only LangGraph graphs stop on interrupt(); write '- input: ...'",
                                                key=True))
        out.append(item)
    return out


def setups(items: list[Item], located: Located, dataset_options: dict[str, Any], problems: list[Problem],
           top: Positions) -> dict[str, Any]:
    """Every ``setup`` import path named (dataset-wide, per item), imported; a problem at each that does not."""
    named: list[tuple[Any, Positions, Path]] = []
    if "setup" in dataset_options:
        named.append((dataset_options["setup"], top, ("target_options", "setup")))
    for item in items:
        if item.target_options is not None and "setup" in item.target_options:
            own = item.target_options["setup"]
            if own is not dataset_options.get("setup"):
                _, pos, at = located[item.index]
                named.append((own, pos, (*at, "target_options", "setup")))
    resolved: dict[str, Any] = {}
    for spec, pos, where in named:
        if not isinstance(spec, str):
            problems.append(pos.problem(where, "'setup' is an import path", "write setup: module:function"))
            continue
        if spec in resolved:
            continue
        try:
            value = resolve_import(spec, what="setup")
        except EvalcliError as exc:
            problems.append(pos.problem(where, exc.message, exc.hint))
            continue
        if not callable(value):
            problems.append(pos.problem(where, f"setup '{spec}' is a {type(value).__name__}, not a function",
                                        "point at a function taking a ConversationInfo"))
            continue
        resolved[spec] = value
    return resolved


def missing_arguments(adapter: Adapter | None, dataset_options: dict[str, Any], items: list[Item],
                      where: Problem) -> list[Problem]:
    """A callable target's parameter that has no default and that no conversation's ``target_options`` gives: every
    call would raise ``TypeError`` (``where``: the target's place, its message and hint filled in here)."""
    from ..targets.callable import CallableAdapter, required_arguments

    if not isinstance(adapter, CallableAdapter):
        return []
    conversations = [item.target_options if item.target_options is not None else dataset_options for item in items]
    if not conversations or any("setup" in options for options in conversations):
        return []  # a setup's options are known only when it runs
    fn = getattr(adapter.fn, "__qualname__", "the target")
    missing = [name for name in required_arguments(adapter.obj) if any(name not in o for o in conversations)]
    return [replace(where, message=f"target '{adapter.spec}': {fn}() requires the argument '{name}', which evalcli "
                                   "does not pass: it calls the target with the user's message, memory= and the "
                                   "target_options",
                    hint=f"give '{name}' a default in the signature ({name}=None), or a value in target_options "
                         f"(target_options: {{{name}: ...}})") for name in missing]


def option_warnings(adapter: Adapter, dataset_options: dict[str, Any], items: list[Item]) -> list[str]:
    """What the adapter warns about the options the selected conversations will run with."""
    own = [(item.target_options, "setup" in item.target_options) for item in items if item.target_options is not None]
    shared = len(items) - len(own)
    conversations = own + [(dataset_options, "setup" in dataset_options)] * shared
    # two installed packages whose adapters recognise one agent: the first runs it, and the user hears of the other
    # (installing a package used to change which adapter ran an agent, silently: docs/extending.md)
    also = [f"target '{adapter.spec}': the {adapter.name} adapter runs it, and {', '.join(adapter.also_recognised)} "
            f"recognise{'s' if len(adapter.also_recognised) == 1 else ''} it too; name the one you mean with "
            f"'target_options: {{adapter: {adapter.name}}}'"] if adapter.also_recognised else []
    return also + (adapter.warnings(conversations) if conversations else [])
