"""Entry points: how evalcli finds adapters and scorer kinds, its own among them (docs/extending.md).

A package adds adapters or scorer kinds by declaring entry points in the groups ``evalcli.adapters`` and
``evalcli.scorers`` of its ``pyproject.toml``; evalcli declares its built-in ones the same way, in its own. Finding
entry points reads the installed packages' metadata, never imports anything; loading one imports the module it names.
Every problem with an entry point (it cannot be loaded, it is not what its group takes, its name is taken) is a
``PluginError`` naming the package and the entry point, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .errors import PluginError
from .errors import describe as exception_text
from .records import record

ADAPTERS = "evalcli.adapters"
"""The entry-point group of adapters: each names an ``evalcli.targets.AdapterDeclaration``."""
SCORERS = "evalcli.scorers"
"""The entry-point group of scorer kinds: each names an ``evalcli.scorers.Kind`` or a list of them."""
GROUPS = (ADAPTERS, SCORERS)
OWN = "evalcli"
"""The distribution whose entry points are the built-in ones."""


@record(frozen=True)
class Entry:
    """One entry point of evalcli's groups, and the package (distribution) that declares it."""

    group: str
    name: str
    value: str
    """What it names: ``module:attribute``."""
    package: str
    version: str

    @property
    def builtin(self) -> bool:
        """Whether evalcli itself declares it."""
        return _normal(self.package) == OWN

    @property
    def origin(self) -> str:
        """The package and its version, as ``evalcli adapters`` and ``evalcli scorers`` show them."""
        return f"{self.package} {self.version}"

    def describe(self) -> str:
        """The entry point as an error names it: its line in ``pyproject.toml``, its group, its package."""
        return f"the entry point '{self.name} = {self.value}' (group {self.group}) of the package {self.origin}"

    def hint(self) -> str:
        """What to do about a broken entry point: fix or remove the package that declares it."""
        if self.builtin:
            return "reinstall evalcli (pip install --force-reinstall evalcli)"
        return f"fix or upgrade the package {self.package}, or uninstall it (pip uninstall {self.package})"

    def error(self, message: str) -> PluginError:
        """A ``PluginError`` about this entry point."""
        return PluginError(f"{self.describe()} {message}", self.hint())

    def load(self) -> Any:
        """The object the entry point names (its module imported now)."""
        return load_path(self.value, self)


def load_path(path: str, entry: Entry) -> Any:
    """The object ``module:attribute`` names, for what ``entry`` declares; any failure is a ``PluginError`` naming it."""
    module_name, _, attribute = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            found = getattr(found, part)
    except Exception as exc:  # noqa: BLE001 - a package's import can raise anything: its mistake, not evalcli's
        where = "" if path == entry.value else f" ({path})"
        raise entry.error(f"cannot be loaded{where}: {exception_text(exc)}") from None
    return found


class Names:
    """The names of one kind of thing (adapters, or scorer kinds and their aliases), each given once: the first entry
    point to declare a name keeps it, and another declaring it is refused, never silently replacing it (evalcli's own
    come first, so a package can never replace a built-in one)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.owners: dict[str, Entry] = {}

    def claim(self, names: Sequence[str], entry: Entry) -> None:
        """Give ``names`` to ``entry``, all or none: a ``PluginError`` names the first one taken, and its owner."""
        for name in names:
            first = self.owners.get(name)
            if first is not None:
                raise taken(name, self.what, entry, first)
        for name in names:
            self.owners[name] = entry


def taken(name: str, what: str, entry: Entry, first: Entry) -> PluginError:
    """The error of ``entry`` declaring ``what`` called ``name``, which ``first`` declared already."""
    owner = "evalcli itself (built in)" if first.builtin else f"{first.describe()}"
    if first.builtin:
        hint = (f"a package cannot replace one of evalcli's own {what}s: rename it in {entry.package}'s "
                f"pyproject.toml, or uninstall it (pip uninstall {entry.package})")
    else:
        hint = f"rename one of them, or uninstall one (pip uninstall {entry.package})"
    return PluginError(f"{entry.describe()} declares the {what} '{name}', which is taken by {owner}", hint)


_found: dict[str, tuple[Entry, ...]] | None = None
_lock = threading.Lock()


def entries(group: str) -> tuple[Entry, ...]:
    """Every entry point of ``group``: evalcli's own first, then the others by package and name. Found once per
    process, from the packages' metadata only (nothing imported)."""
    global _found
    with _lock:
        if _found is None:
            _found = _discover()
    return _found[group]


