"""Datasets as pytest tests (docs/pytest.md): real pytest in a subprocess on small projects written by the tests.

One item per conversation plus ``::verdict``; tags as markers; deselected conversations never played; the selected
ones played once, together, as one stored run; failure texts with the missed gates and the transcript; an invalid
dataset as one collection error while the rest runs; ``--junitxml``, ``-x``, ``--lf``, Ctrl-C; and nothing at all
for a test suite that collects no dataset.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.pytest_project import GOOD, REPO, WEATHER, calls, pytest_env, run_pytest, start_pytest, write_project
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

W = "datasets.weather.yaml"


def test_each_conversation_is_an_item_failing_with_its_gates_and_transcript(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/weather.yaml": WEATHER})
    result = run_pytest(tmp_path, "datasets/weather.yaml", "--junitxml=junit.xml")
    assert result.code == 1, result.out
    cases = result.junit()
    assert list(cases) == [f"{W}::brooklyn-now", f"{W}::paris", f"{W}::london-two-days", f"{W}::boom", f"{W}::verdict"]
    assert cases[f"{W}::brooklyn-now"] == ("passed", "")
    assert cases[f"{W}::paris"] == ("failure", "conversation paris: gate includes(sunny) scored 0: 'sunny' not found "
                                               "in \"i do not know.\"")
    assert cases[f"{W}::london-two-days"][1].startswith("conversation london-two-days: turn 1 gate includes(London) "
                                                        "scored 0")
    assert cases[f"{W}::boom"] == ("failure", "conversation boom errored: turn 0: the target raised ValueError: kaboom "
                                              "from the agent")
    assert cases[f"{W}::verdict"] == ("failure", "verdict failed on 3 of 4 conversations; 1 errored: "
                                                 "gate includes(sunny) 0.667, includes(Brooklyn) 0.333 "
                                                 "(>= 0.5), turn 1 gate includes(London) 0")
    [run] = result.runs()
    assert (run["status"], run["verdict"], run["total_items"]) == ("completed", "failed", 4)
    assert f"evalcli show {run['id']} paris" in result.out
    assert "Traceback" in result.out and "kaboom from the agent" in result.out  # the errored conversation's
    assert "FAILED datasets/weather.yaml::paris - conversation paris: gate includes(sunny)" in result.out
    # the transcript is the one `evalcli show` prints (rules aside: they are as wide as the terminal)
    show = subprocess.run([sys.executable, "-m", "evalcli", "show", "latest", "paris"], cwd=tmp_path, text=True,
                          capture_output=True, env=pytest_env(), timeout=SUBPROCESS_TIMEOUT)
    assert show.returncode == 0, show.stderr
    lines = [line.rstrip() for line in show.stdout.splitlines() if line.strip() and "─" not in line]
    assert "User: What is the weather in Paris?" in lines and "Assistant: I do not know." in lines
    failure = result.out[result.out.index("conversation paris: gate"):]
    assert all(line in failure.splitlines() for line in lines), (lines, failure)
    assert "turn gate includes(London)  0  FAIL" in result.out
    # the verdict's failure shows the run's gates and thresholds as `evalcli run` ends
    verdict = result.out[result.out.index("verdict failed on 3 of 4 conversations; 1 errored for datasets/weather.yaml"):]
    assert "includes(sunny) │ 0.667 │ FAIL" in verdict and "FAIL includes(London)=0 (failed by london-two-days)" in verdict
    assert re.search(rf"datasets/weather.yaml: run {run['id']}, verdict failed on 3 of 4 conversations; 1 errored "
                     r"\(4 conversations: 2 failed, 1 errored\)", result.out)


def test_the_summary_line_carries_the_verdicts_one_label(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/good.yaml": GOOD + "  - {id: boom, input: boom}\n"})
    result = run_pytest(tmp_path, "datasets/good.yaml", "-rA")
    assert result.code == 1, result.out  # the conversation that errored fails; the verdict item passes
    [run] = result.runs()
    # old main: "verdict passed, 3 conversations (0 failed, 1 errored)": a plain "passed" where 1 of 3 errored
    assert (f"datasets/good.yaml: run {run['id']}, verdict passed on 2 of 3 conversations; 1 errored "
            "(3 conversations: 0 failed, 1 errored)") in result.out
    assert "PASSED datasets/good.yaml::verdict" in result.out



def test_a_failure_points_at_the_line_its_conversation_starts_on(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/weather.yaml": WEATHER})
    result = run_pytest(tmp_path, "datasets/weather.yaml", "--tb=line")
    assert result.code == 1, result.out
    lines = (tmp_path / "datasets/weather.yaml").read_text().splitlines()
    for item in ("paris", "london-two-days", "boom"):
        line = lines.index(f"  - id: {item}") + 1
        assert re.search(rf"datasets/weather\.yaml:{line}: conversation {item}", result.out), (item, line, result.out)
    assert re.search(r"datasets/weather\.yaml:1: verdict failed", result.out)  # the verdict has no line of its own

def test_deselected_conversations_are_not_played(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/weather.yaml": WEATHER})
    smoke = run_pytest(tmp_path, "datasets/weather.yaml", "-m", "smoke", "--strict-markers", "--junitxml=junit.xml")
    assert smoke.code == 0, smoke.out
    assert list(smoke.junit()) == [f"{W}::brooklyn-now"]  # the verdict has no tag: -m leaves it out
    assert calls(tmp_path) == ["What is the weather in Brooklyn?"]
    keyword = run_pytest(tmp_path, "datasets/weather.yaml", "-k", "not boom and not paris", "--junitxml=junit.xml")
    assert list(keyword.junit()) == [f"{W}::brooklyn-now", f"{W}::london-two-days", f"{W}::verdict"]
    assert sorted(calls(tmp_path)) == ["And tomorrow in Tokyo?", "Weather in London?", "What is the weather in Brooklyn?"]
    tags = run_pytest(tmp_path, "datasets/weather.yaml", "-k", "smoke", "--junitxml=junit.xml")
    assert list(tags.junit()) == [f"{W}::brooklyn-now"]  # -k matches tags too
    calls(tmp_path)
    ids = run_pytest(tmp_path, "datasets/weather.yaml::paris", "datasets/weather.yaml::boom", "--junitxml=junit.xml")
    assert list(ids.junit()) == [f"{W}::paris", f"{W}::boom"] and ids.code == 1
    assert sorted(calls(tmp_path)) == ["What is the weather in Paris?", "boom"]
    runs = ids.runs()
    assert [len(ids.items(r["id"])) for r in runs] == [1, 2, 1, 2]  # each an ordinary run of what was selected
    assert ids.items(runs[-1]["id"]) == ["paris", "boom"]


def test_tags_named_like_markers_that_take_arguments_are_keywords_only(tmp_path: Path) -> None:
    write_project(tmp_path, {
        "conftest.py": "def pytest_configure(config):\n"
                       "    config.addinivalue_line('markers', 'timeout(seconds): a marker of some plugin')\n",
        "tagged.yaml": """
            target: agent:weather
            gates: [{includes: sunny}]
            data:
              - {id: a, tags: [skip, timeout, slow], input: 'Weather in Rome?'}
              - {id: b, input: 'Weather in Oslo?'}
            """,
    })
    slow = run_pytest(tmp_path, "tagged.yaml", "--strict-markers", "-m", "slow", "--junitxml=junit.xml")
    assert slow.code == 0 and slow.junit() == {"tagged.yaml::a": ("passed", "")}  # not skipped by its tag 'skip'
    assert run_pytest(tmp_path, "tagged.yaml", "-m", "skip or timeout").code == 5  # no such marker on it
    keyword = run_pytest(tmp_path, "tagged.yaml", "-k", "skip and timeout", "--junitxml=junit.xml")
    assert keyword.code == 0 and list(keyword.junit()) == ["tagged.yaml::a"]


def test_the_verdict_alone_is_the_verdict_of_every_conversation(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/weather.yaml": WEATHER})
    result = run_pytest(tmp_path, "datasets/weather.yaml::verdict", "--junitxml=junit.xml")
    assert result.code == 1 and list(result.junit()) == [f"{W}::verdict"]
    assert len(calls(tmp_path)) == 5  # four conversations, one of two turns
    assert result.items(result.runs()[0]["id"]) == ["brooklyn-now", "paris", "london-two-days", "boom"]


def test_a_missed_threshold_fails_the_verdict_only_with_evalcli_strict(tmp_path: Path) -> None:
    write_project(tmp_path, {"scored.yaml": """
        target: agent:weather
        gates: [{includes: sunny}]
        scorers:
          - scorer: {includes: Brooklyn}
            threshold: 0.9
        data:
          - {id: rome, input: 'Weather in Rome?'}
          - {id: brooklyn, input: 'Weather in Brooklyn?'}
        """})
    lenient = run_pytest(tmp_path, "scored.yaml", "--junitxml=junit.xml")
    assert lenient.code == 0, lenient.out
    assert set(lenient.junit().values()) == {("passed", "")}
    strict = run_pytest(tmp_path, "scored.yaml", "--evalcli-strict", "--junitxml=junit.xml")
    assert strict.code == 1
    assert strict.junit()["scored.yaml::verdict"] == ("failure", "verdict scored: includes(Brooklyn) 0.5 (>= 0.9)")
    assert "a scorer's mean missed its threshold (--evalcli-strict)" in strict.out
    assert [(r["verdict"], r["exit_code"]) for r in strict.runs()] == [("scored", 0), ("scored", 3)]


def test_a_conversation_whose_gates_were_all_not_scorable_is_skipped(tmp_path: Path) -> None:
    write_project(tmp_path, {"cities.yaml": """
        target: agent:weather
        gates: [{python: "agent:needs_city"}]
        data:
          - {id: with-city, input: 'Weather in Rome?', ground_truth: {city: Rome}}
          - {id: without, input: 'Weather in Oslo?'}
        """})
    result = run_pytest(tmp_path, "cities.yaml", "-rs", "--junitxml=junit.xml")
    assert result.code == 0, result.out
    cases = result.junit()
    assert cases["cities.yaml::with-city"] == ("passed", "")
    assert cases["cities.yaml::without"][0] == "skipped"
    assert "no gate was scorable on conversation without: no city in the ground truth" in result.out


def test_an_invalid_dataset_is_one_collection_error_and_the_rest_runs(tmp_path: Path) -> None:
    write_project(tmp_path, {
        "pytest.ini": "[pytest]\nevalcli_datasets = datasets/*.yaml\n",
        "datasets/good.yaml": GOOD,
        "datasets/bad.yaml": """
            target: agent:weather
            gates:
              - includez: sunny
            data:
              - {id: a, inputz: [hello]}
            """,
        "datasets/clash.yaml": "target: agent:weather\ngates: [{includes: x}]\ndata:\n  - {id: verdict, input: hi}\n",
        "datasets/scorers.yaml": "scorers:\n  sunny: {includes: sunny}\n",  # a registry, not a dataset
        "config/settings.yaml": "not: a dataset\n",
        "tests/test_unit.py": "def test_unit():\n    assert True\n",
    })
    result = run_pytest(tmp_path, "--junitxml=junit.xml")
    assert result.code == 1, result.out
    assert "ERROR collecting datasets/bad.yaml" in result.out
    assert "datasets/bad.yaml:3:5: unknown scorer kind 'includez' (did you mean 'includes'?)" in result.out
    assert "datasets/bad.yaml:5:13: unknown key 'inputz' in item 0" in result.out
    assert "datasets/clash.yaml: item 0 has the id 'verdict'" in result.out
    cases = result.junit()
    assert cases["::datasets.bad.yaml"] == ("error", "collection failure")
    assert cases["::datasets.clash.yaml"][0] == "error"
    passed = sorted(name for name, (outcome, _) in cases.items() if outcome == "passed")
    assert passed == ["datasets.good.yaml::oslo", "datasets.good.yaml::rome", "datasets.good.yaml::verdict",
                      "tests.test_unit::test_unit"]
    assert "2 errors" in result.out and "4 passed" in result.out
    # any other collection error keeps pytest's own behaviour: nothing runs
    (tmp_path / "tests" / "test_broken.py").write_text("def broken(:\n")
    broken = run_pytest(tmp_path)
    assert broken.code == 2 and "Interrupted: 3 errors during collection" in broken.out
    assert sorted(calls(tmp_path)) == ["Weather in Oslo?", "Weather in Rome?"]  # the first run's only


def test_an_unrelated_test_suite_is_unaffected(tmp_path: Path) -> None:
    write_project(tmp_path, {
        "tests/test_unit.py": "def test_unit():\n    assert True\n",
        "tests/data/looks_like.yaml": GOOD,
        "datasets/weather.yaml": WEATHER,
        "conftest.py": """
            import json, sys

            def pytest_sessionfinish(session):
                heavy = ["litellm", "rich", "pydantic", "yaml", "sqlite_utils", "evalcli.dataset", "evalcli.run",
                         "evalcli.scorers", "asyncio"]
                with open("modules.json", "w") as f:
                    json.dump(sorted(m for m in heavy if m in sys.modules), f)
            """,
    })
    result = run_pytest(tmp_path, "--junitxml=junit.xml")
    assert result.code == 0, result.out
    assert list(result.junit()) == ["tests.test_unit::test_unit"]
    assert (tmp_path / "modules.json").read_text() == "[]"
    assert not (tmp_path / "evalcli.db").exists() and "evalcli" not in result.out
    assert run_pytest(tmp_path, "tests/data").code == 5  # a folder of YAML files is not a dataset named
    # evalcli's own suite: its YAML files are data, never collected
    own = run_pytest(REPO, "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "tests/data",
                     "tests/test_layout.py")
    assert own.code == 0 and ".yaml" not in own.out and "tests/test_layout.py::test_no_module_over_500_lines" in own.out


def test_datasets_outside_the_testpaths_are_collected_by_a_bare_pytest(tmp_path: Path) -> None:
    write_project(tmp_path, {
        "pytest.ini": "[pytest]\ntestpaths = tests\nevalcli_datasets =\n    evals/*.yaml\n    evals/*.yml\n",
        "tests/test_unit.py": "def test_unit():\n    assert True\n",
        "evals/good.yaml": GOOD,
    })
    bare = run_pytest(tmp_path, "--junitxml=junit.xml")
    assert bare.code == 0, bare.out
    assert sorted(bare.junit()) == ["evals.good.yaml::oslo", "evals.good.yaml::rome", "evals.good.yaml::verdict",
                                    "tests.test_unit::test_unit"]
    assert f"PytestConfigWarning: evalcli_datasets: 'evals/*.yml' matches no file under {tmp_path}" in bare.out
    named = run_pytest(tmp_path, "tests", "--junitxml=junit.xml")
    assert list(named.junit()) == ["tests.test_unit::test_unit"]


@pytest.mark.timing
def test_selected_conversations_run_once_together_at_the_datasets_concurrency(tmp_path: Path) -> None:
    data = "\n".join(f"  - {{id: c{n}, input: 'Weather in City{n}?'}}" for n in range(8))
    write_project(tmp_path, {"slow.yaml": f"target: agent:weather\nconcurrency: 4\ngates: [{{includes: sunny}}]\n"
                                          f"data:\n{data}\n"})
    result = run_pytest(tmp_path, "slow.yaml", env=pytest_env(AGENT_SECONDS="1"))
    assert result.code == 0, result.out
    assert sorted(calls(tmp_path)) == sorted(f"Weather in City{n}?" for n in range(8))
    [run] = result.runs()
    seconds = (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()
    assert 1.9 <= seconds < 3.5, seconds  # 8 conversations of 1 s, 4 at a time; one at a time would be 8 s


def test_lf_reruns_the_failed_conversations_only(tmp_path: Path) -> None:
    write_project(tmp_path, {"datasets/weather.yaml": WEATHER})
    first = run_pytest(tmp_path, "datasets/weather.yaml")
    assert first.code == 1
    calls(tmp_path)
    again = run_pytest(tmp_path, "datasets/weather.yaml", "--lf", "--junitxml=junit.xml")
    assert again.code == 1
    assert list(again.junit()) == [f"{W}::paris", f"{W}::london-two-days", f"{W}::boom", f"{W}::verdict"]
    assert "What is the weather in Brooklyn?" not in calls(tmp_path)
    assert again.items(again.runs()[-1]["id"]) == ["paris", "london-two-days", "boom"]


def test_x_stops_at_the_first_failure_and_later_datasets_are_not_played(tmp_path: Path) -> None:
    write_project(tmp_path, {"a.yaml": WEATHER, "b.yaml": GOOD})
    result = run_pytest(tmp_path, "-x", "a.yaml", "b.yaml")
    assert result.code == 1 and "stopping after 1 failures" in result.out
    assert "Weather in Rome?" not in calls(tmp_path)
    assert [r["dataset_path"] for r in result.runs()] == ["a.yaml"]


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stores_the_run_as_interrupted(tmp_path: Path) -> None:
    data = "\n".join(f"  - {{id: c{n}, input: 'Weather in City{n}?'}}" for n in range(12))
    write_project(tmp_path, {"slow.yaml": f"target: agent:weather\nconcurrency: 2\ngates: [{{includes: sunny}}]\n"
                                          f"data:\n{data}\n"})
    proc = start_pytest(tmp_path, "slow.yaml", env=pytest_env(AGENT_SECONDS="0.5"))
    log = tmp_path / "calls.txt"
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    [run] = query_runs(tmp_path)
    assert run["status"] == "interrupted" and 3 <= run["completed_items"] < 12
    assert f"is stored as interrupted after {run['completed_items']} of 12 conversations" in out
    assert f"evalcli run slow.yaml --resume {run['id']}" in out


def query_runs(folder: Path) -> list[dict[str, object]]:
    from tests.pytest_project import query

    return query(folder / "evalcli.db", "SELECT * FROM runs ORDER BY id")
