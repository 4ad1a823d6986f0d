"""What ``evalcli validate`` says about a valid dataset besides "ok": things that would fail at run time, found
without running, and the gates and scorers that are not registered.

A judge's or simulated user's model that cannot be reached as configured (a missing package, an unset
provider key) cannot be fixed by retrying, so it is named before anything runs.

A gate or scorer not registered in ``scorers.yaml`` scores as any other, and every run keeps its scores with the
conversations (``show``, ``diff``, ``compare``, the JSON, JUnit, Markdown and HTML reports all have them). What it
lacks is rows in the ``scores`` table (and its spec in ``scorers``): SQL over that table, and the HTML report's
chart of scorers across runs, which reads it, leave it out. ``validate`` lists each with the line that registers
it; a run says so only when it writes an HTML report.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..llm import model_problem
from ..scorers import ScorerSpec, find, registration_line
from .items import Dataset


def dataset_models(dataset: Dataset) -> Iterator[tuple[str, str]]:
    """(model, what uses it) for every judge and simulated user of a dataset, and a model target."""
    return ((model, user) for model, _, user in model_uses(dataset))


def model_uses(dataset: Dataset) -> Iterator[tuple[str, str, str]]:
    """(model, purpose, what uses it) for every judge (``judge``) and simulated user (``simulator``) of a dataset,
    and a model target (``target``): the models a run is known to call, by the purpose its usage counts under."""
    for spec in dataset.distinct_specs():  # identical references share one spec: a large dataset has few distinct ones
        kind = find(spec.kind)
        if kind is None or not kind.needs_model:
            continue
        models = spec.args.get("models") or [spec.args.get("model")]  # a panel's models, else the one
        for model in models:
            if isinstance(model, str):
                yield model, "judge", f"scorer {spec.id}"
    for item in dataset.items:
        if item.simulation is not None:
            yield item.simulation.model, "simulator", f"the simulated user of item {item.id}"
    model = dataset.target.target_model if dataset.target is not None else None
    if model is not None:
        yield model, "target", f"the target {dataset.target_spec}"


def model_routes(dataset: Dataset) -> Iterator[tuple[str, str | None]]:
    """(model, api_base) for every model the run may call: a judge's ``api_base`` decides its route (an
    OpenAI-compatible one is spoken to directly, never through litellm: docs/targets/index.md)."""
    for spec in dataset.distinct_specs():
        kind = find(spec.kind)
        if kind is None or not kind.needs_model:
            continue
        base = spec.args.get("api_base")
        for model in spec.args.get("models") or [spec.args.get("model")]:
            if isinstance(model, str):
                yield model, base if isinstance(base, str) else None
    for item in dataset.items:
        if item.simulation is not None:
            yield item.simulation.model, None
    target = dataset.target
    model = target.target_model if target is not None else None
    if model is not None:
        base = getattr(getattr(getattr(target, "target", None), "config", None), "api_base", None)
        yield model, base if isinstance(base, str) else None


def reachability_warnings(dataset: Dataset) -> list[str]:
    """One warning per model that cannot be reached as configured (each model once)."""
    seen: dict[str, str] = {}
    for model, user in dataset_models(dataset):
        seen.setdefault(model, user)
    warnings = []
    for model, user in seen.items():
        problem = model_problem(model)
        if problem:
            warnings.append(f"{dataset.path}: {user}: {problem}")
    return warnings


def unregistered(dataset: Dataset) -> list[ScorerSpec]:
    """The gates and scorers (top level and per turn) that score without storing rows, each id once, in the order
    they are written."""
    specs: dict[str, ScorerSpec] = {}
    for spec in dataset.distinct_specs():
        if not spec.registered:
            specs.setdefault(spec.id, spec)
    return list(specs.values())


def registry_name(dataset: Dataset) -> str:
    """Where the dataset's registry is (or would be): its path, else ``scorers.yaml``."""
    return dataset.registry.path or "scorers.yaml"


def registration_lines(dataset: Dataset) -> list[str]:
    """What ``validate`` prints about unregistered gates and scorers: a line naming them, then one line each that,
    pasted under ``scorers:`` in the registry, registers that configuration under its id (the dataset then needs
    no change); empty when every one is registered."""
    specs = unregistered(dataset)
    if not specs:
        return []
    head = (f"  {len(specs)} not registered in {registry_name(dataset)}: each run keeps their scores (show, diff, "
            "compare and the reports have them), but the 'scores' table has no rows of theirs, so SQL over it and the "
            "HTML report's chart across runs leave them out; to track them, add these lines under 'scorers:' there")
    return [head, *(f"    {registration_line(spec)}" for spec in specs)]


NAMED = 5
"""How many unregistered ids a run's warning names (then how many more)."""


def unregistered_warning(dataset: Dataset) -> str | None:
    """The line a run prints once (docs/storage.md): the gates and scorers not registered, what that loses (their rows in
    the 'scores' table, which SQL and the HTML report's chart across runs read), and where the lines that register
    them are."""
    ids = [spec.id for spec in unregistered(dataset)]
    if not ids:
        return None
    named = ", ".join(ids[:NAMED]) + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")
    them = "it" if len(ids) == 1 else "them"
    return (f"{named} of {dataset.path}: not registered in {registry_name(dataset)}, so the 'scores' table has no rows "
            f"for {them} and the HTML report's chart across runs leaves {them} out (the run keeps the scores: show, "
            f"diff, compare and the report's tables have them); 'evalcli validate {dataset.path}' prints the lines that "
            f"register {them}")