def _discover() -> dict[str, tuple[Entry, ...]]:
    own = _source_declarations()
    found: dict[str, list[Entry]] = {group: [] for group in GROUPS}
    for package, version, points in _installed(skip_own=own is not None):
        for group, name, value in points:
            found[group].append(Entry(group, name, value, package, version))
    for group in GROUPS:
        found[group].sort(key=lambda e: (not e.builtin, _normal(e.package), e.name))
    if own is not None:
        version, points = own
        for group in GROUPS:
            found[group][:0] = sorted((Entry(group, name, value, OWN, version) for g, name, value in points
                                       if g == group), key=lambda e: e.name)
    if not any(entry.builtin for entry in found[ADAPTERS]):
        raise PluginError("evalcli's own entry points are missing from its installed metadata (it is older than the "
                          "code that runs)", "reinstall evalcli (pip install evalcli, or pip install -e . in a checkout)")
    return {group: tuple(found[group]) for group in GROUPS}


def _installed(skip_own: bool) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(package, version, (group, name, value) of each entry point in evalcli's groups) of every installed package
    that declares some; of two installed copies of a package, the one first on ``sys.path``, as Python imports it."""
    import importlib.metadata

    packages = []
    seen: set[str] = set()
    plain = importlib.metadata.PathDistribution  # importlib.metadata's own path finder's
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)  # NAME-VERSION.dist-info, NAME normalised as the package's name
        own = folder is not None and os.path.basename(folder).split("-")[0].lower() == OWN
        if own and skip_own:  # evalcli's entry points are read from its source tree: its metadata is not read
            continue
        text = _entry_points_text(folder) if type(dist) is plain and isinstance(folder, Path) else \
            dist.read_text("entry_points.txt")
        if not text or "[evalcli." not in text:  # most packages declare none: skip parsing theirs
            if own:  # evalcli's own, first on sys.path, without its entry points, wins
                seen.add(OWN)
            continue
        name = dist.metadata["Name"] or "unknown"
        if _normal(name) in seen or (skip_own and _normal(name) == OWN):
            continue
        seen.add(_normal(name))
        points = [(ep.group, ep.name, ep.value) for ep in dist.entry_points if ep.group in GROUPS]
        packages.append((name, dist.version, points))
    return packages


def _entry_points_text(folder: Path) -> str | None:
    """The text of the ``entry_points.txt`` of a distribution's folder (``None`` without one): what
    ``PathDistribution.read_text`` gives, read without a ``Path`` a file (most of a scan of the ~240 installed packages
    otherwise: docs/performance.md "Start-up and finish")."""
    path = os.path.join(folder, "entry_points.txt")
    if not os.path.isfile(path):  # most packages have none: a stat, not an open that raises
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (FileNotFoundError, IsADirectoryError, KeyError, NotADirectoryError, PermissionError):  # as read_text
        return None


def _source_declarations() -> tuple[str, list[tuple[str, str, str]]] | None:
    """evalcli's version and entry points, from the ``pyproject.toml`` of the source tree it runs from, if it runs from
    one (a checkout on ``PYTHONPATH``, an editable install): installed metadata, when there is any, may be older than
    that code. ``None`` for an installed evalcli, whose metadata was built from its ``pyproject.toml``.

    What a ``pyproject.toml`` declares is kept beside the package's compiled modules (``__pycache__``, when Python
    writes them), by the digest of the file's bytes: an edit is always read again, and an unchanged file is not parsed
    with ``tomllib`` at each start (docs/performance.md "Start-up and finish")."""
    path = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    import hashlib

    cache = _cache_path(hashlib.sha256(data).hexdigest()[:32])
    found = _read_cached(cache) if cache is not None else None
    if found is None:
        try:
            declared = _declared(data.decode("utf-8"))
        except ValueError:  # not UTF-8, not TOML: as for a file that is not evalcli's
            declared = None
        if cache is not None:
            _write_cached(cache, declared)
    else:
        declared = found[0]
    if declared is None:
        return None
    version, points = declared
    return version, [point for point in points if point[0] in GROUPS]


Declared = tuple[str, list[tuple[str, str, str]]] | None
"""A ``pyproject.toml``'s: evalcli's version and every entry point of its project, or ``None`` when it is not
evalcli's."""
CACHED = "pyproject-entry-points-1"
"""The names of the files ``_source_declarations`` keeps (the number changes when ``_declared`` does)."""


