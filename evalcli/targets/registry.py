"""Adapters as declared through the ``evalcli.adapters`` entry points, evalcli's own among them (docs/extending.md).

An ``AdapterDeclaration`` says, without importing any framework, what an adapter is called, which agent objects it
recognises (by the qualified class names in their MRO) or which mapping key names its targets, and where its
``Adapter`` class is; that class's module, which imports the framework, is imported only when a target needs it.
This module is the one place a target's object or mapping becomes an adapter class.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from ..errors import TargetError
from ..plugins import ADAPTERS, Entry, Names, entries, own_models
from ..records import record
from .forms import FormAdapter
from .session import Adapter, ConfigProblem, mro_names, options_hint

FALLBACK = "callable"
"""The adapter of an object no adapter recognises: a function, or an object with ``generate``."""


@record(frozen=True)
class AdapterDeclaration:
    """One adapter, as an entry point of the group ``evalcli.adapters`` names it (docs/extending.md). Declared in a
    module that imports no framework: evalcli loads every declaration to recognise an agent object."""

    name: str
    """What ``target_options.adapter`` calls it (or, with ``mapping``, the key of its targets); the entry point's name."""
    adapter: str
    """``module:Class`` of its ``evalcli.targets.Adapter`` subclass, imported only when a target needs it."""
    summary: str
    """One line for ``evalcli adapters``."""
    recognises: tuple[str, ...] = ()
    """Qualified class names (``module.QualName``, as in the object's MRO) of the agent objects it runs: an object with
    one of them in its MRO gets this adapter, checked without importing anything."""
    confirms: Callable[[Any], bool] | None = None
    """Asked after a class name matched, when a name alone could mislead (a generic module name): ``False`` leaves the
    object to the other adapters."""
    mapping: bool = False
    """Its targets are written as a mapping under its name (``target: {http: {...}}``); its class is then an
    ``evalcli.targets.FormAdapter``, never recognised from an object."""
    install: str = ""
    """What to run when its framework is missing (``pip install 'evalcli[langgraph]'``)."""
    frameworks: tuple[str, ...] = ()
    """Its framework's modules (top-level, or a package inside a namespace such as ``google.adk``): when a target's
    import fails for want of one, ``install`` is the hint."""

    def recognised(self, obj: Any) -> bool:
        """Whether ``obj`` is an agent this adapter runs, by the class names in its MRO (and ``confirms``)."""
        if self.mapping or not self.recognises or not set(mro_names(obj)).intersection(self.recognises):
            return False
        return self.confirms is None or bool(self.confirms(obj))


@record(frozen=True)
class Declared:
    """A loaded declaration and the entry point it came from (its package, for listings and errors)."""

    declaration: AdapterDeclaration
    entry: Entry


_declared: dict[str, Declared] | None = None


def declared() -> dict[str, Declared]:
    """Every adapter by name, evalcli's own first; each declaration's module imported once per process."""
    global _declared
    if _declared is None:
        _declared = _load_declarations()
    return _declared


def _load_declarations() -> dict[str, Declared]:
    names = Names("adapter")
    for entry in entries(ADAPTERS):  # every name checked before anything is imported
        names.claim([entry.name], entry)
    loaded = {}
    for name, entry in names.owners.items():
        declaration = entry.load()
        if not isinstance(declaration, AdapterDeclaration):
            raise entry.error(f"names a {type(declaration).__name__}, not an evalcli.targets.AdapterDeclaration")
        if declaration.name != name:
            raise entry.error(f"names the adapter '{declaration.name}': an adapter's entry point has its name")
        loaded[name] = Declared(declaration, entry)
    return loaded


def adapter_names() -> list[str]:
    """The adapters ``target_options.adapter`` may name (those of objects, not of mappings)."""
    return [name for name, found in declared().items() if not found.declaration.mapping]


def form_names() -> list[str]:
    """The keys of targets written as a mapping (``http``, ``mastra``, ``model``, and those of installed packages)."""
    return [name for name, found in declared().items() if found.declaration.mapping]


def adapter_class(name: str) -> type[Adapter]:
    """The adapter class declared as ``name`` (its module, and so its framework, imported now)."""
    found = declared().get(name)
    if found is None or found.declaration.mapping:
        raise TargetError(f"unknown adapter '{name}'", f"target_options.adapter is one of: {', '.join(adapter_names())}")
    return _class(found)


def form_class(name: str) -> type[FormAdapter]:
    """The adapter class of the mapping form ``name`` (its module imported now)."""
    return cast("type[FormAdapter]", _class(declared()[name]))


