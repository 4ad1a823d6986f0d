"""Datasets as pytest tests (docs/pytest.md), continued: pytest-xdist, the plugin's options, and its entry point.

Real pytest in a subprocess on small projects written by the tests; an LLM judge is the loopback server.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
import tomllib
import uuid
from collections import Counter
from pathlib import Path

from tests.llm_server import LLMServer, verdict
from tests.pytest_project import GOOD, PLUGIN, REPO, WEATHER, XDIST, calls, pytest_env, run_pytest, write_project

PROJECT = {
    "pytest.ini": "[pytest]\nevalcli_datasets = datasets/*.yaml\n",
    "datasets/weather.yaml": WEATHER,
    "datasets/good.yaml": GOOD,
    "tests/test_unit.py": "import pytest\n\n@pytest.mark.parametrize('n', range(6))\ndef test_unit(n):\n    assert n != 4\n",
}


def test_xdist_plays_each_conversation_once_with_the_same_outcomes(tmp_path: Path) -> None:
    write_project(tmp_path, PROJECT)
    alone = run_pytest(tmp_path, "--junitxml=junit.xml")
    assert alone.code == 1, alone.out
    expected = alone.junit()
    once = Counter(calls(tmp_path))
    assert set(once.values()) == {1} and len(once) == 7  # 4 + 2 conversations, one of them of two turns
    assert len(expected) == 5 + 3 + 6  # conversations and verdicts, then the unit tests
    for dist in ("loadfile", "load"):
        testrun = f"evalcli-test-{uuid.uuid4().hex}"
        spread = run_pytest(tmp_path, "-n", "2", "--dist", dist, "--testrunuid", testrun, "--junitxml=junit.xml",
                            plugins=[*PLUGIN, *XDIST])
        assert spread.code == 1, spread.out
        assert spread.junit() == expected, dist
        assert Counter(calls(tmp_path)) == once, dist  # every conversation played once, by one of the workers
        runs = spread.runs()[-2:]
        assert sorted(r["dataset_path"] for r in runs) == ["datasets/good.yaml", "datasets/weather.yaml"]
        assert sorted(r["verdict"] for r in runs) == ["failed", "passed"]
        assert "datasets/weather.yaml: run" in spread.out and "datasets/good.yaml: run" in spread.out  # the summary
        assert not (Path(tempfile.gettempdir()) / "evalcli-pytest" / testrun).exists()  # the workers' locks, removed
    assert len(spread.runs()) == 6


def test_db_and_html_options(tmp_path: Path) -> None:
    write_project(tmp_path, PROJECT)
    (tmp_path / "out").mkdir()
    result = run_pytest(tmp_path, "datasets", "--evalcli-db", "out/runs.db", "--evalcli-html", "reports/report.html")
    assert result.code == 1, result.out
    assert not (tmp_path / "evalcli.db").exists()
    runs = result.runs("out/runs.db")
    assert sorted(r["dataset_path"] for r in runs) == ["datasets/good.yaml", "datasets/weather.yaml"]
    for run in runs:
        page = (tmp_path / "reports" / f"report.{Path(run['dataset_path']).stem}.html").read_text()
        assert run["id"] in page and page.startswith("<!doctype html>")
    assert "evalcli show" in result.out and "--db out/runs.db" in result.out
    one = run_pytest(tmp_path, "datasets/good.yaml", "--evalcli-db", "out/runs.db", "--evalcli-html", "one.html")
    assert one.code == 0 and (tmp_path / "one.html").is_file()
    missing = run_pytest(tmp_path, "datasets/good.yaml", "--evalcli-db", "nowhere/runs.db")
    assert missing.code == 4 and "--evalcli-db nowhere/runs.db: the folder" in missing.out
    assert not (tmp_path / "nowhere").exists()


def test_no_cache_asks_the_judge_again(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: verdict(True, "It answered.")
    judged = """
        target: agent:weather
        gates: [{includes: sunny}]
        scorers:
          - scorer: answered
            threshold: 1
        data:
          - {id: rome, input: 'Weather in Rome?'}
        """
    write_project(tmp_path, {
        "a.yaml": judged,
        "b.yaml": judged,
        "scorers.yaml": f"""
            scorers:
              answered:
                multi_turn_judge:
                  model: openai/judge-model
                  api_base: {llm_server.url}
                  criterion: The assistant answered.
            """,
    })
    env = pytest_env(OPENAI_API_KEY="sk-test-not-a-real-key-0123456789", EVALCLI_LLM_RETRIES="1")
    cached = run_pytest(tmp_path, "a.yaml", "b.yaml", env=env)
    assert cached.code == 0, cached.out
    assert len(llm_server.requests) == 1  # b's conversation is a's: its verdict came from the cache
    uncached = run_pytest(tmp_path, "a.yaml", "b.yaml", "--evalcli-no-cache", env=env)
    assert uncached.code == 0 and len(llm_server.requests) == 3
    assert [r["cache_hits"] for r in uncached.runs()] == [0, 1, 0, 0]


def test_entry_point_is_declared_and_registers_the_plugin(tmp_path: Path) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"]["pytest11"]
    assert declared == {"evalcli": "evalcli.pytest_plugin"}
    assert any(dep.startswith("pytest-xdist") for dep in project["optional-dependencies"]["dev"])
    env = pytest_env()
    del env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]  # pytest loads its plugins from the installed entry points
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    if points.get("evalcli") != declared["evalcli"]:
        # the installed evalcli predates the entry point: the same declaration, as an installed distribution's
        site = tmp_path / "site"
        info = site / "evalcli_entry_point-0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evalcli-entry-point\nVersion: 0\n")
        (info / "entry_points.txt").write_text("[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
        env["PYTHONPATH"] = f"{REPO}{os.pathsep}{site}"
    write_project(tmp_path, {"good.yaml": GOOD})
    installed = run_pytest(tmp_path, "good.yaml", "--junitxml=junit.xml", plugins=[], env=env)
    assert installed.code == 0, installed.out
    assert list(installed.junit()) == ["good.yaml::rome", "good.yaml::oslo", "good.yaml::verdict"]
    by_name = run_pytest(tmp_path, "good.yaml", plugins=["-p", "evalcli"], env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert by_name.code == 0 and "3 passed" in by_name.out, by_name.out  # -p NAME loads an entry point by its name
    disabled = run_pytest(tmp_path, "good.yaml", plugins=["-p", "no:evalcli"], env=env)
    assert disabled.code == 4 and "ERROR: not found:" in disabled.out, disabled.out  # -p no:evalcli: no plugin
