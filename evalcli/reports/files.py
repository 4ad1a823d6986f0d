"""Where a report goes when one run writes several datasets' files: one path per dataset, with distinct names."""

from __future__ import annotations

from pathlib import Path


def per_dataset(path: Path, datasets: list[Path]) -> list[Path]:
    """One output path per dataset: the path itself for one dataset, else ``out.<name>.ext`` with names
    made distinct (the file's stem, then its folder and stem, then a number)."""
    if len(datasets) == 1:
        return [path]
    suffix = path.suffix
    names = [d.stem for d in datasets]
    if len(set(names)) < len(names):
        names = [f"{d.resolve().parent.name}-{d.stem}" for d in datasets]
    if len(set(names)) < len(names):
        names = [f"{n}-{i + 1}" for i, n in enumerate(names)]
    return [path.with_name(f"{path.stem}.{name}{suffix}") for name in names]
