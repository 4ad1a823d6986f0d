"""What a run says once, before it starts: targets that cannot remember."""

from __future__ import annotations

from ..dataset import Dataset, Item
from ..targets import FormAdapter


def memory_warning(dataset: Dataset, items: list[Item]) -> str | None:
    """Once per run: multi-turn conversations against a target that shows no memory. evalcli cannot see whether a
    function keeps its own history per thread, so it says what it knows and how to say otherwise."""
    target = dataset.target
    # the first conversation that recalls is enough to ask the target (a mastra target asks its server); every one
    # is counted only for the warning itself
    if target is None or not any(map(_recalls, items)) or dataset.remembers:
        return None
    count = sum(map(_recalls, items))
    conversations = f"{count} multi-turn conversation{'s' if count != 1 else ''}"
    if isinstance(target, FormAdapter) and dataset.target_has_memory is None:
        # an http/mastra/model target's settings say whether it is given the thread: that is known, not guessed
        return (f"target {dataset.target_spec} has no memory: its {conversations} will run, but no turn can recall "
                f"the earlier ones ({target.memory_hint}; or, if it keeps its own history, 'target_has_memory: true' "
                "in the dataset)")
    memory = getattr(target.obj, "memory", _MISSING)
    known = "has no 'memory' attribute" if memory is _MISSING else f"has memory = {memory!r}"
    if dataset.target_has_memory is False:
        known = "is declared 'target_has_memory: false' in the dataset"
    return (f"target {dataset.target_spec} {known}: if it keeps no history of its own per thread, no turn of its "
            f"{conversations} can recall the earlier ones (they run anyway); if it does keep one, say so with "
            "'memory = True' on the target or 'target_has_memory: true' in the dataset")


_MISSING = object()


def _recalls(item: Item) -> bool:
    """Whether a later turn of the conversation could need an earlier one: a target called more than once on one
    thread (a one-turn ``turns:`` item, or a recording, never is)."""
    if not item.multi_turn or item.recorded:
        return False
    if item.simulation is not None:
        return item.simulation.max_turns > 1
    return len(item.inputs) > 1
