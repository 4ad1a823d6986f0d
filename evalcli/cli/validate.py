"""``evalcli validate`` (docs/reference/cli.md): load and check datasets, nothing more. It imports only the
dataset package (no runner, store or reports), so checking a dataset costs less than running one
(tests/test_startup.py)."""

from __future__ import annotations

from pathlib import Path

from ..dataset import load_datasets, reachability_warnings, registration_lines
from ..words import plural


def validate_command(paths: list[Path], scorers: Path | None) -> tuple[list[str], list[str]]:
    """``evalcli validate``: one line per valid dataset, and warnings (an invalid dataset raises with every problem)."""
    lines, warnings = [], []
    for dataset, _ in load_datasets(paths, scorers):
        specs = list(dataset.all_specs())
        lines.append(f"{dataset.path}: ok ({plural(len(dataset.items), 'item')}, "
                     f"{plural(len(specs), 'gate/scorer', 'gates/scorers')}, target {dataset.target_spec})")
        lines += registration_lines(dataset)
        warnings += [w for w in [*dataset.warnings, *reachability_warnings(dataset)] if w not in warnings]
    return lines, warnings
