"""The package shows its architecture: imports flow one way between packages, rich and litellm stay in their rooms,
no module grows past one sitting, and no modules import each other in a circle. Read from the source
(function-level imports count, and so do those under ``TYPE_CHECKING``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "evalcli"
BASE = {"dbname", "errors", "secrets", "secret_references", "messages", "patterns", "thresholds", "passrate", "results",
        "aggregate", "identity", "fingerprint", "version", "plugins", "lazy", "words", "interpolation", "streams",
        "records", "stored_json", "regex_time"}
ALLOWED: dict[str, set[str]] = {
    "dbname": set(), "errors": {"records"}, "secrets": set(), "secret_references": {"secrets"}, "messages": {"secrets"},
    "patterns": {"regex_time"}, "regex_time": set(), "thresholds": {"records"}, "passrate": {"thresholds"},
    "results": {"messages", "thresholds", "passrate", "records"}, "aggregate": {"results", "errors", "records"},
    "identity": {"secret_references"}, "fingerprint": {"secret_references"}, "version": set(), "plugins": {"errors", "records"},
    "lazy": set(), "words": set(), "interpolation": set(), "streams": {"secrets"}, "records": set(),
    "stored_json": {"errors", "secret_references"},
    "tools": BASE,
    "mcp": {"errors", "secrets", "records"},
    "llm": BASE,
    "otel": BASE | {"llm", "targets", "tools"},
    "scorers": BASE | {"llm"},
    "targets": BASE | {"llm", "tools", "mcp"},
    "dataset": BASE | {"llm", "scorers", "targets", "tools", "otel"},
    "store": BASE | {"llm", "scorers", "dataset", "tools", "otel"},
    "run": BASE | {"llm", "scorers", "targets", "dataset", "store", "tools", "otel"},
    "reports": BASE | {"llm", "scorers", "dataset", "store", "run", "tools", "otel"},
    "agent": BASE | {"llm", "tools", "mcp"},
    "view": BASE | {"llm", "scorers", "dataset", "store", "run", "reports", "tools", "otel"},
    "evaluate": BASE | {"llm", "scorers", "targets", "dataset", "store", "run", "reports", "tools", "otel"},
    "cli": BASE | {"llm", "scorers", "targets", "dataset", "store", "run", "reports", "evaluate", "tools", "view", "otel"},
    "pytest_plugin": BASE | {"llm", "scorers", "targets", "dataset", "store", "run", "reports", "evaluate", "tools", "otel"},
}
"""Each room and the rooms it may import from: ``cli`` -> ``evaluate`` -> ``reports``, ``store``, ``run`` ->
``scorers``, ``targets``, ``dataset`` -> ``llm`` -> the base modules. The public API (``evalcli/__init__``) may import anything."""
MAX_LINES = 500


def modules(package: Path = PACKAGE) -> Iterator[tuple[str, list[str], Path]]:
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        yield ".".join(parts), parts, path


def imports(parts: list[str], path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every import of the file, wherever it stands."""
    package = parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, *([node.module] if node.module else [])]) if node.level else node.module or ""
            yield name, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "evalcli"


def test_packages_import_only_downward() -> None:
    wrong = []
    for module, parts, path in modules():
        here = room(module)
        if here in ("__init__", "__main__"):
            continue
        for target, names in imports(parts, path):
            if not target.startswith("evalcli"):
                continue
            there = room(target)
            if (there == "evalcli" and names == ["__version__"]) or there == here:
                continue
            if there not in ALLOWED[here]:
                wrong.append(f"{module} imports {target}")
    assert not wrong, wrong


def test_no_two_rooms_import_each_other() -> None:
    assert all(b not in ALLOWED.get(a, set()) or a not in ALLOWED.get(b, set()) for a in ALLOWED for b in ALLOWED
               if a != b)