def _class(found: Declared) -> type[Adapter]:
    """The declared adapter class: an ``Adapter``, and a ``FormAdapter`` for a mapping form."""
    declaration, entry = found.declaration, found.entry
    module_name, _, attribute = declaration.adapter.partition(":")
    try:
        if entry.builtin and declaration.mapping:  # evalcli's own forms (http, model, ...): their models without plugins
            with own_models():
                module = importlib.import_module(module_name)
        else:
            module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not module_name.startswith(exc.name):  # a package the adapter needs, not the adapter itself
            origin = "" if entry.builtin else f" (from {entry.origin})"
            hint = declaration.install or ("reinstall evalcli (pip install evalcli)" if entry.builtin else entry.hint())
            raise TargetError(f"the {declaration.name} adapter{origin} needs a package that is not installed ({exc.name})",
                              hint) from None
        raise entry.error(f"declares the adapter class {declaration.adapter}, which cannot be imported: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a package's import can raise anything: its mistake, not evalcli's
        raise entry.error(f"declares the adapter class {declaration.adapter}, which cannot be imported: "
                          f"{type(exc).__name__}: {exc}") from None
    cls = getattr(module, attribute, None)
    base = FormAdapter if declaration.mapping else Adapter
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise entry.error(f"declares the adapter class {declaration.adapter}, which is not a subclass of "
                          f"evalcli.targets.{base.__name__}")
    return cls


def recognise(obj: Any) -> str:
    """The adapter name for an agent object: the first adapter that recognises it, else ``callable``."""
    for name, found in declared().items():
        try:
            if found.declaration.recognised(obj):
                return name
        except Exception as exc:  # noqa: BLE001 - a package's confirms() is its code: a mistake there is named
            raise found.entry.error(f"fails to tell whether a {type(obj).__name__} is its agent: "
                                    f"{type(exc).__name__}: {exc}") from None
    return FALLBACK


def recognise_class(cls: type) -> str | None:
    """The adapter that runs the instances of ``cls``, for a target that names a framework's agent class (``Agent``)
    where its agent object was meant; ``None`` when no adapter runs them."""
    names = {f"{c.__module__}.{c.__qualname__}" for c in getattr(cls, "__mro__", ())}
    for name, found in declared().items():
        declaration = found.declaration
        if declaration.mapping or not names.intersection(declaration.recognises):
            continue
        try:
            if declaration.confirms is None or declaration.confirms(cls):
                return name
        except Exception:  # noqa: BLE001 - a package's confirms() may expect an instance: then it is not this one
            continue
    return None


def make_adapter(spec: str, obj: Any, options: dict[str, Any]) -> Adapter:
    """The adapter for a resolved target object: forced by ``target_options.adapter`` or recognised."""
    forced = options.get("adapter")
    if forced is not None and not isinstance(forced, str):
        raise TargetError("target_options.adapter must be a name", f"one of: {', '.join(adapter_names())}")
    framework = recognise_class(obj) if isinstance(obj, type) else None
    if framework is not None:  # callable, but calling it builds an agent: each turn would fail (docs/targets/python.md)
        raise TargetError(f"target '{spec}' is the class {obj.__module__}.{obj.__qualname__}, not an agent: the "
                          f"{framework} adapter runs an agent your code builds from it",
                          f"point at the agent object: e.g. 'agent = {obj.__name__}(...)' in your module and "
                          "'target: module:agent'")
    name = forced or recognise(obj)
    cls = adapter_class(name)
    if forced and not (declared()[name].declaration.recognised(obj) or cls.fits(obj)):
        raise TargetError(f"target '{spec}' is a {type(obj).__module__}.{type(obj).__qualname__}, "
                          f"which the {name} adapter does not take",
                          f"remove target_options.adapter (evalcli recognised it as '{recognise(obj)}')")
    problems = cls.option_problems(obj, options)
    if problems:
        raise TargetError(f"target_options for {spec}: {'; '.join(problems)}", options_hint(problems))
    adapter = cls(spec, obj, options)
    if not forced:  # another package's adapter that recognises it too: named in a warning, never silently passed over
        adapter.also_recognised = _also_recognising(obj, name)
    return adapter


def _also_recognising(obj: Any, chosen: str) -> tuple[str, ...]:
    """The adapters other than ``chosen`` that recognise ``obj``, each with the package that declares it."""
    found = []
    for name, declared_as in declared().items():
        if name == chosen or declared_as.declaration.mapping:
            continue
        try:
            if declared_as.declaration.recognised(obj):
                found.append(f"{name} ({declared_as.entry.origin})")
        except Exception:  # noqa: BLE001 - a package's confirms() that fails on it: it does not claim it
            continue
    return tuple(found)


def extra_hint(missing_module: str | None) -> str | None:
    """What to install when a failed import is of a framework an adapter declares (``pip install 'evalcli[X]'``)."""
    if not missing_module:
        return None
    parts = missing_module.split(".")
    names = {".".join(parts[:i + 1]) for i in range(len(parts))}  # a framework may be a package's subpackage
    return next((found.declaration.install for found in declared().values()
                 if names.intersection(found.declaration.frameworks) and found.declaration.install), None)


def form_of(raw: dict[str, Any]) -> str:
    """Which form a target mapping is: the one of the mapping forms' keys among its keys."""
    forms = form_names()
    found = [key for key in forms if key in raw]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigProblem((), f"a target mapping needs one of {', '.join(repr(k) for k in forms)} "
                                f"(it has: {', '.join(map(str, raw)) or 'nothing'})",
                            "write e.g. 'target: {http: {url: http://127.0.0.1:8000/chat}}', 'target: {model: "
                            "openai/gpt-4o-mini}', or an import path 'target: module:attribute'")
    raise ConfigProblem((found[1],), f"a target is one of {', '.join(repr(k) for k in forms)}, not several "
                                     f"(found {', '.join(repr(k) for k in found)})", "keep one of them")


def settings_of(name: str, raw: dict[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """The settings of a form inside its mapping, and their path in it."""
    cls = form_class(name)
    if cls.nested:
        extra = [key for key in raw if key != name]
        if extra:
            raise ConfigProblem((extra[0],), f"unknown key '{extra[0]}' beside '{name}' in the target",
                                f"put every setting inside '{name}: {{...}}'")
        settings = raw[name]
        return ({"url": settings} if isinstance(settings, str) else settings), (name,)  # {a2a: URL}: the URL alone
    return raw, ()

