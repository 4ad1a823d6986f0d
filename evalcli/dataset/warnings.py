"""What ``evalcli validate`` warns about a valid dataset: things that would fail at run time, found without running.

A judge's or simulated user's model that cannot be reached as configured (a missing package, an unset
provider key) cannot be fixed by retrying, so it is named before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..llm import model_problem
from ..scorers import find
from .items import Dataset


def dataset_models(dataset: Dataset) -> Iterator[tuple[str, str]]:
    """(model, what uses it) for every judge and simulated user of a dataset, and a model target."""
    for spec in dataset.all_specs():
        kind = find(spec.kind)
        if kind is None or not kind.needs_model:
            continue
        models = spec.args.get("models") or [spec.args.get("model")]  # a panel's models, else the one
        for model in models:
            if isinstance(model, str):
                yield model, f"scorer {spec.id}"
    for item in dataset.items:
        if item.simulation is not None:
            yield item.simulation.model, f"the simulated user of item {item.id}"
    model = getattr(dataset.target, "target_model", None)
    if isinstance(model, str):
        yield model, f"the target {dataset.target_spec}"


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
