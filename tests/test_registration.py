"""Registration is decided by configuration, not by id; a run that writes an HTML report (whose chart across runs
reads the registered scores only) names the unregistered gates and scorers in one line, and `evalcli validate` lists
them with lines that parse when pasted; the shipped datasets register what they use."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import closed_port

REGISTRY = "scorers:\n  has-hello: {includes: hello}\n"


def test_an_inline_id_that_shadows_a_registered_scorer_is_a_validation_error(write: Callable[..., Path],
                                                                             cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:scripted
        scorers: [has-hello]
        data:
          - turns:
              - input: say hello
                scorers:
                  - scorer: {excludes: hello}
                    id: has-hello
    """)
    result = cli("run", "d.yaml")
    assert result.code == 2, result.stderr
    assert "d.yaml:8:13: id 'has-hello' is registered in scorers.yaml as {includes: hello}: this {excludes: hello} " \
           "would be stored and compared under the same id" in result.stderr
    assert not (result.cwd / "evalcli.db").exists()


def test_a_renamed_registered_scorer_and_another_configuration_cannot_share_an_id(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:scripted
        scorers: [{scorer: has-hello, id: greeting}]
        data:
          - turns:
              - input: say hello
                scorers: [{scorer: {includes: bye}, id: greeting}]
    """)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and "d.yaml:6:19: id 'greeting' names the registered scorer {includes: hello}" in result.stderr


def test_the_same_configuration_under_a_registered_id_is_that_registered_scorer(write: Callable[..., Path],
                                                                                cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:scripted
        scorers: [has-hello]
        data:
          - turns:
              - input: say hello
                scorers: [{scorer: {includes: hello}, id: has-hello}]
    """)
    result = cli("run", "d.yaml")
    assert result.code == 0 and "not registered" not in result.stderr, result.stderr
    with result.db() as conn:
        rows = conn.execute("SELECT scorer_id, turn_index FROM scores ORDER BY turn_index").fetchall()
    assert [tuple(r) for r in rows] == [("has-hello", None), ("has-hello", 0)]


def test_unregistered_scorers_are_one_line_of_every_run_and_validate_gives_lines_that_register_them(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:scripted
        gates: [{includes: '54'}]
        scorers:
          - has-hello
          - {scorer: {matches: 'said: \\d+'}, id: said-number}
          - judge: {criterion: "The agent said: hello, then stopped.", model: openai/x}
        data:
          - turns:
              - input: "say 54 => hello 54"
                scorers: [{includes: "it's"}]
    """)
    env = {"OPENAI_API_KEY": "sk-test-0123456789abcdef", "EVALCLI_LLM_RETRIES": "0"}
    plain = cli("run", "d.yaml", env=env)
    result = cli("run", "d.yaml", "--html", "r.html", env=env)
    warnings = [line for line in result.stderr.splitlines() if "not registered" in line]
    assert warnings == [line for line in plain.stderr.splitlines() if "not registered" in line]  # once, every run
    assert warnings == ["warning: includes(54), said-number, judge(The agent said: hello, then stopped.), includes(it's) "
                        "of d.yaml: not registered in scorers.yaml, so the 'scores' table has no rows for them and the "
                        "HTML report's chart across runs leaves them out (the run keeps the scores: show, diff, compare "
                        "and the report's tables have them); 'evalcli validate d.yaml' prints the lines that register "
                        "them"], result.stderr
    listed = cli("validate", "d.yaml")
    assert listed.code == 0, listed.stderr
    lines = [line.strip() for line in listed.stdout.splitlines()[2:]]
    assert len(lines) == 4
    pasted = REGISTRY + "".join(f"  {line}\n" for line in lines)
    assert set(yaml.safe_load(pasted)["scorers"]) == {"has-hello", "includes(54)", "said-number",
                                                     "judge(The agent said: hello, then stopped.)", "includes(it's)"}
    (workdir / "scorers.yaml").write_text(pasted)
    again = cli("run", "d.yaml", "--html", "r.html", env=env)
    assert "not registered" not in again.stderr, again.stderr
    assert "Not in this chart" not in (workdir / "r.html").read_text()
    assert "not registered" not in cli("validate", "d.yaml").stdout


@pytest.mark.parametrize(("framework", "module"), [("pydantic_ai", "pydantic_ai"), ("openai_agents", "agents"),
                                                  ("langgraph", "langgraph")])
def test_the_shipped_framework_datasets_register_what_they_use(framework: str, module: str, tmp_path: Path) -> None:
    """Their runs warn of nothing unregistered (the model is a closed loopback port: every conversation errors at
    once, which is not what this checks), and validate lists nothing to register."""
    if importlib.util.find_spec(module) is None:  # looked up, not imported: the runs import it in their own process
        pytest.skip(f"{module} is not installed")
    dataset = f"datasets/frameworks/{framework}.yaml"
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "OPENAI_API_KEY": "sk-test-0123456789abcdef",
           "EVALCLI_LLM_RETRIES": "0"}
    ran = run_cli(["run", dataset, "--db", str(tmp_path / "f.db")], REPO, env)
    assert ran.code == 4, ran.stderr  # every conversation errored: the run did start and warn what it warns
    assert "not registered" not in ran.stderr, ran.stderr
    result = run_cli(["validate", dataset, "datasets/weather.yaml", "datasets/simulated.yaml"], REPO)
    assert result.code == 0, result.stderr
    assert "not registered" not in result.stdout + result.stderr
