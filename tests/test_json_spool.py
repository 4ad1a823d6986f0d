"""``--quiet --json``: each conversation's JSON is rendered while the run goes on, as the writer thread stores it
(``JsonSpool``), and the report is exactly what reading the stored run back gives, byte for byte (and what
``evalcli show RUN --json`` prints), secrets redacted; when a conversation could not be stored the report reads
the run back instead."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from evalcli.reports.json import JsonSpool, item_json
from evalcli.results import ItemResult
from evalcli.secrets import Redactor
from evalcli.store import Store
from tests.conftest import CliResult

SECRET = "spool-secret-0123456789"

AGENT = '''
import os

def reply(input, **kw):
    if input == "boom":
        raise RuntimeError("target fell over")
    if input == "leak":
        return "the token is " + os.environ["SPOOL_TOKEN"]
    return input.split("=>", 1)[1].strip() if "=>" in input else input
'''

DATASET = """
target: spool_agents:reply
gates: [{excludes: broken}]
scorers:
  - scorer: {includes: good}
    threshold: 0.9
  - {similarity: {expected: good answer}}
data:
  - {id: fine, input: "q=>good answer ✓", tags: [smoke], metadata: {owner: ann, n: 3}}
  - {id: crash, input: boom}
  - id: chat
    turns:
      - input: "q=>good"
        gates: [{includes: good}]
      - input: "q=>bad <&> \\"quoted\\""
        gates: [{includes: good}]
  - {id: leak, input: leak}
  - {id: broken-one, input: "q=>broken"}
"""


def _item_lines(text: str, indent: str = "") -> list[str]:
    """The ``items`` entries of each JSON report in ``text`` as written: one line each, after its ``"items": [``."""
    lines, inside = [], False
    for line in text.splitlines():
        if line == indent + '  "items": [':
            inside = True
        elif inside and line.startswith(indent + "  ]"):
            inside = False
        elif inside:
            lines.append(line.removeprefix(indent + "    ").removesuffix(","))
    return lines


def _read_back(db: Path, run_id: str) -> list[str]:
    """What the report gives when it reads the stored run back (the path without the spool)."""
    redact = Redactor(env={**os.environ, "SPOOL_TOKEN": SECRET})
    store = Store(db, redact)
    try:
        return [item_json(item, redact) for item in store.load_items(run_id)]
    finally:
        store.close()


def test_quiet_json_rendered_during_the_run_is_the_stored_run_read_back(workdir: Path, write: Callable[..., Path],
                                                                      cli: Callable[..., CliResult]) -> None:
    write("spool_agents.py", AGENT)
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--quiet", "--json", "out.json", env={"SPOOL_TOKEN": SECRET})
    assert result.code == 1, result.stderr  # broken-one and the second turn of chat miss a gate
    text = (workdir / "out.json").read_text(encoding="utf-8")
    document = json.loads(text)
    assert [i["id"] for i in document["items"]] == ["fine", "crash", "chat", "leak", "broken-one"]
    lines = _item_lines(text)
    assert lines == _read_back(workdir / "evalcli.db", document["run_id"])
    assert "✓" in text and SECRET not in text and "[redacted]" in text
    shown = cli("show", document["run_id"], "--json", "-", env={"SPOOL_TOKEN": SECRET})
    assert shown.code == 0 and shown.stdout == text + "\n"  # `show --json` prints it as `run --json` wrote it
    # --quiet still lists the conversation that errored, beside the verdict
    assert "crash" in result.stdout and "target fell over" in result.stdout and "verdict: failed" in result.stdout


def test_json_on_stdout_for_several_datasets_is_the_stored_runs_read_back(workdir: Path, write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult]) -> None:
    write("spool_agents.py", AGENT)
    write("d.yaml", DATASET)
    write("e.yaml", "target: spool_agents:reply\nscorers: [{includes: good}]\n"
                    "data: [{id: one, input: 'q=>good'}, {id: two, input: 'q=>no'}]\n")
    result = cli("run", "d.yaml", "e.yaml", "--quiet", "--json", "-", env={"SPOOL_TOKEN": SECRET})
    assert result.code == 1, result.stderr
    runs = result.json["runs"]
    assert [len(r["items"]) for r in runs] == [5, 2]
    lines = _item_lines(result.stdout, indent="  ")
    expected = [line for r in runs for line in _read_back(workdir / "evalcli.db", r["run_id"])]
    assert lines == expected and SECRET not in result.stdout


def test_a_conversation_that_could_not_be_stored_is_left_out_as_reading_back_leaves_it(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("spool_agents.py", AGENT)
    write("d.yaml", "target: spool_agents:reply\nscorers: [{includes: good}]\n"
                    "data: [{id: a, input: 'q=>good'}, {id: b, input: 'q=>good too'}, {id: c, input: 'q=>good'}]\n")
    assert cli("run", "d.yaml").code == 0  # makes the database, so the trigger can be added
    with sqlite3.connect(workdir / "evalcli.db") as conn:  # b's row cannot be written; a's and c's can
        conn.execute("CREATE TRIGGER no_b BEFORE INSERT ON items WHEN NEW.item_id = 'b' "
                     "BEGIN SELECT RAISE(ABORT, 'the disk says no'); END")
    result = cli("run", "d.yaml", "--quiet", "--json", "out.json")
    assert "could not store all of run" in result.stderr and "the disk says no" in result.stderr
    text = (workdir / "out.json").read_text(encoding="utf-8")
    document = json.loads(text)
    assert [i["id"] for i in document["items"]] == ["a", "c"]
    assert _item_lines(text) == _read_back(workdir / "evalcli.db", document["run_id"])


def _item(index: int, output: str) -> ItemResult:
    return ItemResult(index, f"i{index}", [], "input", "ok", "t", "r", [], {}, {}, None, None, 1.0)


def test_the_spool_gives_conversations_back_in_dataset_order_the_last_text_of_each() -> None:
    spool = JsonSpool(Redactor(env={}))
    try:
        for index in (2, 0, 1):
            spool.add(_item(index, "x"))
        spool.add(ItemResult(0, "again", [], "input", "ok", "t", "r", [], {}, {}, None, None, 2.0))  # written again
        texts = [json.loads(t) for t in spool.texts()]
    finally:
        spool.close()
    assert [(t["index"], t["id"]) for t in texts] == [(0, "again"), (1, "i1"), (2, "i2")]



def test_a_spool_whose_disk_is_full_says_so_and_the_report_reads_the_run_back() -> None:
    spool = JsonSpool(Redactor(env={}))
    assert spool.file is not None
    spool.file.close()
    spool.file = open("/dev/full", "w+b")  # the kernel's full disk: every write that reaches it fails
    try:
        spool.add(_item(0, "x"))  # buffered: the failure comes when it is written out
        assert not spool.usable and isinstance(spool.failed, OSError)
        spool.add(_item(1, "y"))
        assert list(spool.spans) == [0] and not spool.usable
    finally:
        spool.close()
