"""The package shows its architecture: imports flow one way between packages, rich and litellm stay in their rooms,
and no module grows past one sitting. Read from the source (function-level imports count)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "evalcli"
BASE = {"errors", "secrets", "messages", "results", "aggregate"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(), "secrets": set(), "messages": set(), "results": {"messages"}, "aggregate": {"results"},
    "llm": BASE,
    "scorers": BASE | {"llm"},
    "targets": BASE | {"llm"},
    "dataset": BASE | {"llm", "scorers", "targets"},
    "store": BASE | {"llm", "scorers", "dataset"},
    "run": BASE | {"llm", "scorers", "targets", "dataset", "store"},
    "reports": BASE | {"llm", "scorers", "dataset", "store", "run"},
    "agent": BASE | {"llm"},
    "cli": BASE | {"llm", "scorers", "targets", "dataset", "store", "run", "reports"},
    "pytest_plugin": BASE | {"llm", "scorers", "targets", "dataset", "store", "run", "reports"},
}
"""Each room and the rooms it may import from: ``cli`` -> ``reports``, ``store``, ``run`` -> ``scorers``, ``targets``,
``dataset`` -> ``llm`` -> the base modules. The public API (``evalcli/__init__``) may import anything."""
MAX_LINES = 500


def modules() -> Iterator[tuple[str, list[str], Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
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
