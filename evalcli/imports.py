"""Importing a dataset's target and custom scorers as that dataset's own modules (SPEC §12, last point).

Two datasets in one invocation may each have an ``agent.py`` in their own folder. Python caches
modules by name, so the second dataset would silently get the first one's. An ``ImportScope`` puts
the dataset's folders first on ``sys.path`` while it imports (and while the dataset runs, for imports
made inside the target), sets aside any cached module that would resolve to a different file from
those folders, and keeps the modules imported from its folders as its own. On leaving, ``sys.path``
and the set-aside modules are restored.
"""

from __future__ import annotations

import importlib.machinery
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, TracebackType

_LIBRARY_ROOTS = tuple({str(Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                        if (p := sysconfig.get_paths().get(key))})


def _origin(module: ModuleType) -> str | None:
    file = getattr(module, "__file__", None)
    if not file:
        return None
    try:
        return str(Path(file).resolve())
    except OSError:
        return None


def _user_module(module: ModuleType) -> bool:
    """A module from a file outside the standard library and installed packages."""
    origin = _origin(module)
    return origin is not None and not origin.startswith(_LIBRARY_ROOTS)


class ImportScope:
    """The ``sys.path`` and modules of one dataset: enter it to import or run that dataset's code."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = [str(Path(f).resolve()) for f in dict.fromkeys(folders)]
        self.modules: dict[str, ModuleType] = {}
        """Modules imported from this scope's folders, by name."""
        self._saved_path: list[str] | None = None
        self._set_aside: dict[str, ModuleType] = {}
        self._depth = 0

    def __enter__(self) -> ImportScope:
        self._depth += 1
        if self._depth > 1:
            return self
        self._saved_path = list(sys.path)
        sys.path[:0] = [f for f in self.folders if f not in sys.path[: len(self.folders)]]
        self._set_aside = {}
        for name in self._shadowed():
            self._set_aside[name] = sys.modules.pop(name)
        sys.modules.update(self.modules)
        self._before = set(sys.modules)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth:
            return
        for name in set(sys.modules) - self._before:
            module = sys.modules[name]
            origin = _origin(module)
            if origin is not None and any(origin.startswith(folder + "/") for folder in self.folders) \
                    and _user_module(module):
                self.modules[name] = module
        for name, module in self.modules.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        sys.modules.update(self._set_aside)
        self._set_aside = {}
        if self._saved_path is not None:
            sys.path[:] = self._saved_path
            self._saved_path = None

    def _shadowed(self) -> list[str]:
        """Cached user modules that this scope's folders would resolve to a different file (with submodules)."""
        shadowed: list[str] = []
        tops: dict[str, ModuleType] = {}
        for name, module in list(sys.modules.items()):
            if module is not None and "." not in name and _user_module(module) and name not in self.modules:
                tops[name] = module
        for name, module in tops.items():
            spec = importlib.machinery.PathFinder.find_spec(name, self.folders)
            if spec is None or spec.origin is None:
                continue
            found = str(Path(spec.origin).resolve())
            if found != _origin(module):
                shadowed.append(name)
                shadowed.extend(n for n in list(sys.modules) if n.startswith(name + "."))
        return shadowed
