"""The docs' generated reference pages are current (like ``cog --check``), what they generate is what the code
says, the JSON page's example has the keys of a real run in their order, and README.md is a front door whose
links all lead somewhere."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer
from markdown.extensions.toc import slugify

from evalcli.cli.app import app
from evalcli.errors import EXIT_PRECEDENCE, ExitCode
from tests.conftest import REPO, run_cli


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_reference", module)
    spec.loader.exec_module(module)
    return module


def test_the_generated_pages_are_current() -> None:
    assert generator().main(["--check"]) == 0, "a generated docs page is stale: run make docs"


def test_check_fails_on_a_stale_page_and_write_repairs_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = generator()
    for page in {page for page, _ in gen.PARTS.values()} | {str(gen.scorer_docs.PAGE)}:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / page, tmp_path / page)
    cli = tmp_path / "docs" / "reference" / "cli.md"
    fresh = cli.read_text(encoding="utf-8")
    cli.write_text(fresh.replace("| `--strict` |", "| `--strictly` |"), encoding="utf-8")
    assert gen.main(["--check", "--root", str(tmp_path)]) == 1
    assert "docs/reference/cli.md: its generated part is out of date" in capsys.readouterr().err
    assert gen.main(["--write", "--root", str(tmp_path)]) == 0
    assert cli.read_text(encoding="utf-8") == fresh
    assert gen.main(["--check", "--root", str(tmp_path)]) == 0
    with pytest.raises(ValueError, match="markers"):
        gen.with_part("no markers here\n", "cli", "body")


def commands(command: Any, path: str) -> list[tuple[str, Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += commands(sub, f"{path} {name}")
    return found


def test_the_cli_page_has_every_command_and_option_with_its_help() -> None:
    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    tree = commands(typer.main.get_command(app), "evalcli")
    assert {"evalcli run", "evalcli cache clear", "evalcli cache info", "evalcli merge"} <= {p for p, _ in tree}
    for path, command in tree:
        section = page.split(f"### `{path}`\n", 1)[1].split("\n### ", 1)[0]
        assert f"```text\n{path} " in section, path
        for param in command.params:
            shown = param.opts if param.param_type_name == "option" else [param.metavar or param.name.upper()]
            for name in shown:
                assert f"`{name}" in section or f", {name}" in section, (path, name)
            if getattr(param, "help", None):
                assert " ".join(param.help.split())[:40] in section, (path, param.name)


def test_the_exit_code_table_is_the_codes_evalcli_uses_in_the_order_they_win() -> None:
    assert list(ExitCode) == [0, 1, 2, 3, 4, 5, 70, 130]
    assert all(code.meaning for code in ExitCode)
    assert set(EXIT_PRECEDENCE) == set(ExitCode) - {ExitCode.INTERNAL}
    for a, b in itertools.combinations(EXIT_PRECEDENCE, 2):
        assert ExitCode.worst([b, a]) == ExitCode.worst([a, b]) == a, (a, b)
    page = (REPO / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    assert "When several apply, the first of 130, then 2, then 1, then 5, then 4, then 3, then 0 wins." in page


def test_the_json_page_shows_the_keys_of_a_real_run_in_their_order(tmp_path: Path) -> None:
    page = (REPO / "docs" / "reference" / "json.md").read_text(encoding="utf-8")
    documented = json.loads(page.split("<!-- json-shape -->\n```json\n", 1)[1].split("```", 1)[0])
    real = run_cli(["run", "datasets/targets/compare.yaml", "--json", "-", "--db", str(tmp_path / "e.db")], REPO)
    assert real.code == 0, real.stderr
    got = real.json
    assert list(documented) == list(got)
    assert list(documented["summary"]) == list(got["summary"])
    assert list(documented["items"][0]) == list(got["items"][0])
    assert list(documented["items"][0]["turns"][0]) == list(got["items"][0]["turns"][0])
    assert list(documented["turn_results"][0]) == list(got["turn_results"][0])
    assert list(documented["gate_results"][0]) == list(got["gate_results"][0])


README = REPO / "README.md"
LINK = re.compile(r"\]\((?!https?://|mailto:)(?P<path>[^)#\s]*)(?:#(?P<anchor>[^)\s]+))?\)")


def anchors(markdown: str) -> set[str]:
    body = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {slugify(re.sub(r"[`*]", "", line.lstrip("#").strip()), "-") for line in body.splitlines()
            if re.match(r"#{1,6} ", line)}


def test_the_readme_is_a_short_front_door_with_the_quick_start_first() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
    first_screen = "\n".join(lines[:25])
    assert "make demo" in first_screen and "make test" in first_screen
    text = "\n".join(lines)
    for step in ("evalcli init", "evalcli run", "evalcli show", "--html", "--junit", "threshold:", "turns:"):
        assert step in text, step


def test_every_relative_link_of_the_readme_leads_to_a_page_and_its_heading() -> None:
    text = README.read_text(encoding="utf-8")
    links = list(LINK.finditer(text))
    assert len(links) > 20
    for link in links:
        target = (REPO / link["path"]) if link["path"] else README
        assert target.is_file(), link.group(0)
        if link["anchor"]:
            assert link["anchor"] in anchors(target.read_text(encoding="utf-8")), link.group(0)


CITATION = re.compile(r"docs/(?P<page>[A-Za-z0-9_/.-]*\.md)(?:#(?P<anchor>[a-z0-9-]+))?")
"""A rule cited by its docs page in code, a template, a test or a benchmark (``docs/verdicts.md#sequential-repeats``)."""


def test_every_page_and_heading_cited_in_the_code_tests_and_templates_exists() -> None:
    roots = [REPO / name for name in ("evalcli", "tests", "bench", "datasets", "examples")]
    files = [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()
             and p.suffix in {".py", ".j2", ".yaml", ".yml", ".md", ".js", ".html", ".css"}
             and "out" not in p.relative_to(REPO).parts]
    cited = [(path, number, match) for path in files
             for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             for match in CITATION.finditer(line)]
    assert len(cited) > 500
    headings: dict[Path, set[str]] = {}
    wrong = []
    for path, number, match in cited:
        page = REPO / "docs" / match["page"]
        if not page.is_file():
            wrong.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)} (no such page)")
        elif match["anchor"] and match["anchor"] not in headings.setdefault(page, anchors(page.read_text("utf-8"))):
            wrong.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)} (no such heading)")
    assert not wrong, "cite a page and heading that exist:\n" + "\n".join(wrong)
