"""Adversarial checks of sequential repeats, the pass rate, confirm-on-fail samples and calibrated gates, through
the real CLI (docs/verdicts.md#sequential-repeats, docs/judges.md). Expected figures are worked by hand: at P = 1.0
a conversation that always passes plays MAX times; at P = 0.5 the Wilson lower end of 4/4 is 4 / 7.8416 = 0.510."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, status, verdict

INTERRUPTING = '''
import os, pathlib, signal
HERE = pathlib.Path(__file__).parent


def agent(input, **kw):
    """Always passes; logs each call, and interrupts its own run at the third call of the first run."""
    log = HERE / "calls.log"
    with log.open("a") as out:
        out.write(input + "\\n")
    if len(log.read_text().splitlines()) == 3 and not (HERE / "interrupted").exists():
        (HERE / "interrupted").write_text("yes")
        os.kill(os.getpid(), signal.SIGINT)
    return "Sunny."
'''


def project(tmp_path: Path, agent: str, dataset: str) -> Path:
    (tmp_path / "coin.py").write_text(textwrap.dedent(agent))
    (tmp_path / "coin.yaml").write_text(textwrap.dedent(dataset))
    return tmp_path


def cli(cwd: Path, *args: str) -> CliResult:
    return run_cli(list(args), cwd)


def resume_id(result: CliResult) -> str:
    """The run id an interrupted run's line names (``continue with: evalcli run D --resume ID``)."""
    return (result.stdout + result.stderr).split("--resume ", 1)[1].split()[0]


def plays_of(path: Path) -> list[tuple[str, Any, Any, Any]]:
    items = json.loads(path.read_text())["items"]
    return [(item["id"], item["repeats"], item["plays_passed"], item["stability"]) for item in items]


def test_auto_interrupted_midway_resumes_without_losing_or_doubling_a_play(tmp_path: Path) -> None:
    """Ctrl-C at the third play of an always-passing conversation under --repeat auto (P = 1.0, MAX 10): the
    conversation in flight finishes its ten plays in the grace period (as a fixed --repeat does) rather than being
    stored settled on three; the resume plays the other one ten times: 20 calls, 10 plays each."""
    cwd = project(tmp_path, INTERRUPTING, """
        target: coin:agent
        concurrency: 1
        gates: [{includes: Sunny}]
        data:
          - {id: a, input: 'first'}
          - {id: b, input: 'second'}
        """)
    first = cli(cwd, "run", "coin.yaml", "--repeat", "auto", "-q")
    assert first.code == 130, first.stderr
    resumed = cli(cwd, "run", "coin.yaml", "--resume", resume_id(first), "--json", "out.json", "-q")
    assert resumed.code == 0, resumed.stderr
    assert plays_of(cwd / "out.json") == [("a", 10, 10, "stable-pass"), ("b", 10, 10, "stable-pass")]
    assert len((cwd / "calls.log").read_text().splitlines()) == 20


COIN = '''
def agent(input, **kw):
    """Always right when asked 'always', never when asked 'never'."""
    return "Sunny." if "always" in input else "no"
'''

FOUR = """
    target: coin:agent
    gates: [{includes: Sunny}]
    data:
      - {id: a1, input: 'always 1'}
      - {id: a2, input: 'always 2'}
      - {id: n1, input: 'never 1'}
      - {id: n2, input: 'never 2'}
    """


