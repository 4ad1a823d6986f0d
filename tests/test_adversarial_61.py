"""Adversarial try 61 (docs/judges.md#calibrated-gates, docs/judges.md#confirm-on-fail,
docs/verdicts.md#repeats-and-the-pass-rate): judges you can trust and verdicts that know flakiness, broken as users
would, through the real CLI: targets that count their own plays, the loopback judge whose verdicts the tests script
and count."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, text

ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}

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
    for printed in (done.stdout, shown.stdout):
        assert "must average" not in printed and f"Gates ({rule})" in printed, printed
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


STOPPER = '''
import os, pathlib, signal, time
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    """Answers 'Busy.'; the first time it is called it stops its own run at once (two interrupts)."""
    if not (HERE / "stopped").exists():
        (HERE / "stopped").write_text("yes")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    return "Busy."
'''

PARTLY_MEASURED = """
target: stopper:agent
gates:
  - scorer: {{judge: {{criterion: The assistant gave a forecast., model: openai/judge-a, api_base: "{url}"}}}}
    id: forecast
    calibrated: {{min_kappa: 0.6}}
data:
  - transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Sunny.}}]
    labels: {{forecast: pass}}
  - transcript: [{{role: user, content: Weather}}, {{role: assistant, content: Dunno.}}]
    labels: {{forecast: fail}}
  - {{input: Weather in Oslo, labels: {{forecast: pass}}}}
  - {{input: Weather in Bergen, labels: {{forecast: pass}}}}
"""


def judged(request: Request) -> Reply:
    """Satisfied unless the assistant said 'Dunno' or 'Busy' (so the judge disagrees with the Oslo and Bergen labels)."""
    shown = json.dumps(request.body["messages"])
    return text(json.dumps({"satisfied": "Dunno" not in shown and "Busy" not in shown, "reasoning": "Scripted."}))


def test_an_interrupted_calibration_never_lets_a_judge_gate(llm_server: LLMServer, workdir: Path,
                                                           write: Callable[..., Path],
                                                           cli: Callable[..., CliResult]) -> None:
    """`evalcli calibrate` stopped after 2 of its 4 labelled conversations stored its figures on those 2 (kappa 1.0)
    as the judge's latest calibration, and the calibrated gate then gated runs: the two it never played are the two
    the judge gets wrong (kappa 0.2 on all four)."""
    llm_server.responder = judged
    write("stopper.py", STOPPER)
    write("d.yaml", PARTLY_MEASURED.format(url=llm_server.url))
    stopped = cli("calibrate", "d.yaml", "--concurrency", "1", env=ENV)
    assert stopped.code == 130, stopped.stderr
    assert "not stored" in stopped.stdout and "an interrupted calibration" in stopped.stdout, stopped.stdout
    assert stopped.db().execute("SELECT COUNT(*) FROM calibrations").fetchone()[0] == 0
    refused = cli("run", "d.yaml", env=ENV)
    assert refused.code == 2 and "never calibrated in this configuration" in refused.stderr, refused.stderr
    measured = cli("calibrate", "d.yaml", "--json", "-", env=ENV)  # played through: all four compared
    assert measured.code == 0, measured.stderr
    assert (measured.json["scorers"][0]["compared"], measured.json["scorers"][0]["kappa"]) == (4, 0.2)
    refused = cli("run", "d.yaml", env=ENV)
    assert refused.code == 2 and "kappa 0.200, below min_kappa 0.6" in refused.stderr, refused.stderr


def test_a_pass_rate_without_repeats_is_refused_not_ignored(workdir: Path, write: Callable[..., Path],
                                                            cli: Callable[..., CliResult]) -> None:
    """`--pass-rate 0.5` on a run played once was taken and ignored (its gates still needed a mean of 1.0), and stored
    as the run's pass rate: a run that looks lenient and is not. Refused (exit 2), nothing written."""
    write("flip.py", FLIP)
    write("d.yaml", "target: flip:agent\ngates: [{includes: ok}]\ndata:\n  - {id: c, input: hi}\n")
    for args in (["--pass-rate", "0.5"], ["--repeat", "1", "--pass-rate", "0.5"]):
        refused = cli("run", "d.yaml", *args, "--json", "out.json")
        assert refused.code == 2, refused.stderr
        assert "--pass-rate 0.5 without --repeat" in refused.stderr and "Traceback" not in refused.stderr
        assert "hint: add --repeat 5 or --repeat auto" in refused.stderr
        assert not (workdir / "out.json").exists() and not (workdir / "plays").exists()
    assert cli("run", "d.yaml", "--repeat", "2", "--pass-rate", "0.5").code == 0


