"""``show RUN --json`` is exactly what ``run --json`` wrote for that run (docs/identity.md): ``repeat``, ``pass_at_k`` and
``pass_all_k`` included."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _strict(text: str) -> Any:
    """``json.loads`` as ``JSON.parse`` and ``jq`` read: no ``NaN``, ``Infinity`` or ``-Infinity``."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_a_dataset_gives_are_written_as_null(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    """YAML's ``.nan`` and ``-.inf`` (and a JSONL line's ``NaN``) in metadata are numbers Python writes as ``NaN``,
    which no JSON reader but Python's accepts: the JSON result says ``null`` (docs/reference/json.md)."""
    write("d.yaml", "target: agents:scripted\ngates: [{excludes: bad}]\ndata:\n"
                    "  - {input: 'q=>good', metadata: {x: .nan, y: -.inf, z: [1.5, .inf]}}\n")
    write("j.yaml", "target: agents:scripted\ngates: [{excludes: bad}]\ndata_file: j.jsonl\n")
    write("j.jsonl", '{"input": "q=>good", "metadata": {"x": NaN, "y": Infinity}}\n')
    for dataset, metadata in (("d.yaml", {"x": None, "y": None, "z": [1.5, None]}), ("j.yaml", {"x": None, "y": None})):
        ran = cli("run", dataset, "--json", "-")
        assert ran.code == 0
        assert _strict(ran.stdout)["items"][0]["metadata"] == metadata  # old main: ValueError NaN is not JSON
        shown = cli("show", "latest", "--json", "-")
        assert _strict(shown.stdout) == _strict(ran.stdout)
        item = cli("show", "latest", "0", "--json", "-")
        assert _strict(item.stdout)["item"]["metadata"] == metadata
