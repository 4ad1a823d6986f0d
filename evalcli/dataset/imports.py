"""Importing a dataset's target and custom scorers, as that dataset's own modules (docs/targets/frameworks.md, last point).

Two datasets in one invocation may each have an ``agent.py`` in their own folder. Python caches
modules by name, so the second dataset would silently get the first one's. An ``ImportScope`` puts
the dataset's folders first on ``sys.path`` while it imports (and while the dataset runs, for imports
made inside the target), sets aside any cached module that would resolve to a different file from
those folders, and keeps the modules imported from its folders as its own. On leaving, ``sys.path``
and the set-aside modules are restored.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from ..errors import EvalcliError, Problem, TargetError
from ..scorers import ScorerSpec
from ..scorers import find as find_kind
from ..targets import extra_hint
from .yamlsrc import did_you_mean

_LIBRARY_ROOTS = tuple({str(Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")
                        if (p := sysconfig.get_paths().get(key))})


def _origin(module: ModuleType) -> str | None:
    file = getattr(module, "__file__", None)
    return _resolved(file) if file and isinstance(file, str) else None


@functools.lru_cache(maxsize=4096)
def _resolved(file: str) -> str | None:
    """A module file's real path, each file resolved once a process: a scope looks at every module imported so far
    each time it is entered, ~150 files before a run's first turn, from ~20 folders. An absolute path's folder is
    resolved once (``_real_folder``) and the file's own name followed only when it is a link: what
    ``Path.resolve`` gives, without an ``lstat`` per folder of every path (docs/performance.md "Start-up and
    finish")."""
    try:
        folder, name = os.path.split(file)
        if not os.path.isabs(file) or name in ("", ".", "..") or os.path.islink(file):
            return str(Path(file).resolve())
        real = _real_folder(folder)
        return real + name if real.endswith(os.sep) else real + os.sep + name
    except OSError:
        return None


@functools.lru_cache(maxsize=1024)
def _real_folder(folder: str) -> str:
    return str(Path(folder).resolve())


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


def resolve_import(spec: str, what: str = "target") -> Any:
    """Import ``module:attribute`` (inside the dataset's ``ImportScope``)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        head, dot, tail = spec.rpartition(".")
        meant = f"{head}:{tail}" if dot and head and tail and not sep else "examples.agent:agent"
        raise TargetError(f"{what} '{spec}' is not an import path", f"write it as module:attribute, e.g. {meant}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's to see, shortened
        hint = extra_hint(exc.name) if isinstance(exc, ModuleNotFoundError) else None
        at = _raised_at(exc)
        if hint is None and isinstance(exc, ModuleNotFoundError) and exc.name \
                and module_name != exc.name and not module_name.startswith(exc.name + ".") and at:
            hint = (f"module '{module_name}' imports '{exc.name}', which is not installed in the Python evalcli runs "
                    f"with ({sys.executable}): install it there")
        hint = _module_of_file(module_name, attribute) or hint
        raise TargetError(f"{what} '{spec}' does not import: {type(exc).__name__}: {exc}{at}",
                          hint or f"check that module '{module_name}' exists and imports cleanly "
                                  "(searched the dataset's folder and the current directory)") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            names = [n for n in dir(value) if not n.startswith("_") and callable(getattr(value, n, None))]
            meant = did_you_mean(part, names)
            raise TargetError(f"{what} '{spec}': module '{module_name}' has no attribute '{attribute}'{meant}",
                              _in_main(module, module_name, part, value is module)
                              or "check the name after the colon" + (f"; it defines: {', '.join(names[:8])}"
                                                                     + (", ..." if len(names) > 8 else "")
                                                                     if names and not meant else "")) from None
        except Exception as exc:  # noqa: BLE001 - a module's own __getattr__ failing is the user's to see
            raise TargetError(f"{what} '{spec}': reading '{part}' from module '{module_name}' raised "
                              f"{type(exc).__name__}: {exc}", "check that name in the module") from None
    return value


def _in_main(module: ModuleType, module_name: str, name: str, top: bool) -> str | None:
    """The hint for a target that a script defines and an import cannot see: one named in ``__main__`` (the program
    running, which is evalcli, not the user's script), or one defined only under ``if __name__ == "__main__":``,
    which does not run when evalcli imports the module (docs/targets/python.md)."""
    if module_name == "__main__":
        spec = getattr(module, "__spec__", None)
        running = spec.name if spec is not None else os.path.basename(getattr(module, "__file__", None) or "python")
        return (f"'__main__' is the program running ({running}), not the script that defines your agent: put the "
                f"agent in a module beside the dataset (e.g. my_agent.py) and name it by that module: my_agent:{name}")
    if not top:
        return None
    import ast

    file = getattr(module, "__file__", None)
    try:
        tree = ast.parse(Path(file).read_text(encoding="utf-8-sig")) if file and file.endswith(".py") else None
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for block in tree.body if tree is not None else []:
        test = block.test if isinstance(block, ast.If) else None
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)):
            continue
        for node in ast.walk(block):
            defined = ([node.name] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                       else [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign)
                       else [])
            if name in defined:
                return (f"'{name}' is defined at {os.path.basename(file or '')}:{getattr(node, 'lineno', 0)} inside "
                        "'if __name__ == \"__main__\":', which does not run when evalcli imports the module: "
                        "define it at the module's top level")
    return None


def _raised_at(exc: BaseException) -> str:
    """`` (raised at FILE:LINE)``: the innermost line of the user's own code in ``exc``'s traceback (a module the
    target's module imports that is not installed, its code raising as it is imported); ``""`` when there is none
    (the target's module itself not found) or the error names it already (a ``SyntaxError``)."""
    if isinstance(exc, SyntaxError):
        return ""
    at, tb = "", exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith(("<", *_LIBRARY_ROOTS)) and name != __file__:
            try:
                shown = os.path.relpath(name)
            except ValueError:  # another drive (Windows)
                shown = name
            at = f" (raised at {shown if not shown.startswith('..') else name}:{tb.tb_lineno})"
        tb = tb.tb_next
    return at


def _module_of_file(name: str, attribute: str) -> str | None:
    """The hint for a module written as its file (``my_agent.py``, ``./agents/my_agent.py``): its import path."""
    if not name.endswith(".py") and "/" not in name and "\\" not in name:
        return None
    parts = [part for part in name.removesuffix(".py").replace("\\", "/").split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return "name the module by its import path, not its file (module:attribute, from the dataset's folder)"
    return f"name the module, not its file: {'.'.join(parts)}:{attribute}"


def resolve_imports(specs: list[ScorerSpec], problems: list[Problem]) -> dict[str, Any]:
    """What the import-path arguments of these specs name (a custom scorer's ``function``), by import path; a
    path that does not import, or names something that cannot score, is a problem at its reference."""
    resolved: dict[str, Any] = {}
    for spec in specs:
        kind = find_kind(spec.kind)
        path = spec.args.get(kind.imports) if kind is not None and kind.imports is not None else None
        if not isinstance(path, str) or path in resolved:
            continue
        try:
            value = resolve_import(path, what=f"{spec.kind} scorer")
        except EvalcliError as exc:
            problems.append(Problem(spec.where, exc.message, exc.hint))
            continue
        if not callable(value) and not callable(getattr(value, "score", None)):
            problems.append(Problem(spec.where, f"{spec.kind} scorer '{path}' is not callable",
                                    "point at a function taking a ScorerRun"))
            continue
        resolved[path] = value
    return resolved