SCALED = """
target: flip:agent
gates:
  - scorer: {{judge: {{criterion: The assistant said ok., model: openai/judge-a, api_base: "{url}", scale: 2}}}}
    id: said-ok
data:
  - {{id: c, input: hi}}
"""


def says_ok(request: Request) -> Reply:
    """Satisfied when the assistant said 'ok'."""
    shown = json.dumps(request.body["messages"])
    return text(json.dumps({"satisfied": "Assistant turn 1: ok" in shown, "reasoning": "Scripted."}))


def test_junit_and_markdown_say_a_repeated_gate_missed_a_play_not_that_its_mean_needs_one(
        llm_server: LLMServer, workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A gate judged with `scale: 2` scores 2, 0, 2, 0 over four plays: its mean is 1, and it failed because two plays
    missed it. JUnit and Markdown said `gate said-ok: score 1 (needs 1)`, a failure whose own words say it passed."""
    llm_server.responder = says_ok
    write("flip.py", FLIP)
    write("d.yaml", SCALED.format(url=llm_server.url))
    done = cli("run", "d.yaml", "--repeat", "4", "--junit", "r.xml", "--markdown", "r.md", "--json", "-", env=ENV)
    assert done.code == 1, done.stderr
    item = done.json["items"][0]
    assert (item["passed"], item["outcomes"]["gates"]["said-ok"]["score"]) == (False, 1.0)
    said = "gate said-ok: passed 2 of 4 plays (needs every play); mean score 1"
    junit = (workdir / "r.xml").read_text()
    assert "(needs 1)" not in junit and said in junit, junit
    markdown = (workdir / "r.md").read_text()
    assert "(needs 1)" not in markdown and said in markdown, markdown
    (workdir / "plays").unlink()
    lenient = cli("run", "d.yaml", "--repeat", "4", "--pass-rate", "0.75", "--junit", "l.xml", env=ENV)
    assert lenient.code == 1, lenient.stderr
    assert "gate said-ok: passed 2 of 4 plays (needs at least 0.75 of them); mean score 1" in \
        (workdir / "l.xml").read_text()


PER_TURN = """
target: flip:agent
data:
  - id: c
    turns:
      - input: hi
        gates:
          - scorer: {judge: {criterion: The assistant said ok., model: openai/judge-a}}
            id: said-ok
            calibrated: {min_labels: 1}
"""


def test_calibrated_on_a_per_turn_gate_is_a_located_error_not_a_run_refused_forever(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """`calibrated:` on a per-turn gate was accepted, and every run refused with a hint (label it, then `evalcli
    calibrate --scorer said-ok`) that cannot be followed: a label for a per-turn judge is refused, calibrate measures
    top-level judges only. Now `validate` and `run` say so where it is written (exit 2), and nothing is played."""
    write("flip.py", FLIP)
    write("d.yaml", PER_TURN)
    for command in (["validate", "d.yaml"], ["run", "d.yaml", "--json", "out.json"]):
        refused = cli(*command)
        assert refused.code == 2, refused.stderr
        assert "d.yaml:9:13: 'calibrated' is set on the per-turn gate \"said-ok\"" in refused.stderr, refused.stderr
        assert "move the judge to the dataset's top-level 'gates'" in refused.stderr
        assert "may not gate this run" not in refused.stderr and "Traceback" not in refused.stderr
    assert not (workdir / "out.json").exists() and not (workdir / "plays").exists()


def test_the_html_report_shows_the_plays_each_repeated_conversation_needed(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """The terminal shows `flaky 3/6` and the run's stability; the HTML report of the same `--repeat auto` run said
    only `passed`, with no stability, plays or pass rate anywhere in it."""
    write("flip.py", FLIP)
    write("d.yaml", "target: flip:agent\ngates: [{includes: ok}]\ndata:\n  - {id: c, input: hi}\n")
    done = cli("run", "d.yaml", "--repeat", "auto:6", "--pass-rate", "0.5", "--html", "r.html")
    assert done.code == 0, done.stderr
    assert "flaky 3/6" in done.stdout
    html = (workdir / "r.html").read_text()
    listed = html[html.index('id="c-0"'):]
    assert "flaky 3/6" in listed[:listed.index("</tr>")]
    assert ("stability as --repeat auto:6 settled it (Wilson 95% interval against pass rate 0.5): stable-pass 0, "
            "flaky 1, stable-fail 0   plays: 6 (at most 6)") in html
