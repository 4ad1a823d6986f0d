"""The docs' scorer table (docs/reference/scorers.md) is generated from the kind declarations: it must not drift
from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalcli.scorers.docs import END, START, main, scorer_table, with_table
from evalcli.scorers.kinds import all_kinds
from tests.conftest import REPO

PAGE = REPO / "docs" / "reference" / "scorers.md"
LIBRARY = ["tool_args", "trajectory", "tool_f1", "json_output", "rubric", "completeness", "knowledge_retention",
           "role_adherence", "grounded", "factuality", "goal_achieved"]


def test_the_pages_table_matches_the_declarations() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert with_table(text) == text, f"{PAGE}'s scorer table is stale: run make docs"
    assert main(["--check", "--page", str(PAGE)]) == 0


def test_the_table_has_every_kind_with_its_arguments() -> None:
    table = scorer_table()
    rows = table.splitlines()[2:]
    assert len(rows) == len(all_kinds())
    for kind in all_kinds():
        row = next(r for r in rows if r.startswith(f"| `{kind.name}`"))
        assert kind.summary.replace("|", "\\|") in row
        for name, default, _ in kind.argument_docs():
            assert f"`{name}`" + ("" if default == "required" else f" = `{default}`") in row
    assert {name for name in LIBRARY} <= {kind.name for kind in all_kinds()}
    trajectory = next(r for r in rows if r.startswith("| `trajectory`"))
    assert "`expected`, `mode` = `in_order`, `args` = `ignore`" in trajectory
    assert "`model` = `local/gemma-3-270m`" in next(r for r in rows if r.startswith("| `rubric`"))


def test_check_fails_on_drift_and_write_repairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "scorers.md"
    table = scorer_table()
    stale = PAGE.read_text(encoding="utf-8").replace(table, table.replace("`tool_f1`", "`tool_f2`"))
    assert "`tool_f2`" in stale
    copy.write_text(stale, encoding="utf-8")
    assert main(["--check", "--page", str(copy)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["--write", "--page", str(copy)]) == 0
    assert main(["--check", "--page", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")


def test_markers_are_required() -> None:
    with pytest.raises(ValueError, match="markers"):
        with_table("# no table here\n")
    with pytest.raises(ValueError, match="markers"):
        with_table(f"{END}\n{START}\n")


def test_the_docs_describe_every_library_kind() -> None:
    checks = (REPO / "docs" / "checks.md").read_text(encoding="utf-8").split("## The scorer library", 1)[1]
    judges = (REPO / "docs" / "judges.md").read_text(encoding="utf-8")
    section = checks + judges.split("## More LLM judges", 1)[1].split("## Repeated judging", 1)[0]
    for name in LIBRARY:
        assert f"| `{name}` |" in section, name
