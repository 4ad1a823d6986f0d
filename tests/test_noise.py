"""Comparisons that know the noise (docs/history.md) through the real CLI: stability under --repeat, and diff and
compare with their paired statistics over real runs stored in SQLite. The agent answers from answers.json,
which each test rewrites before each run: per input, one reply per play."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

AGENT = '''
import json, pathlib
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    """Answers from answers.json: the input's replies, one per play in turn (the last repeats)."""
    replies = json.loads((HERE / "answers.json").read_text())[input]
    counter = HERE / f"plays-{input}"
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    reply = replies[min(n, len(replies) - 1)]
    if reply == "boom":
        raise RuntimeError("the agent fell over")
    return reply

def number(run):
    """The number the reply ends with."""
    text = " ".join(m.get("content") or "" for m in run.output if m.get("role") == "assistant")
    return float(text.split()[-1])
'''

DATASET = """
target: answers:agent
gates:
  - includes: ok
scorers:
  - scorer: {python: "answers:number"}
    id: number
data:
"""

Runner = Callable[..., str]


@pytest.fixture
def play(workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> Runner:
    """``play({"c1": ["ok 1"], ...}, "--repeat", "3")``: write the dataset of those conversations (ids = inputs)
    and the agent's replies, run it, return the run id."""
    write("answers.py", AGENT)

    def _play(answers: dict[str, list[str]], *args: str) -> str:
        (workdir / "d.yaml").write_text(DATASET + "".join(f"  - {{id: {c}, input: {c}}}\n" for c in answers))
        (workdir / "answers.json").write_text(json.dumps(answers))
        for counter in workdir.glob("plays-*"):
            counter.unlink()
        done = cli("run", "d.yaml", "--json", "out.json", "-q", *args)
        assert done.code in (0, 1, 4), done.stderr
        return str(json.loads((workdir / "out.json").read_text())["run_id"])
    return _play


def test_each_repeated_conversation_is_stable_pass_flaky_or_stable_fail(
        play: Runner, cli: Callable[..., CliResult], workdir: Path) -> None:
    run_id = play({"steady": ["ok 1"], "wobbly": ["ok 1", "no 0", "ok 1"], "broken": ["no 0"]}, "--repeat", "3")
    out = json.loads((workdir / "out.json").read_text())
    assert out["summary"]["stability"] == {"stable-pass": 1, "flaky": 1, "stable-fail": 1}
    assert [(i["id"], i["stability"], i["plays_passed"], i["repeats"]) for i in out["items"]] == [
        ("steady", "stable-pass", 3, 3), ("wobbly", "flaky", 2, 3), ("broken", "stable-fail", 0, 3)]

    shown = cli("show", run_id)
    assert shown.code == 0, shown.stderr
    assert "stable-pass 3/3" in shown.stdout and "flaky 2/3" in shown.stdout and "stable-fail 0/3" in shown.stdout
    assert "stable-pass 1, flaky 1, stable-fail 1" in shown.stdout
    one = cli("show", run_id, "wobbly")
    assert one.code == 0 and "played 3 times: flaky (2 of 3 plays passed every gate)" in one.stdout
    assert cli("show", run_id, "wobbly", "--json", "-").json["item"]["stability"] == "flaky"
    again = cli("show", run_id, "--json", "-")
    assert again.json["summary"]["stability"] == out["summary"]["stability"]
    assert [i["stability"] for i in again.json["items"]] == ["stable-pass", "flaky", "stable-fail"]
    stored = sqlite3.connect(workdir / "evalcli.db").execute(
        "SELECT item_id, json_extract(outcomes, '$.plays') FROM items WHERE run_id = ? ORDER BY item_index",
        [run_id]).fetchall()
    assert stored == [("steady", "[3,3]"), ("wobbly", "[2,3]"), ("broken", "[0,3]")]

    for counter in workdir.glob("plays-*"):
        counter.unlink()
    table = cli("run", "d.yaml", "--repeat", "3", "--markdown", "summary.md")
    assert table.code == 1
    assert "wobbly" in table.stdout and "flaky 2/3" in table.stdout
    assert "**1** stable-pass, **1** flaky, **1** stable-fail" in (workdir / "summary.md").read_text()

    once = play({"steady": ["ok 1"]})
    single = json.loads((workdir / "out.json").read_text())
    assert "stability" not in single["summary"] and "stability" not in single["items"][0]
    assert "stable-pass" not in cli("show", once).stdout


TEN = [f"c{i}" for i in range(10)]


def _replies(failing: int) -> dict[str, list[str]]:
    """Ten conversations; the first ``failing`` of them answer 'no 0' (the gate and the scorer score 0)."""
    return {c: ["no 0"] if i < failing else ["ok 1"] for i, c in enumerate(TEN)}


def test_diff_with_alpha_exits_1_only_beyond_the_noise(play: Runner, cli: Callable[..., CliResult],
                                                       workdir: Path) -> None:
    base, one_lost, six_lost = play(_replies(0)), play(_replies(1)), play(_replies(6))

    # one conversation lost: today's rule says regression (exit 1) ...
    assert cli("diff", base, one_lost).code == 1
    # ... but b = 1, c = 0 is McNemar p = 2 * P(X <= 0 | 1) = 2 * 1/2 = 1; the gate's differences are one -1 and
    # nine 0: a resample is all zeros with (9/10)**10 = 35% > 2.5%, so the interval reaches 0: not significant
    noise = cli("diff", base, one_lost, "--alpha", "0.05", "--json", "-")
    assert noise.code == 0, noise.stderr
    stats = noise.json["statistics"]
    assert stats["pass_fail"] == {"n": 10, "passed_a": 10, "passed_b": 9, "b": 1, "c": 0, "p": 1.0, "change": -0.1}
    gate = next(f for f in stats["figures"] if f["role"] == "gate")
    # low: P(mean <= -0.3) = P(3+ of 10 draws are the -1) = 7.0% >= 2.5% > P(4+) = 1.3%: -0.3
    assert (gate["id"], gate["mean"], gate["low"], gate["high"], gate["p"]) == ("includes(ok)", -0.1, -0.3, 0.0, 1.0)
    assert noise.json["exit_code"] == 0 and noise.json["significant_regressions"] == []
    assert noise.json["regressions"] == ["scorer number: average 1 -> 0.9", "gate includes(ok): score 1 -> 0.9",
                                         "verdict: passed -> failed", "item c0: passed in A, fails in B"]
    assert "B is not significantly worse than A (alpha 0.05): exit 0" in noise.stderr
    assert "McNemar exact p = 1" in noise.stderr

    # six lost, none gained: McNemar p = 2 * (1/2)**6 = 2/64 = 0.03125 < 0.05.
    # The gate's differences: six -1, four 0, resampled 10 at a time (zeros drawn ~ Binomial(10, 0.4)):
    # P(mean = -1) = 0.6**10 = 0.6% < 2.5% <= P(mean <= -0.9) = 0.6% + 10 * 0.4 * 0.6**9 = 4.6%: low = -0.9;
    # P(mean >= -0.2) = P(8+ zeros) = 1.2% < 2.5% <= P(mean >= -0.3) = 5.5%: high = -0.3, wholly below 0.
    # Wilcoxon: ten values (<= 13) with ties, so the exact sign flips of the six -1: 2/64 = 0.03125.
    worse = cli("diff", base, six_lost, "--alpha", "0.05", "--detect", "0.05", "--json", "diff.json",
                "--markdown", "diff.md")
    assert worse.code == 1, worse.stdout + worse.stderr
    data = json.loads((workdir / "diff.json").read_text())["statistics"]
    assert data["pass_fail"]["p"] == pytest.approx(2 / 64)
    gate = data["figures"][0]
    assert (gate["role"], gate["mean"]) == ("gate", -0.6)
    assert (gate["low"], gate["high"], gate["p"]) == pytest.approx((-0.9, -0.3, 2 / 64))
    assert [f["id"] for f in data["figures"]] == ["includes(ok)", "number"]
    # detectable: spread = 6/10 changed; 2.80158 * sqrt(0.6 / 10) = 0.686; for 5 points
    # (2.80158 * sqrt(0.6) / 0.05)**2 = 43.402**2 = 1883.7, so 1884 conversations
    detectable = data["detectable"][0]
    assert detectable["smallest_detectable_change"] == pytest.approx(0.686, abs=5e-4)
    assert detectable["conversations_needed"] == 1884
    assert "significant regression pass/fail: 6 passed in A and fail in B, 0 the other way (McNemar p = 0.0312 < " \
           "0.05)" in worse.stdout
    assert "B is worse than A beyond the noise (alpha 0.05): exit 1" in worse.stdout
    assert "smallest detectable change (pass/fail): 68.6 points with 10 conversations" in worse.stdout
    assert "to detect 5.0 points: 1884 conversations" in worse.stdout
    markdown = (workdir / "diff.md").read_text()
    assert "| gate includes(ok) | 10 | 1.000 | 0.400 | -0.600 | [-0.900, -0.300] | 0.0312 |" in markdown
    assert "**B is worse than A beyond the noise (alpha 0.05): exit 1**" in markdown

    assert "significant regression gate includes(ok): B - A = -0.600, 95% interval [-0.900, -0.300] lies below 0 " \
        "(Wilcoxon p = 0.0312 < 0.05)" in worse.stdout
    # at alpha 0.01 neither is significant: McNemar's p is 0.031 > 0.01, and the gate's interval lies below 0 but
    # its Wilcoxon p (0.031) does not: an interval alone is no evidence
    strict = cli("diff", base, six_lost, "--alpha", "0.01")
    assert strict.code == 0, strict.stdout
    assert "significant regression" not in strict.stdout
    assert "B is not significantly worse than A (alpha 0.01): exit 0" in strict.stdout
    assert cli("diff", six_lost, base, "--alpha", "0.05").code == 0  # better, however significant

    for bad, words in ((["--alpha", "1.5"], "--alpha 1.5 must be between 0 and 1"),
                       (["--detect", "0"], "--detect 0.0 must be a change in pass rate above 0")):
        refused = cli("diff", base, six_lost, *bad)
        assert refused.code == 2 and words in refused.stderr and "Traceback" not in refused.stderr


def test_compare_prints_the_paired_statistics_and_exits_by_alpha(play: Runner, cli: Callable[..., CliResult],
                                                                 workdir: Path) -> None:
    base, one_lost, six_lost = play(_replies(0)), play(_replies(1)), play(_replies(6))
    plain = cli("compare", base, one_lost, six_lost, "--json", "-")
    assert plain.code == 0, plain.stderr  # without --alpha compare exits 0, as before
    statistics = plain.json["statistics"]
    assert [(s["a"], s["b"], s["pass_fail"]["b"], s["pass_fail"]["p"]) for s in statistics] == [
        (base, one_lost, 1, 1.0), (base, six_lost, 6, pytest.approx(2 / 64))]
    assert f"Paired statistics: answers:agent ({six_lost}) - answers:agent ({base})" in plain.stderr

    judged = cli("compare", base, one_lost, "--alpha", "0.05", "--html", "page.html", "--markdown", "c.md")
    assert judged.code == 0, judged.stdout
    assert "no later run is significantly worse than the first (alpha 0.05): exit 0" in judged.stdout
    worse = cli("compare", base, one_lost, six_lost, "--alpha", "0.05", "--html", "page.html", "--markdown", "c.md")
    assert worse.code == 1
    assert f"significant regression {six_lost} against {base}: pass/fail" in worse.stdout
    page = (workdir / "page.html").read_text()
    assert 'id="statistics"' in page and "McNemar exact p = 0.0312" in page and "[-0.900, -0.300]" in page
    assert "<script" not in page
    markdown = (workdir / "c.md").read_text()
    assert f"#### Paired statistics: answers:agent ({one_lost}) - answers:agent ({base})" in markdown
    assert "McNemar's exact p = 0.0312" in markdown


def test_repeated_runs_compare_each_conversations_pass_rate(play: Runner, cli: Callable[..., CliResult]) -> None:
    steady = {"c0": ["ok 1"], "c1": ["ok 1"], "c2": ["ok 1"]}
    base = play(steady, "--repeat", "3")
    later = play({"c0": ["ok 1", "no 0", "no 0"], "c1": ["no 0", "ok 1", "ok 1"], "c2": ["ok 1"]}, "--repeat", "3")
    done = cli("diff", base, later, "--json", "-")
    assert done.code == 1, done.stderr
    stats = done.json["statistics"]
    # pass/fail is stable-pass: c0 and c1 are flaky now: b = 2, c = 0, McNemar p = 2 * (1/2)**2 = 0.5
    assert (stats["pass_fail"]["b"], stats["pass_fail"]["c"], stats["pass_fail"]["p"]) == (2, 0, 0.5)
    # pass rates A = 1, 1, 1 and B = 1/3, 2/3, 1: differences -2/3, -1/3, 0, mean -1/3.
    # Bootstrap of 3 draws: all -2/3 has (1/3)**3 = 3.7% > 2.5%, so low = -2/3; all 0 likewise: high = 0.
    # Wilcoxon: the zero dropped, ranks 2 and 1 both negative; sign flips of two: 1/4 as low, doubled: 0.5
    rate = stats["pass_rate"]
    assert (rate["mean_a"], rate["n"]) == (1.0, 3)
    assert (rate["mean_b"], rate["mean"], rate["low"], rate["high"], rate["p"]) == pytest.approx(
        (2 / 3, -1 / 3, -2 / 3, 0.0, 0.5))
    # spread = (4/9 + 1/9 + 0) / 3 = 5/27; 2.80158 * sqrt(5/27 / 3) = 0.696 (above the floor 6 * (1/3) / 3 = 0.667)
    measures = {d["measure"]: d for d in stats["detectable"]}
    assert measures["pass rate"]["smallest_detectable_change"] == pytest.approx(0.696, abs=5e-4)
    assert "pass rate every gate, per play" in done.stderr
    assert "smallest detectable change (pass rate): 69.6 points with 3 conversations' pass rates" in done.stderr


def test_an_interval_below_zero_is_significant_only_with_wilcoxons_p(play: Runner, cli: Callable[..., CliResult]
                                                                     ) -> None:
    three = ["c0", "c1", "c2"]
    base, lost = play({c: ["ok 1"] for c in three}), play({c: ["no 0"] for c in three})
    # three pass -> fail: McNemar p = 2 * (1/2)**3 = 0.25; every difference is -1, so the bootstrap interval is the
    # one point [-1, -1], wholly below 0, while Wilcoxon's p is 2 * (1/2)**3 = 0.25: not evidence at 0.05
    done = cli("diff", base, lost, "--alpha", "0.05", "--json", "-")
    assert done.code == 0, done.stderr
    gate = next(f for f in done.json["statistics"]["figures"] if f["role"] == "gate")
    assert (gate["low"], gate["high"], gate["p"]) == (-1.0, -1.0, 0.25)
    assert done.json["statistics"]["pass_fail"]["p"] == 0.25
    assert done.json["significant_regressions"] == [] and done.json["exit_code"] == 0
    assert "B is not significantly worse than A (alpha 0.05): exit 0" in done.stderr
    compared = cli("compare", base, lost, "--alpha", "0.05")
    assert compared.code == 0 and "significant regression" not in compared.stdout, compared.stdout


@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_detectable_change_is_never_above_100_points(play: Runner, cli: Callable[..., CliResult],
                                                         count: int) -> None:
    conversations = [f"c{i}" for i in range(count)]
    base, lost = play({c: ["ok 1"] for c in conversations}), play({c: ["no 0"] for c in conversations})
    done = cli("diff", base, lost, "--json", "diff.json", "--markdown", "diff.md")
    shown = done.stdout + (done.cwd / "diff.md").read_text()
    assert "00.0 points with" not in shown  # 600.0, 300.0, 200.0 before
    # 6 / n is above 1 for n < 6; six conversations all moving (spread 1) detect 2.80 * sqrt(1/6) = 1.14 > 1 and
    # eight 2.80 * sqrt(1/8) = 0.99: eight are the fewest that could see a change at all
    words = (f"smallest detectable change (pass/fail): none with {count} conversation{'s' if count > 1 else ''}: too "
             "few to detect any change; 8 would detect a change of 100 points")
    assert words in done.stdout and words in shown.split("diff.md")[-1]
    detectable = json.loads((done.cwd / "diff.json").read_text())["statistics"]["detectable"][0]
    assert (detectable["smallest_detectable_change"], detectable["conversations_needed_for_any"]) == (None, 8)


def test_a_status_change_is_never_called_no_change(play: Runner, cli: Callable[..., CliResult]) -> None:
    four = ["c0", "c1", "c2", "c3"]
    errored = play({"c0": ["boom"], **{c: ["ok 1"] for c in four[1:]}})
    fixed = play({c: ["ok 1"] for c in four})
    done = cli("diff", errored, fixed, "--json", "-", "--markdown", "diff.md")
    shown = done.stderr + (done.cwd / "diff.md").read_text()
    assert "no gate or scorer changed" not in shown.lower(), shown
    assert "1 conversation errored in one run and not the other" in done.stderr
    assert done.json["statistics"]["status_changed"] == 1
    assert (done.json["statistics"]["pass_fail"]["b"], done.json["statistics"]["pass_fail"]["c"]) == (0, 1)
    row = next(line for line in done.stderr.splitlines() if line.startswith("│ c0"))
    assert [cell.strip() for cell in row.split("│")[1:4]] == ["c0", "error", "pass"], row
    compared = cli("compare", errored, fixed, "--html", "page.html")
    assert "no gate or scorer changed" not in compared.stdout.lower()
    assert "1 conversation errored in one run and not the other" in (done.cwd / "page.html").read_text()
    same = cli("diff", fixed, fixed)  # nothing changed: that may still be said
    assert "no gate or scorer changed on any of the 4 conversations" in same.stdout


SCALED = """
target: answers:agent
gates:
  - scorer: {python: "answers:number"}
    id: scaled
data:
  - {id: c0, input: c0}
"""


def test_a_repeated_conversation_passes_only_when_every_play_reached_every_gate(
        play: Runner, write: Callable[..., Path], cli: Callable[..., CliResult], workdir: Path) -> None:
    play({"c0": ["ok 1"]})  # writes the agent
    write("d.yaml", SCALED)
    (workdir / "answers.json").write_text(json.dumps({"c0": ["ok 2.0", "ok 0.5"]}))
    (workdir / "plays-c0").unlink()
    done = cli("run", "d.yaml", "--repeat", "2", "--concurrency", "1", "--json", "-")
    item = done.json["items"][0]
    gate = item["outcomes"]["gates"]["scaled"]
    assert gate["score"] == 1.25  # the mean of 2.0 and 0.5 is above 1, yet play 2 missed the gate
    assert (item["passed"], item["stability"], item["plays_passed"], gate["passed"]) == (False, "flaky", 1, False)
    assert (done.json["pass_at_k"], done.json["pass_all_k"]) == ({"scaled": 1.0}, {"scaled": 0.0})
    shown = cli("show", done.json["run_id"], "--json", "-").json
    assert shown["items"][0]["passed"] is False and shown["items"][0]["outcomes"]["gates"]["scaled"]["passed"] is False
    assert "flaky 1/2" in cli("show", done.json["run_id"]).stdout
    stored = sqlite3.connect(workdir / "evalcli.db").execute("SELECT passed FROM items WHERE run_id = ?",
                                                             [done.json["run_id"]]).fetchall()
    assert stored == [(0,)]
