"""Sequential repeats and the pass rate (docs/verdicts.md#sequential-repeats) through the real CLI: targets that pass
always, never, or half the time with a seed; the plays each conversation needed are counted by the target itself
and checked against the Wilson rule replayed on the same seeded outcomes."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.passrate import passes_at_rate, settle
from tests.conftest import CliResult

AGENT = '''
import pathlib, random
HERE = pathlib.Path(__file__).parent

def outcome(kind, seed, play):
    """Whether the conversation passes on this play: always, never, or half the time from a seeded generator."""
    if kind == "always":
        return True
    if kind == "never":
        return False
    return random.Random(f"{seed}-{play}").random() < 0.5

def agent(input, **kw):
    kind, seed = input.split()
    counter = HERE / f"plays-{kind}-{seed}"
    play = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(play + 1))
    return "ok" if outcome(kind, int(seed), play) else "no"
'''


def outcome(kind: str, seed: int, play: int) -> bool:
    """The agent's rule, replayed."""
    if kind == "always":
        return True
    if kind == "never":
        return False
    return random.Random(f"{seed}-{play}").random() < 0.5


def expected(kind: str, seed: int, pass_rate: float, most: int) -> tuple[int, int, str]:
    """(plays, passed, stability) the Wilson rule reaches on this conversation's outcomes."""
    passed = 0
    for plays in range(1, most + 1):
        passed += outcome(kind, seed, plays - 1)
        decided = settle(passed, plays, pass_rate, most)
        if decided is not None:
            return plays, passed, decided
    raise AssertionError("settle decides at MAX")


CONVERSATIONS = [("always", 0), ("never", 0), *(("half", seed) for seed in range(6))]


@pytest.fixture
def suite(workdir: Path, write: Callable[..., Path]) -> Callable[[], dict[str, int]]:
    """Write the agent and the dataset; return a reader of how often the agent played each conversation."""
    write("coin.py", AGENT)
    write("d.yaml", "target: coin:agent\ngates: [{includes: ok}]\ndata:\n"
          + "".join(f"  - {{id: {k}-{s}, input: '{k} {s}'}}\n" for k, s in CONVERSATIONS))

    def played() -> dict[str, int]:
        counts = {p.name.removeprefix("plays-"): int(p.read_text()) for p in workdir.glob("plays-*")}
        for path in workdir.glob("plays-*"):
            path.unlink()
        return counts
    return played


@pytest.mark.parametrize(("args", "pass_rate", "most"), [
    (["--repeat", "auto"], 1.0, 10), (["--repeat", "auto:10", "--pass-rate", "0.5"], 0.5, 10),
    (["--repeat", "auto:6", "--pass-rate", "0.8"], 0.8, 6)])
def test_auto_plays_each_conversation_until_the_wilson_rule_settles_it(
        suite: Callable[[], dict[str, int]], cli: Callable[..., CliResult], args: list[str], pass_rate: float,
        most: int) -> None:
    done = cli("run", "d.yaml", "--json", "-", *args)
    assert done.code in (0, 1), done.stderr
    played = suite()
    items = {i["id"]: i for i in done.json["items"]}
    for kind, seed in CONVERSATIONS:
        plays, passed, stability = expected(kind, seed, pass_rate, most)
        item = items[f"{kind}-{seed}"]
        assert played[f"{kind}-{seed}"] == plays  # the target was called exactly as often as the rule asked
        assert (item["repeats"], item["plays_passed"], item["stability"]) == (plays, passed, stability), item["id"]
        assert item["passed"] == passes_at_rate(passed, plays, pass_rate)
    assert done.json["repeat"] == most and done.json["repeat_auto"] is True and done.json["pass_rate"] == pass_rate
    assert done.json["plays"] == sum(played.values())
    verdict_passed = all(i["passed"] for i in done.json["items"])
    assert done.json["verdict"] == ("passed" if verdict_passed else "failed")
    assert done.code == (0 if verdict_passed else 1)


