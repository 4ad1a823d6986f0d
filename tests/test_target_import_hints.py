"""A target path a newcomer writes wrong (its file instead of its module, a dot instead of the colon), and a target
whose own import fails: the error says where and what to write (the real CLI, docs/targets/python.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

AGENT = "def answer(input, **kw):\n    return 'hi'\n"


@pytest.mark.parametrize(("target", "hint"), [
    ("my_agent.py:answer", "hint: name the module, not its file: my_agent:answer"),
    ("./my_agent.py:answer", "hint: name the module, not its file: my_agent:answer"),
    ("agents/my_agent.py:answer", "hint: name the module, not its file: agents.my_agent:answer"),
    ("my_agent.answer", "hint: write it as module:attribute, e.g. my_agent:answer"),
])
def test_a_target_written_as_a_file_or_with_a_dot_gets_its_import_path(tmp_path: Path, target: str, hint: str) -> None:
    # before: "check that module 'my_agent.py' exists" (it does), Python's "'package' argument is required", and
    # the example's own `examples.agent:agent` for a dotted path
    (tmp_path / "my_agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(f"target: {target}\ngates: [{{includes: hi}}]\ndata:\n  - {{id: a, input: hi}}\n")
    result = run_cli(["validate", "d.yaml"], tmp_path, {"PYTHONPATH": str(REPO)})
    assert result.code == 2 and "d.yaml:1:9:" in result.stderr and hint in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_targets_module_that_fails_to_import_names_its_own_line(tmp_path: Path) -> None:
    # before: the module the target's module imports was named, but not where: "raised at raisesmod.py:3" and that
    # it is not installed in the Python evalcli runs with
    (tmp_path / "raisesmod.py").write_text("import os\n\nimport notinstalled_pkg_52\n\n" + AGENT)
    (tmp_path / "boom.py").write_text("x = 1\n\n\nraise ValueError('boom')\n")
    for target, said in (("raisesmod:answer", "No module named 'notinstalled_pkg_52' (raised at raisesmod.py:3)"),
                         ("boom:x", "ValueError: boom (raised at boom.py:4)")):
        (tmp_path / "d.yaml").write_text(f"target: {target}\ngates: [{{includes: hi}}]\ndata:\n  - {{id: a, input: hi}}\n")
        result = run_cli(["validate", "d.yaml"], tmp_path, {"PYTHONPATH": str(REPO)})
        assert result.code == 2 and said in result.stderr, result.stderr
    (tmp_path / "d.yaml").write_text("target: raisesmod:answer\ngates: [{includes: hi}]\ndata:\n  - {id: a, input: hi}\n")
    result = run_cli(["validate", "d.yaml"], tmp_path, {"PYTHONPATH": str(REPO)})
    assert "imports 'notinstalled_pkg_52', which is not installed in the Python evalcli runs with" in result.stderr
