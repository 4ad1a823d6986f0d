"""What a run says once, before it starts: targets that cannot remember, gates and scorers not stored."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..dataset import Dataset, Item
from ..scorers import ScorerSpec


def memory_warning(dataset: Dataset, items: list[Item]) -> str | None:
    """Once per run: multi-turn conversations against a target that cannot remember."""
    count = sum(1 for i in items if i.multi_turn)
    if not count or dataset.target is None or dataset.target.has_memory:
        return None
    return (f"target {dataset.target_spec} has no memory: its {count} multi-turn "
            f"conversation{'s' if count != 1 else ''} will run, but no turn can recall the earlier ones "
            f"({dataset.target.memory_hint})")


def unregistered_warning(dataset: Dataset) -> str | None:
    """Once per run, one line: which inline gates and scorers score without storing rows, and how to register
    the first of them (an example built from the user's own reference)."""
    specs = [s for s in dataset.all_specs() if not s.registered]
    if not specs:
        return None
    gates = {s.id for s in dataset.gate_specs()}
    gate_ids = list(dict.fromkeys(s.id for s in specs if s.id in gates))
    scorer_ids = list(dict.fromkeys(s.id for s in specs if s.id not in gates))
    parts = [f"{label}{'s' if len(ids) > 1 else ''} {', '.join(ids)}"
             for label, ids in (("gate", gate_ids), ("scorer", scorer_ids)) if ids]
    count = len(gate_ids) + len(scorer_ids)
    where = Path(dataset.registry.path).name if dataset.registry.path else "scorers.yaml"
    first = specs[0]
    name = _slug(first.id)
    return (f"{' and '.join(parts)} {'is' if count == 1 else 'are'} not registered in {where}: scored, but not stored; "
            f"to compare across runs add e.g. '{name}: {_inline_yaml(first)}' under 'scorers:' in {where} and refer "
            f"to it as {name}")


def _inline_yaml(spec: ScorerSpec) -> str:
    """The reference as one line of YAML, defaults left out: ``{includes: Brooklyn}``, ``{called_tool: {name: x,
    times: 2}}``, ``{trajectory: [search, book]}``."""
    from ..scorers import find

    kind = find(spec.kind)
    args = dict(spec.args)
    if kind is not None:
        defaults = {kind.key(k): f.get_default(call_default_factory=True) for k, f in kind.args.model_fields.items()
                    if not f.is_required()}
        args = {k: v for k, v in args.items() if k not in defaults or defaults[k] != v}
        if kind.main is None and not args:
            return spec.kind
        if kind.main is not None and list(args) == [kind.key(kind.main)]:
            return _flow({spec.kind: args[kind.key(kind.main)]})
    return _flow({spec.kind: args or None})


def _flow(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000, sort_keys=False).strip()


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:40].rstrip("-") or "my-scorer"