def test_the_default_pass_rate_settles_at_the_first_failure_and_the_table_shows_the_plays(
        suite: Callable[[], dict[str, int]], cli: Callable[..., CliResult]) -> None:
    done = cli("run", "d.yaml", "--repeat", "auto")
    assert done.code == 1, done.stderr
    played = suite()
    assert played["always-0"] == 10 and played["never-0"] == 1
    assert "stable-pass 10/10" in done.stdout and "stable-fail 0/1" in done.stdout
    plays = sum(played.values())
    assert ("stability as --repeat auto:10 settled it (Wilson 95% interval against pass rate 1): stable-pass 1, "
            f"flaky 0, stable-fail 7   plays: {plays} (at most 80)") in done.stdout
    shown = cli("show", "latest", "--json", "-").json
    assert {i["id"]: i["stability"] for i in shown["items"]}["never-0"] == "stable-fail"
    assert shown["summary"]["stability"]["stable-pass"] == 1


def test_the_pass_rate_is_the_gate_rule_of_fixed_repeats_too(workdir: Path, write: Callable[..., Path],
                                                             cli: Callable[..., CliResult]) -> None:
    write("coin.py", AGENT)
    seed = next(s for s in range(100) if sum(outcome("half", s, p) for p in range(4)) == 3)  # 3 of 4 plays pass
    write("d.yaml", f"target: coin:agent\ngates: [{{includes: ok}}]\ndata:\n  - {{id: c, input: 'half {seed}'}}\n")
    strict = cli("run", "d.yaml", "--repeat", "4", "--json", "-")
    assert strict.code == 1 and strict.json["verdict"] == "failed" and strict.json["items"][0]["passed"] is False
    assert strict.json["items"][0]["stability"] == "flaky"
    for counter in workdir.glob("plays-*"):
        counter.unlink()  # the same four plays again
    lenient = cli("run", "d.yaml", "--repeat", "4", "--pass-rate", "0.75", "--json", "-")
    assert lenient.code == 0, lenient.stderr
    assert lenient.json["verdict"] == "passed" and lenient.json["items"][0]["passed"] is True
    assert lenient.json["gate_results"][0]["passed"] is True and lenient.json["gate_results"][0]["score"] == 0.75
    assert lenient.json["items"][0]["stability"] == "flaky"  # stability still says what the plays did
    stored = cli("show", lenient.json["run_id"], "--json", "-").json
    assert stored["items"][0]["passed"] is True
    # diff reads each conversation's pass by the same rule: passed under 0.75, failed under 1.0
    compared = cli("diff", strict.json["run_id"], lenient.json["run_id"], "--json", "-")
    assert (compared.json["verdict_a"], compared.json["verdict_b"]) == ("failed", "passed")
    assert [(i["id"], i["passed_a"], i["passed_b"]) for i in compared.json["items"]] == [("c", False, True)]
    assert compared.json["statistics"]["pass_fail"]["c"] == 1  # McNemar's discordant count, by the same rule


def test_auto_cannot_resume_a_fixed_repeat_run(suite: Callable[[], dict[str, int]],
                                               cli: Callable[..., CliResult]) -> None:
    fixed = cli("run", "d.yaml", "--repeat", "3", "--json", "-")
    assert fixed.code == 1, fixed.stderr
    refused = cli("run", "d.yaml", "--resume", fixed.json["run_id"], "--repeat", "auto")
    assert refused.code == 2
    assert f"--repeat auto cannot resume run {fixed.json['run_id']}: it plays every conversation a fixed 3 times" \
        in refused.stderr
    assert "resume it as it was started" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--repeat", "auto:1"], "--repeat auto:1: not a maximum of 2 plays or more"),
    (["--repeat", "often"], "--repeat often: not a number of plays"),
    (["--repeat", "0"], "--repeat 0: not a number of plays"),
    (["--repeat", "\u00b2"], "--repeat \u00b2: not a number of plays"),  # isdigit(), but int() refuses it: exit 70
    (["--repeat", "auto:\u0663"], "--repeat auto:\u0663: not a maximum of 2 plays or more"),  # an Arabic-Indic 3
    (["--shard", "\u0661/\u0662"], "--shard '\u0661/\u0662' is not I/N"),  # ran as shard 1/2
    (["--pass-rate", "0"], "--pass-rate 0.0: not a share of plays above 0 and at most 1"),
    (["--pass-rate", "1.5"], "--pass-rate 1.5: not a share of plays above 0 and at most 1")])
def test_bad_repeat_and_pass_rate_are_refused(suite: Callable[[], dict[str, int]], cli: Callable[..., CliResult],
                                              args: list[str], message: str) -> None:
    refused = cli("run", "d.yaml", *args)
    assert refused.code == 2 and message in refused.stderr, refused.stderr