def test_rich_and_litellm_stay_in_their_rooms() -> None:
    rich, litellm = set(), set()
    for module, parts, path in modules():
        for target, _ in imports(parts, path):
            if target.split(".")[0] == "rich":
                rich.add(room(module))
            if target.split(".")[0] == "litellm":
                litellm.add(module)
    assert rich <= {"reports", "cli"}, rich
    assert litellm <= {"evalcli.llm.litellm_backend", "evalcli.llm.local_model"}, litellm


def test_no_module_over_500_lines() -> None:
    long = {module: n for module, _, path in modules() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def module_name(parts: list[str]) -> str:
    """A module's dotted name; a package's ``__init__`` is the package itself."""
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(package: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """Each module of ``package`` and the modules of it that it imports, with the names it takes from each. An import
    ties a module to the module it names (``from . import x`` to the submodule ``x``), not to that module's parent
    packages, whose ``__init__`` only hands names on."""
    files = list(modules(package))
    known = {module_name(parts) for _, parts, _ in files}
    graph: dict[str, dict[str, list[str]]] = {}
    for _, parts, path in files:
        edges = graph.setdefault(module_name(parts), {})
        for target, names in imports(parts, path):
            taken = [name for name in names if f"{target}.{name}" in known]
            for name in taken:
                edges.setdefault(f"{target}.{name}", [])
            rest = [name for name in names if name not in taken]
            if target in known and (rest or not names):
                edges.setdefault(target, []).extend(name for name in rest if name not in edges[target])
    return graph


def circles(graph: Mapping[str, Mapping[str, list[str]]]) -> list[list[str]]:
    """The modules that import each other in a loop (strongly connected components of two or more, or one module
    that imports itself), each sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, {}):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_every_kind_of_import_ties_a_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "from .b import B\nA = 1\n",
        "b.py": "def f():\n    from . import c\nB = 2\n",  # a function's import, a submodule by ``from .``
        "c.py": "import typing\nif typing.TYPE_CHECKING:\n    import pkg.a\n",  # absolute, for types only
        "sub/__init__.py": "",
        "sub/d.py": "from ..e import E\n",
        "e.py": "from pkg.sub import d\nE = 3\n",
        "f.py": "from . import A\n",  # the package's own __init__, which imports only a: no circle
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    graph = module_graph(package)
    assert graph["pkg.b"] == {"pkg.c": []} and graph["pkg.a"] == {"pkg.b": ["B"]} and graph["pkg.f"] == {"pkg": ["A"]}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.e", "pkg.sub.d"]]


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = module_graph()
    found = circles(graph)
    lines = []
    for members in found:
        lines.append(f"circle of {len(members)}: {', '.join(members)}")
        lines += [f"  {module} -> {target}: {', '.join(graph[module][target]) or '(the module)'}"
                  for module in members for target in graph[module] if target in members]
    assert not found, ("modules of evalcli import each other in a circle; move what they share down into a module "
                       "both import:\n" + "\n".join(lines))


OUTSIDE_CITATION = re.compile(r"\bSPEC\b|" + chr(0xA7))
"""A citation of the product brief, which is not in the repository: rules are cited by their docs/ page instead."""
CITING = {".py", ".md", ".yaml", ".yml", ".j2", ".html", ".js", ".mjs", ".css", ".json", ".toml", ".sh", ".txt"}
"""The files a rule may be cited in: code, templates and the view's page and scripts among them."""


def test_rules_are_cited_by_their_docs_page_not_by_a_document_outside_the_repository() -> None:
    roots = [PACKAGE, REPO / "tests", REPO / "bench", REPO / "docs", REPO / "examples", REPO / "datasets"]
    files = [p for root in roots if root.exists() for p in root.rglob("*")
             if p.suffix in CITING and p.is_file() and "out" not in p.relative_to(REPO).parts]
    files += [p for root in (REPO / ".ci", REPO / ".github") if root.exists() for p in root.rglob("*") if p.is_file()]
    files += [REPO / name for name in ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml") if (REPO / name).exists()]
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}"
             for path in files for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if OUTSIDE_CITATION.search(line)]
    assert not found, ("cite the docs/ page that states the rule (e.g. docs/verdicts.md), not a document outside the "
                       "repository:\n" + "\n".join(found))
