"""A declared gate that no conversation could score (docs/identity.md): one warning line, exit 3 under --strict, and a
failing ``::verdict`` under pytest's --evalcli-strict."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.pytest_project import run_pytest, write_project

NEVER = "target: agents:echo\ngates: [structured_output]\ndata: [{input: hi}, {input: ho}]\n"


def test_a_gate_never_scorable_warns_once_and_fails_strict(write: Callable[..., Path],
                                                           cli: Callable[..., CliResult]) -> None:
    write("d.yaml", NEVER)
    plain = cli("run", "d.yaml")
    assert plain.code == 0
    warned = [line for line in plain.stderr.splitlines() if "not scorable on any conversation" in line]
    assert warned == ["warning: gate structured_output was not scorable on any conversation: nothing was checked "
                      "(with --strict this run exits 3)"], plain.stderr
    strict = cli("run", "d.yaml", "--strict")
    assert strict.code == 3  # on old main: 0
    write("ok.yaml", "target: agents:echo\ngates: [structured_output, {includes: said}]\n"
                     "data: [{input: hi}]\n")
    assert cli("run", "ok.yaml", "--strict").code == 3  # the other gate passing does not hide it
    write("some.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata: [{input: hi}]\n")
    some = cli("run", "some.yaml", "--strict")
    assert some.code == 0 and "not scorable on any" not in some.stderr


def test_pytest_evalcli_strict_fails_the_verdict_of_a_gate_never_scorable(tmp_path: Path) -> None:
    write_project(tmp_path, {"n.yaml": NEVER.replace("agents:echo", "agent:weather")})
    assert run_pytest(tmp_path, "n.yaml").code == 0
    strict = run_pytest(tmp_path, "n.yaml", "--evalcli-strict")
    assert strict.code == 1, strict.out  # on old main: 2 skipped, 1 passed
    assert "FAILED n.yaml::verdict" in strict.out and "structured_output was not scorable" in strict.out
