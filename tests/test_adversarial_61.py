"""Adversarial try 61 (docs/judges.md#calibrated-gates, docs/judges.md#confirm-on-fail,
docs/verdicts.md#repeats-and-the-pass-rate): judges you can trust and verdicts that know flakiness, broken as users
would, through the real CLI: targets that count their own plays, the loopback judge whose verdicts the tests script
and count."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

FLIP = '''
import pathlib
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    """Right on every other play: 'ok' on plays 1, 3, ..., 'no' on plays 2, 4, ..."""
    counter = HERE / "plays"
    play = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(play + 1))
    return "ok" if play % 2 == 0 else "no"
'''


def test_the_gate_table_states_the_rule_of_repeats_not_a_mean_of_one(workdir: Path, write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    """A gate that passed 2 of 4 plays passes at --pass-rate 0.5 with a score of 0.5: the terminal, `show` and the HTML
    report said "each must average >= 1.0" above that passing 0.5, and Markdown gave no rule at all."""
    write("flip.py", FLIP)
    write("d.yaml", "target: flip:agent\ngates: [{includes: ok}]\ndata:\n  - {id: c, input: hi}\n")
    done = cli("run", "d.yaml", "--repeat", "4", "--pass-rate", "0.5", "--html", "r.html", "--markdown", "r.md",
               "--json", "r.json")
    assert done.code == 0, done.stderr
    result = json.loads((workdir / "r.json").read_text())
    assert result["gate_results"] == [{"id": "includes(ok)", "passed": True, "score": 0.5}]
    rule = "each passes when at least 0.5 of each conversation's plays passed it"
    shown = cli("show", result["run_id"])
    for text in (done.stdout, shown.stdout):
        assert "must average" not in text and f"Gates ({rule})" in text, text
    html = (workdir / "r.html").read_text()
    assert "must average" not in html and rule in html.replace("&#39;", "'")
    markdown = (workdir / "r.md").read_text()
    assert f"Gates: {rule} (`--repeat 4 --pass-rate 0.5`)." in markdown

    (workdir / "plays").unlink()
    strict = cli("run", "d.yaml", "--repeat", "auto:4", "--markdown", "s.md")
    assert strict.code == 1, strict.stderr
    every = "each passes when every play of every conversation passed it"
    assert f"Gates ({every})" in strict.stdout
    assert f"Gates: {every} (`--repeat auto:4`)." in (workdir / "s.md").read_text()
    once = cli("run", "d.yaml", "--markdown", "o.md")
    assert "Gates (each must average >= 1.0)" in once.stdout and "Gates:" not in (workdir / "o.md").read_text()
