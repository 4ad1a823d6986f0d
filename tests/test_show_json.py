"""``show RUN --json`` is exactly what ``run --json`` wrote for that run (docs/identity.md): ``repeat``, ``pass_at_k`` and
``pass_all_k`` included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult


def test_show_json_is_what_run_json_wrote_for_a_repeated_run(write: Callable[..., Path],
                                                             cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:scripted\ngates: [{excludes: bad}]\ndata:\n  - input: 'q=>good'\n"
                    "  - input: 'q=>bad'\n  - turns: [{input: 'q=>good', gates: [{includes: good}]}]\n")
    ran = cli("run", "d.yaml", "--repeat", "3", "--json", "-")
    assert ran.code == 1 and ran.json["repeat"] == 3 and ran.json["pass_at_k"]["excludes(bad)"] == 2 / 3
    shown = cli("show", ran.json["run_id"], "--json", "-")
    assert shown.code == 0
    assert shown.json == ran.json  # on old main: without repeat, pass_at_k and pass_all_k
    single = cli("run", "d.yaml", "--json", "-")
    assert "repeat" not in single.json and cli("show", "latest", "--json", "-").json == single.json


def test_show_json_to_stdout_writes_only_the_json(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:scripted\ngates: [{excludes: bad}]\ndata: [{input: 'q=>good'}, {input: 'q=>bad'}]\n")
    ran = cli("run", "d.yaml", "--json", "-")
    shown = cli("show", "latest", "--json", "-")
    assert shown.code == 0 and shown.json == ran.json
    assert shown.stderr == ""  # old main: the run's table and verdict line on stderr as well
    item = cli("show", "latest", "1", "--json", "-")
    assert item.code == 0 and item.json["item"]["index"] == 1 and item.stderr == ""
    table = cli("show", "latest", "--json", "r.json")  # to a file: the table on stdout, as before
    assert "verdict: failed" in table.stdout and (table.cwd / "r.json").is_file()
