"""Names a package exports but imports only when first used (PEP 562), so a command imports only what it runs:
``evalcli validate`` never imports the runner or the store, ``evalcli run`` never the comparison, diff, merge or
calibration code (docs/performance.md). Each package lists its lazy names once; type checkers read the same names from
an ``if TYPE_CHECKING:`` import beside it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``modules[submodule]`` is imported from that submodule
    (relative, e.g. ``".compare"``) the first time it is asked for."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return __getattr__
