"""Datasets (docs/datasets.md, docs/storage.md, docs/reference/cli.md, docs/simulated-users.md): the YAML's models, loading
with file:line:col errors, scorer references and
the ``scorers.yaml`` registry, imports of targets and custom scorers, selection, ``init`` and ``schema``.

Loading knows nothing of running: it gives a ``Dataset`` (items, specs, the target's adapter) that the rest
of evalcli trusts.
"""

from __future__ import annotations

from .imports import ImportScope, resolve_import
from .items import Dataset, Item, Limits, RecordedTurn, Simulation, Turn
from .load import dataset_name, load_dataset, search_paths
from .references import parse_definition, parse_list, parse_ref
from .registry import find_registry, load_registry
from .select import Selection, check_filter, parse_shard, shard_of
from .several import DatasetSource, load_datasets
from .warnings import (
    dataset_models,
    model_routes,
    model_uses,
    reachability_warnings,
    registration_lines,
    registry_name,
    unregistered,
    unregistered_warning,
)

__all__ = ["Dataset", "DatasetSource", "ImportScope", "Item", "Limits", "RecordedTurn", "Selection", "Simulation", "Turn",
           "check_filter", "dataset_models", "dataset_name", "find_registry", "load_dataset", "load_datasets", "load_registry",
           "model_routes", "model_uses", "parse_definition", "parse_list", "parse_ref", "parse_shard", "reachability_warnings",
           "registration_lines", "registry_name", "resolve_import", "search_paths", "shard_of", "unregistered",
           "unregistered_warning"]
