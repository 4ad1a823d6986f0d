"""CI conveniences: JUnit and Markdown reports, the GitHub step summary, --repeat, schema and init."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import jsonschema
import yaml

from tests.conftest import REPO, CliResult

DATASET = """
target: agents:scripted
gates: [{excludes: broken}]
scorers:
  - scorer: {includes: good}
    threshold: 0.9
data:
  - {id: fine, input: "q=>good answer"}
  - {id: broken-one, input: "q=>broken <&> answer"}
  - id: chat
    turns:
      - input: "q=>good"
        gates: [{includes: good}]
      - input: "q=>bad"
        gates: [{includes: good}]
  - {id: crash, input: boom}
"""

CRASHER = """
def scripted(input, **kw):
    if input == "boom":
        raise RuntimeError("target fell over")
    return input.split("=>", 1)[1].strip() if "=>" in input else input
"""


def test_junit_report_parses_with_cases_failures_and_errors(write: Callable[..., Path],
                                                           cli: Callable[..., CliResult]) -> None:
    write("agents2.py", CRASHER)
    write("d.yaml", DATASET.replace("agents:scripted", "agents2:scripted"))
    write("out/.keep", "")  # the folder must exist, as for --db
    result = cli("run", "d.yaml", "--junit", "out/junit.xml")
    assert result.code == 1
    root = ET.parse(result.cwd / "out/junit.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"fine", "broken-one", "chat", "chat / turn 0", "chat / turn 1", "crash",
                          "includes(good)"}
    assert cases["fine"].find("failure") is None and cases["fine"].find("error") is None
    failure = cases["broken-one"].find("failure")
    assert failure is not None and "gate excludes(broken): score 0" in (failure.get("message") or "")
    assert cases["chat / turn 1"].find("failure") is not None and cases["chat / turn 0"].find("failure") is None
    error = cases["crash"].find("error")
    assert error is not None and "target fell over" in (error.get("message") or "")
    assert "Traceback" in (error.text or "")
    assert cases["includes(good)"].get("classname") == "d.thresholds"
    threshold = cases["includes(good)"].find("failure")
    assert threshold is not None and "misses threshold >= 0.9" in (threshold.get("message") or "")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("7", "3", "1")
    assert root.get("tests") == "7"


def test_markdown_report_and_github_step_summary(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    summary = write("summary.md", "# earlier step\n")
    result = cli("run", "d.yaml", "--markdown", "report.md", env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = (result.cwd / "report.md").read_text()
    assert "evalcli `d.yaml`: **failed**" in text
    assert "| excludes(broken) | 0.75 | ❌ |" in text
    assert "`broken-one`: gate excludes(broken): score 0" in text
    assert "`chat`: turn 1 gate includes(good)" in text
    appended = summary.read_text()
    assert appended.startswith("# earlier step\n") and appended.endswith(text)


def test_repeat_reduces_by_mean_and_reports_pass_at_k(write: Callable[..., Path],
                                                      cli: Callable[..., CliResult]) -> None:
    write("flaky.py", "import itertools\n_n = itertools.count()\n"
                      "def flaky(input, **kw):\n    return 'yes' if next(_n) % 2 == 0 else 'no'\n")
    write("d.yaml", "target: flaky:flaky\ngates: [{includes: 'yes'}]\nscorers: [{includes: 'yes'}]\n"
                    "data: [{input: a}, {input: b}]\n")
    result = cli("run", "d.yaml", "--repeat", "2", "--concurrency", "1", "--json", "-")
    out = result.json
    assert out["scores"] == {"includes(yes)": 0.5}
    assert out["gate_results"] == [{"id": "includes(yes)", "passed": False, "score": 0.5}]
    assert [i["gate_scores"] for i in out["items"]] == [{"includes(yes)": 0.5}] * 2
    assert "pass@k" in result.stderr and "includes(yes)=1" in result.stderr
    assert result.code == 1


def test_schema_validates_the_shipped_datasets_and_rejects_typos(cli: Callable[..., CliResult]) -> None:
    result = cli("schema")
    schema = json.loads(result.stdout)
    for name in ("weather.yaml", "checks.yaml", "forgetful.yaml"):
        jsonschema.validate(yaml.safe_load((REPO / "datasets" / name).read_text()), schema)
    try:
        jsonschema.validate({"target": "a:b", "data": [{"inptu": "typo"}]}, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a typo in an item key should not validate")


def test_init_writes_a_starter_that_runs_and_passes(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    made = run_cli(["init"], cwd=tmp_path)
    assert made.code == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"eval.yaml", "scorers.yaml", "agent.py", "evalcli.schema.json"}
    result = run_cli(["run", "eval.yaml", "--json", "-"], cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.json["verdict"] == "passed"
    assert "warning" not in result.stderr  # the starter registers what it uses: a first run warns of nothing
    (tmp_path / "agent.py").write_text("# mine\n")
    (tmp_path / "evalcli.schema.json").unlink()
    again = run_cli(["init"], cwd=tmp_path)
    assert again.code == 0
    assert "kept agent.py" in again.stdout and "kept eval.yaml" in again.stdout
    assert "wrote evalcli.schema.json" in again.stdout
    assert (tmp_path / "agent.py").read_text() == "# mine\n" and (tmp_path / "evalcli.schema.json").is_file()


def test_junit_has_a_case_per_conversation_and_turn_and_none_for_met_thresholds(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    result = run_cli(["run", str(REPO / "datasets/scored.yaml"), str(REPO / "datasets/forgetful.yaml"), "--db",
                      str(tmp_path / "r.db"), "--junit", str(tmp_path / "j.xml")], cwd=REPO)
    assert result.code == 1
    # several datasets: one JUnit file each, named after the dataset
    assert not (tmp_path / "j.xml").exists()
    suites = [ET.parse(tmp_path / name).getroot().find("testsuite") for name in ("j.scored.xml", "j.forgetful.xml")]
    names = [[c.get("name") for c in s.findall("testcase")] for s in suites if s is not None]
    assert names == [["0", "1", "includes(sunny)"], ["london-two-days", "london-two-days / turn 0",
                                                     "london-two-days / turn 1"]]
