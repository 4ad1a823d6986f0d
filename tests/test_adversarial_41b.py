"""Issue 41 tried again as users would (docs/scorers.md#thresholds-compare-with-a-tolerance,
docs/history.md#comparing-runs): float noise is no change in ``diff`` or its statistics, ``diff`` says the one
verdict label, and shards played ``--repeat k`` merge into what one unsharded run says."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evalcli.store.diff import _dropped
from evalcli.store.stats import differences
from evalcli.thresholds import same
from tests.conftest import CliResult

SCORE_FROM_FILE = '''
from pathlib import Path

def agent(input, **kw):
    if input in Path("errors.txt").read_text().split():
        raise RuntimeError("boom " + input)
    return "yes " + input

def score(run):
    """What score.txt says, evaluated: 1.0 in one run, 1 - 1e-10 in the next (float noise)."""
    return float(eval(Path("score.txt").read_text()))
'''

NOISE = """
target: noisy:agent
gates:
  - scorer: {python: "noisy:score"}
    id: g
scorers:
  - scorer: {python: "noisy:score"}
    id: q
data:
""" + "".join(f"  - input: item{n}\n" for n in range(12))


def _run(cli: Callable[..., CliResult], *args: str) -> str:
    done = cli("run", "d.yaml", "--json", "-", *args)
    assert done.code in (0, 1, 4), done.stderr
    return str(done.json["run_id"])


def test_float_noise_is_no_regression_and_no_significant_change(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("noisy.py", SCORE_FROM_FILE)
    write("errors.txt", "")
    write("d.yaml", NOISE)
    write("score.txt", "0.1 * 7 * 10 / 7")  # 1.0000000000000002
    first = _run(cli)
    write("score.txt", "1 - 1e-10")  # reaches 1 by the one threshold rule: every gate passes in both runs
    second = _run(cli)
    diffed = cli("diff", first, second, "--json", "-")
    assert diffed.code == 0, diffed.stdout
    assert diffed.json["regressions"] == []
    assert not any(change["regressed"] for item in diffed.json["items"] for change in item["scores"])
    shown = cli("diff", first, second)
    assert "regression" not in shown.stdout and "12 unchanged conversations not shown" in shown.stdout, shown.stdout
    significant = cli("diff", first, second, "--alpha", "0.05", "--json", "-")
    assert significant.code == 0, significant.stdout
    assert significant.json["significant_regressions"] == []
    figures = significant.json["statistics"]["figures"]
    assert [(f["id"], f["changed"], f["p"]) for f in figures] == [("g", 0, 1.0), ("q", 0, 1.0)]
    compared = cli("compare", first, second, "--alpha", "0.05")
    assert compared.code == 0 and "no later run is significantly worse" in compared.stdout, compared.stdout
    write("score.txt", "0.9")  # a real drop is still one
    third = _run(cli)
    dropped = cli("diff", first, third, "--json", "-")
    assert dropped.code == 1 and "scorer q: average 1 -> 0.9" in dropped.json["regressions"], dropped.stdout


def test_diff_says_what_a_verdict_covers_when_conversations_errored(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("noisy.py", SCORE_FROM_FILE)
    write("score.txt", "1")
    write("d.yaml", NOISE)
    write("errors.txt", "item3")
    first = _run(cli)
    write("errors.txt", "")
    second = _run(cli)
    shown = cli("diff", first, second)
    assert "verdict: passed on 11 of 12 conversations; 1 errored -> passed" in shown.stdout, shown.stdout
    markdown = cli("diff", first, second, "--markdown", "-")
    assert "verdict: passed on 11 of 12 conversations; 1 errored -> passed" in markdown.stdout, markdown.stdout


FLAKY = '''
CALLS = {}

def agent(input, **kw):
    """The first call of each input fails, later ones pass ("steady" always passes): a flaky conversation whatever
    the order plays run in, the same in every process."""
    CALLS[input] = CALLS.get(input, 0) + 1
    return "yes" if input == "steady" or CALLS[input] > 1 else "no"
'''

REPEATED = """
target: flaky:agent
gates: [{includes: "yes"}]
data:
  - {id: a, input: steady}
  - {id: b, input: one}
  - {id: c, input: two}
  - {id: d, input: three}
"""


def test_merged_repeat_shards_keep_pass_at_k_as_one_unsharded_run(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("flaky.py", FLAKY)
    write("d.yaml", REPEATED)
    whole = cli("run", "d.yaml", "--repeat", "3", "--json", "-", "--db", "whole.db")
    assert whole.code == 1, whole.stderr
    for shard in ("1/2", "2/2"):
        done = cli("run", "d.yaml", "--repeat", "3", "--shard", shard, "--db", f"shard{shard[0]}.db")
        assert done.code in (0, 1), done.stderr
    merged = cli("merge", "shard1.db", "shard2.db", "--out", "merged.db")
    assert merged.code == 1, merged.stderr
    assert "pass@k (a gate passed in at least one of the --repeat plays): includes(yes)=1" in merged.stdout
    assert "pass^k (a gate passed in all of the --repeat plays): includes(yes)=0.25" in merged.stdout
    shown = cli("show", "latest", "--db", "merged.db", "--json", "-")
    expected = {key: whole.json[key] for key in ("repeat", "pass_at_k", "pass_all_k")}
    assert expected == {"repeat": 3, "pass_at_k": {"includes(yes)": 1.0}, "pass_all_k": {"includes(yes)": 0.25}}
    assert {key: shown.json.get(key) for key in expected} == expected, shown.stdout


@given(st.floats(-1e3, 1e3), st.floats(-0.9e-9, 0.9e-9), st.floats(0, 1))
def test_scores_within_the_tolerance_are_one_score(a: float, noise: float, tolerance: float) -> None:
    b = a + noise
    assert same(a, b) and differences([a], [b]) == [0.0]
    assert not _dropped(a, b, 0.0) and not _dropped(a, b - tolerance, tolerance)
    assert _dropped(a, b - tolerance - 3e-9, tolerance)  # beyond the tolerance it is a drop


def test_report_baseline_reads_float_noise_as_unchanged_and_says_the_verdict_label(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("noisy.py", SCORE_FROM_FILE)
    write("d.yaml", NOISE)
    write("errors.txt", "item3")
    write("score.txt", "1")
    first = _run(cli)
    write("errors.txt", "")
    write("score.txt", "1 + 2e-10")
    second = _run(cli)
    done = cli("report", second, "--baseline", first, "--html", "r.html")
    assert done.code == 0, done.stderr
    page = " ".join(re.sub(r"<[^>]+>", " ", (done.cwd / "r.html").read_text()).split())
    assert "1 improved" in page and "11 unchanged conversations" in page, page  # item3: errored -> passed
    assert "verdict passed on 11 of 12 conversations; 1 errored &rarr; this run passed" in page, page