def test_merge_refuses_shards_decided_by_other_repeat_rules(tmp_path: Path) -> None:
    """Shards run at --pass-rate 0.5 and 1.0 (or auto against a fixed --repeat 4) are not one run: merge says so
    (exit 2) instead of stamping the first shard's rule on both; the same rule merges."""
    cwd = project(tmp_path, COIN, FOUR)
    for shard, db, extra in (("1/2", "a.db", ["--pass-rate", "0.5"]), ("2/2", "b.db", []),
                             ("2/2", "c.db", ["--pass-rate", "0.5"]), ("2/2", "d.db", ["--repeat", "4"])):
        repeat = [] if "--repeat" in extra else ["--repeat", "auto"]
        cli(cwd, "run", "coin.yaml", *repeat, *extra, "--shard", shard, "--db", db, "-q")
    other = cli(cwd, "merge", "a.db", "b.db", "--out", "ab.db")
    assert other.code == 2, other.stdout + other.stderr
    assert "--pass-rate 1" in other.stderr and "--pass-rate 0.5" in other.stderr
    fixed = cli(cwd, "merge", "c.db", "d.db", "--out", "cd.db")
    assert fixed.code == 2 and "--repeat 4" in fixed.stderr and "--repeat auto:10" in fixed.stderr
    same = cli(cwd, "merge", "a.db", "c.db", "--out", "ac.db")
    assert same.code == 1, same.stderr  # n1 and n2 fail: the merged verdict
    merged = json.loads(cli(cwd, "show", "latest", "--db", "ac.db", "--json", "-").stdout)
    assert (merged["plays"], merged["pass_rate"], merged["repeat_auto"]) == (16, 0.5, True)  # 4 plays settle each


def test_bad_repeat_and_pass_rate_are_refused_as_written(tmp_path: Path) -> None:
    """`--repeat auto:x` is refused (exit 2) and the message quotes it as written: the console expanded ``:x:`` into an
    emoji before. auto:0 and auto:1 (no second play to decide on) and a pass rate of 1.5 or 0 are refused too."""
    cwd = project(tmp_path, COIN, FOUR)
    emoji = cli(cwd, "run", "coin.yaml", "--repeat", "auto:x", "-q")
    assert emoji.code == 2 and "--repeat auto:x: not a maximum of 2 plays or more" in emoji.stderr, emoji.stderr
    for args in (["--repeat", "auto:0"], ["--repeat", "auto:1"], ["--pass-rate", "1.5"], ["--pass-rate", "0"]):
        refused = cli(cwd, "run", "coin.yaml", *args, "-q")
        assert refused.code == 2 and "Traceback" not in refused.stderr and args[1] in refused.stderr, refused.stderr


LOGGED = '''
import pathlib
HERE = pathlib.Path(__file__).parent


def agent(input, **kw):
    """Always right when asked 'always', never when asked 'never'; logs each call."""
    with (HERE / "calls.log").open("a") as log:
        log.write(input + "\\n")
    return "Sunny." if "always" in input else "no"
'''


@pytest.mark.parametrize(("args", "always", "never"), [
    ([], 10, 1),                                   # P = 1.0: no lower end lies above 1; one failure settles
    (["--pass-rate", "0.5"], 4, 4),                # 4 / 7.8416 = 0.510 > 0.5; 3.8416 / 7.8416 = 0.490 < 0.5
    (["--pass-rate", "0.8"], 10, 1),               # 16 plays needed (n / (n + 3.8416) > 0.8): MAX first; 0.7935 < 0.8
    (["--pass-rate", "0.8", "--repeat", "auto:20"], 16, 1),
    (["--pass-rate", "0.5", "--repeat", "auto:3"], 3, 3),  # MAX before the interval decides: labelled by the plays
])
def test_plays_needed_are_the_hand_worked_wilson_figures(tmp_path: Path, args: list[str], always: int,
                                                         never: int) -> None:
    cwd = project(tmp_path, LOGGED, """
        target: coin:agent
        gates: [{includes: Sunny}]
        data:
          - {id: a, input: 'always'}
          - {id: n, input: 'never'}
        """)
    repeat = [] if "--repeat" in args else ["--repeat", "auto"]
    result = cli(cwd, "run", "coin.yaml", *repeat, *args, "--json", "out.json", "-q")
    assert result.code == 1, result.stderr
    assert plays_of(cwd / "out.json") == [("a", always, always, "stable-pass"), ("n", never, 0, "stable-fail")]
    assert len((cwd / "calls.log").read_text().splitlines()) == always + never
    assert json.loads((cwd / "out.json").read_text())["plays"] == always + never


CONFIRMED = """
gates:
  - scorer:
      judge:
        criterion: The assistant gave a forecast.
        model: openai/judge-a
        api_base: {url}
        samples: {{n: 3, when: fail}}
    id: forecast
data:
  - id: a
    transcript: [{{role: user, content: "Weather?"}}, {{role: assistant, content: Sunny.}}]
"""