def _declared(text: str) -> Declared:
    import tomllib

    project = tomllib.loads(text).get("project", {})
    if project.get("name") != OWN:
        return None
    points = [(group, name, str(value)) for group, table in project.get("entry-points", {}).items()
              for name, value in table.items()]
    return str(project.get("version", "0")), points


def _cache_path(digest: str) -> Path | None:
    """Where the declarations of the ``pyproject.toml`` of digest ``digest`` are kept; ``None`` when this Python keeps
    no compiled modules (no cache tag)."""
    import importlib.util

    try:
        return Path(importlib.util.cache_from_source(__file__)).parent / f"{CACHED}-{digest}.json"
    except NotImplementedError:
        return None


def _read_cached(cache: Path) -> tuple[Declared] | None:
    """What ``cache`` holds (in a 1-tuple), ``None`` when it holds nothing usable."""
    import json

    try:
        held = json.loads(cache.read_bytes())
    except (OSError, ValueError):
        return None
    if held is None:
        return (None,)
    if (isinstance(held, list) and len(held) == 2 and isinstance(held[0], str) and isinstance(held[1], list)
            and all(isinstance(p, list) and len(p) == 3 and all(isinstance(t, str) for t in p) for p in held[1])):
        return ((held[0], [(p[0], p[1], p[2]) for p in held[1]]),)
    return None


def _write_cached(cache: Path, declared: Declared) -> None:
    """Keep ``declared`` in ``cache`` (written whole or not at all), and drop what older files said; nothing when
    Python writes no compiled modules (``PYTHONDONTWRITEBYTECODE``), or the folder cannot be written."""
    import contextlib
    import json
    import sys

    if sys.dont_write_bytecode:
        return
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        for old in cache.parent.glob(f"{CACHED}-*.json"):
            if old != cache:
                old.unlink(missing_ok=True)
        part = cache.with_name(f"{cache.name}.{os.getpid()}.part")
        part.write_text(json.dumps(declared), encoding="utf-8")
        os.replace(part, cache)


def _normal(name: str) -> str:
    """A distribution name as packaging compares them (``Evalcli_Demo.plugin`` is ``evalcli-demo-plugin``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@contextlib.contextmanager
def own_models() -> Iterator[None]:
    """evalcli's own argument models (a kind's ``args``) built without pydantic's plugins, as typer builds its
    parameters' adapters: the first model pydantic builds with plugins on reads the metadata of every installed
    distribution to find them (~27 M instructions before a run's first turn, docs/performance.md "Before the first
    turn"), and what a plugin observes is the user's models, not how evalcli reads a dataset. The setting is
    ``PYDANTIC_DISABLE_PLUGINS``, as it was afterwards; a user's models still get their plugins."""
    before = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
        else:
            os.environ["PYDANTIC_DISABLE_PLUGINS"] = before


_Model = TypeVar("_Model")


def built(model: _Model) -> _Model:
    """``model``, a kind's argument model, built: one of evalcli's own deferred ones (``defer_build``) under
    ``own_models`` at its first use (a dataset's reference, ``evalcli schema``); a package's as pydantic builds it."""
    own: Any = model
    if not own.__pydantic_complete__ and own.__module__.startswith("evalcli."):
        with own_models():
            own.model_rebuild()
    return model