@pytest.mark.parametrize(("verdicts", "calls", "score", "code"), [
    ({1: True}, 1, 1.0, 0),                        # the first passes: asked once
    ({1: False, 2: True, 3: False}, 3, 0.0, 1),    # confirmed: 1 of 3 passed
    ({1: False, 2: True, 3: True}, 3, 1.0, 0),     # overturned: 2 of 3 passed
])
def test_confirm_on_fail_asks_once_or_three_times_and_keeps_every_verdict(
        tmp_path: Path, llm_server: LLMServer, verdicts: dict[int, bool], calls: int, score: float, code: int) -> None:
    def by_seed(request: Request) -> Reply:
        seed = request.body.get("seed")
        return verdict(verdicts[seed]) if seed in verdicts else status(500)

    llm_server.responder = by_seed
    (tmp_path / "d.yaml").write_text(CONFIRMED.format(url=llm_server.url))
    result = run_cli(["run", "d.yaml", "--json", "-", "--no-cache"], tmp_path, {"EVALCLI_LLM_RETRIES": "0"})
    assert result.code == code, result.stderr
    assert sorted(r.body.get("seed") for r in llm_server.requests) == list(range(1, calls + 1))
    gate = result.json["items"][0]["outcomes"]["gates"]["forecast"]
    assert gate["score"] == score
    assert [s["score"] for s in gate["samples"]] == [float(verdicts[n]) for n in range(1, calls + 1)]


def test_resume_names_the_repeat_rule_as_written(tmp_path: Path) -> None:
    """Resuming an interrupted --repeat auto run with another MAX or a fixed count is refused (exit 2) naming both
    as a user writes them; before, it read '--repeat 20 (the run has --repeat 10)' and 'no --repeat auto'. A fixed
    --repeat 3 run refuses --repeat auto with its reason."""
    cwd = project(tmp_path, INTERRUPTING, """
        target: coin:agent
        concurrency: 1
        gates: [{includes: Sunny}]
        data:
          - {id: a, input: 'first'}
          - {id: b, input: 'second'}
        """)
    auto = cli(cwd, "run", "coin.yaml", "--repeat", "auto", "-q")
    assert auto.code == 130, auto.stderr
    more = cli(cwd, "run", "coin.yaml", "--resume", resume_id(auto), "--repeat", "auto:20", "-q")
    assert more.code == 2 and "--repeat auto:20 (the run has --repeat auto:10)" in more.stderr, more.stderr
    fixed = cli(cwd, "run", "coin.yaml", "--resume", resume_id(auto), "--repeat", "10", "-q")
    assert fixed.code == 2 and "--repeat 10 (the run has --repeat auto:10)" in fixed.stderr, fixed.stderr
    (cwd / "interrupted").unlink()
    (cwd / "calls.log").unlink()
    three = cli(cwd, "run", "coin.yaml", "--repeat", "3", "--db", "fixed.db", "-q")
    assert three.code == 130, three.stderr
    refused = cli(cwd, "run", "coin.yaml", "--resume", resume_id(three), "--repeat", "auto", "--db", "fixed.db", "-q")
    assert refused.code == 2 and "--repeat auto cannot resume run" in refused.stderr, refused.stderr


def test_calibrated_beside_a_judge_in_gates_says_to_wrap_it(tmp_path: Path) -> None:
    """`- judge: {...}` with `calibrated:` beside it in `gates` is exit 2 with the wrapper to write; before, it said
    'a gate takes no threshold' and advised moving the judge to 'scorers', where 'calibrated' is itself refused."""
    (tmp_path / "d.yaml").write_text(textwrap.dedent("""
        gates:
          - judge: {criterion: The assistant gave a forecast., model: openai/judge-a}
            calibrated: {min_kappa: 0.6}
        data:
          - {transcript: [{role: user, content: hi}, {role: assistant, content: Sunny}]}
        """))
    result = cli(tmp_path, "validate", "d.yaml")
    assert result.code == 2, result.stdout + result.stderr
    assert "d.yaml:4:5: 'calibrated' cannot be written beside 'judge'" in result.stderr, result.stderr
    assert "its calibration bar goes in a wrapper around it" in result.stderr
    assert "takes no threshold" not in result.stderr and "under 'scorers:'" not in result.stderr
