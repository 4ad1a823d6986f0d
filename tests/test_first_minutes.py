"""What a new user trips over in the first ten minutes, each through the real CLI."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

WEATHER = str(REPO / "datasets/weather.yaml")


def _without_local_model(tmp_path: Path) -> dict[str, str]:
    """An environment in which the embedded model's packages cannot be imported (a plain install)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['cyllama'] = None\n")
    return {"PYTHONPATH": f"{site}{os.pathsep}{REPO}"}


@pytest.mark.timing
def test_the_demo_without_the_local_model_fails_fast_with_the_fix(tmp_path: Path) -> None:
    env = _without_local_model(tmp_path)
    started = time.monotonic()
    result = run_cli(["run", WEATHER, "--db", str(tmp_path / "x.db"), "--json", "-"], REPO, env=env)
    wall = time.monotonic() - started
    assert result.code == 4, result.stderr
    errors = {item["error"] for item in result.json["items"]}
    assert len(errors) == 1
    (error,) = errors
    assert "pip install 'evalcli[local]'" in error and "EVALCLI_JUDGE_MODEL" in error and "\n" not in error
    assert wall < 15, f"retried for {wall:.1f} s"
    calls = sqlite3.connect(tmp_path / "x.db").execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    assert calls == 0  # nothing was retried: the model was never called

    checked = run_cli(["validate", WEATHER], REPO, env=env)
    assert checked.code == 0
    assert "warning:" in checked.stderr and "pip install 'evalcli[local]'" in checked.stderr


def test_a_provider_model_without_its_key_fails_fast_and_validate_warns(tmp_path: Path) -> None:
    env = {"EVALCLI_JUDGE_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": ""}
    checked = run_cli(["validate", WEATHER], REPO, env=env)
    assert checked.code == 0 and "OPENAI_API_KEY" in checked.stderr
    result = run_cli(["run", WEATHER, "--db", str(tmp_path / "x.db"), "--json", "-"], REPO, env=env)
    assert result.code == 4
    assert all("needs the environment variable OPENAI_API_KEY" in item["error"] for item in result.json["items"])


SMALL = "target: agents:echo\nscorers: [{includes: said}]\ndata: [{id: a, input: q}, {id: b, input: r}]\n"


@pytest.mark.parametrize("args", [["--filter", "nothing-matches-this"], ["--limit", "0"]])
def test_selecting_no_conversation_is_exit_2_and_stores_nothing(args: list[str], workdir: Path,
                                                                write: Callable[..., Path],
                                                                cli: Callable[..., CliResult]) -> None:
    write("d.yaml", SMALL)
    result = cli("run", "d.yaml", *args)
    assert result.code == 2
    assert ("matches no conversation" in result.stderr) or ("--limit 0" in result.stderr)
    assert not (workdir / "evalcli.db").exists() or not sqlite3.connect(workdir / "evalcli.db").execute(
        "SELECT COUNT(*) FROM runs").fetchone()[0]


def test_an_empty_shard_is_exit_0_with_a_note(workdir: Path, write: Callable[..., Path],
                                              cli: Callable[..., CliResult]) -> None:
    write("d.yaml", SMALL)
    empty = next(n for n in range(1, 9) if cli("run", "d.yaml", "--shard", f"{n}/8", "--db", f"s{n}.db").stderr
                 .count("holds no conversation"))
    result = cli("run", "d.yaml", "--shard", f"{empty}/8", "--db", "e.db")
    assert result.code == 0
    assert f"shard {empty}/8 of d.yaml holds no conversation" in result.stderr


def test_diff_names_missing_conversations_and_refuses_other_datasets(workdir: Path, write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    write("d.yaml", SMALL)
    write("other.yaml", SMALL)
    full = cli("run", "d.yaml", "--json", "-").json["run_id"]
    part = cli("run", "d.yaml", "--filter", "^a$", "--json", "-").json["run_id"]
    other = cli("run", "other.yaml", "--json", "-").json["run_id"]
    missing = cli("diff", full, part)
    assert missing.code == 1
    assert "item b: in A, missing from B" in missing.stdout
    refused = cli("diff", full, other)
    assert refused.code == 2 and "not runs of one dataset" in refused.stderr
    assert cli("diff", full, other, "--allow-different").code == 0


SIX_MISTAKES = """\
target: agents:echo
concurrency: four
scorrers: [{includes: a}]
scorers: [{includes: a}]
data:
  - {id: one, input: q, tags: ok}
  - {id: one, input: "${EVALCLI_TEST_UNSET_VARIABLE}"}
  - {id: three, inputs: []}
"""


def test_validation_reports_every_mistake_of_every_file_at_once(write: Callable[..., Path],
                                                                cli: Callable[..., CliResult]) -> None:
    write("d.yaml", SIX_MISTAKES)
    write("scorers.yaml", "scorers:\n  good: {includes: a}\n  bad: {includs: b}\n")
    write("e.yaml", "target: agents:echo\nscorers: [good, {excludes: {valeu: x}}]\ndata: [{input: q}]\n")
    result = cli("validate", "d.yaml", "e.yaml")
    assert result.code == 2
    expected = ["d.yaml:2:14: dataset: 'concurrency'",        # wrong type
                "d.yaml:3:1: unknown key 'scorrers'",          # a typo
                "d.yaml:6:31: item 0: 'tags'",                 # a bad item
                "d.yaml:7:22: environment variable EVALCLI_TEST_UNSET_VARIABLE is not set",
                "d.yaml:7:10: item 1: id 'one' is already used by item 0",
                "d.yaml:8:25: item 2 (three): 'inputs' must be a non-empty array",
                "scorers.yaml:3:9: unknown scorer kind 'includs'",
                "e.yaml:2:29: unknown key 'valeu' in excludes"]
    for fragment in expected:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert result.stderr.count("unknown scorer kind 'includs'") == 1  # a shared registry's mistake, once


MEMORIES = '''
class Agent:
    def __init__(self, memory):
        self.memory = memory
    def generate(self, input, *, memory=None, **kw):
        return "said " + input

empty_dict = Agent({})
none = Agent(None)
false = Agent(False)

def plain(input, **kw):
    return "said " + input
'''


@pytest.mark.parametrize(("target", "warns"), [("empty_dict", False), ("none", True), ("false", True),
                                               ("plain", True)])
def test_the_memory_warning_follows_the_memory_attribute(target: str, warns: bool, write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    write("mem.py", MEMORIES)
    write("d.yaml", f"target: mem:{target}\nscorers: [{{includes: said}}]\ndata: [{{inputs: [a, b]}}]\n")
    result = cli("run", "d.yaml")
    assert ("can recall the earlier ones" in result.stderr) is warns
    quiet = cli("run", "d.yaml", "-q")
    assert "warning" not in quiet.stderr and "verdict:" in quiet.stdout


def test_run_ids_prefixes_latest_and_missing_folders(workdir: Path, write: Callable[..., Path],
                                                     cli: Callable[..., CliResult]) -> None:
    write("d.yaml", SMALL)
    ids = [cli("run", "d.yaml", "--json", "-").json["run_id"] for _ in range(2)]
    common = next(ids[0][:n] for n in range(len(ids[0]), 0, -1) if ids[1].startswith(ids[0][:n]))
    ambiguous = cli("show", common)
    assert ambiguous.code == 2 and "ambiguous" in ambiguous.stderr and all(i in ambiguous.stderr for i in ids)
    latest = cli("show", "latest", "--json", "-")
    assert latest.code == 0 and latest.json["run_id"] == ids[1]
    assert cli("diff", ids[0], "latest").code == 0
    assert cli("run", "d.yaml", "--rerun-failed", "latest").code == 0
    nowhere = cli("run", "d.yaml", "--db", "no/such/folder/x.db")
    assert nowhere.code == 2 and "does not exist" in nowhere.stderr
    assert not (workdir / "no").exists()
    write("other.yaml", SMALL)
    resumed = cli("run", "other.yaml", "--resume", ids[0])
    assert resumed.code == 2 and "d.yaml" in resumed.stderr and "other.yaml" in resumed.stderr


def test_a_dataset_is_the_same_however_its_path_is_typed(workdir: Path, write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    items = "\n".join(f"  - {{id: item{n}, input: q{n}}}" for n in range(12))
    path = write("shop.yaml", f"target: agents:echo\nscorers: [{{includes: said}}]\ndata:\n{items}\n")
    first = cli("run", "shop.yaml", "--shard", "1/2", "--db", "s1.db")
    second = cli("run", str(path), "--shard", "2/2", "--db", "s2.db")
    assert {first.code, second.code} <= {0}, first.stderr + second.stderr
    merged = cli("merge", "s1.db", "s2.db", "--out", "all.db")
    assert merged.code == 0, merged.stderr
    run = cli("run", "shop.yaml", "--limit", "1", "--json", "-").json["run_id"]
    assert cli("run", str(path), "--resume", run).code == 0


def test_help_and_wording(workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    assert cli("--version").stdout.startswith("evalcli ")
    top = cli("-h")
    assert top.code == 0 and "..." not in top.stdout.split("Commands:")[1].replace("DATASET...", "")
    for command in ("run", "validate", "show", "diff", "merge", "runs"):
        text = cli(command, "-h").stdout
        assert "<list" not in text and "<str>" not in text and "<path>" not in text.lower() and "{" not in text, text
    assert "default: no limit" in cli("run", "-h").stdout.replace("\n", " ").replace("  ", " ").replace("  ", " ")
    assert cli("run", "x.yaml", "-q", "-v").code == 2
    (workdir / "folder").mkdir()
    directory = cli("run", "folder")
    assert directory.code == 2 and "is a directory" in directory.stderr
    write("empty.yaml", "")
    empty = cli("validate", "empty.yaml")
    assert empty.code == 2 and "the file is empty" in empty.stderr
    write("one.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata: [{id: a, input: q}]\n")
    valid = cli("validate", "one.yaml")
    assert "1 item," in valid.stdout and "1 items" not in valid.stdout
    ns = "def na(run):\n    from evalcli import not_scorable\n    return not_scorable('nothing to say')\n"
    write("nsc.py", ns)
    write("n.yaml", "target: agents:echo\nscorers: [{python: 'nsc:na'}, {includes: said}]\ndata: [{input: q}]\n")
    legend = cli("run", "n.yaml")
    assert "n/s" in legend.stdout and "n/s = not scorable" in legend.stdout


def test_the_docs_registry_example_points_at_a_module_that_exists() -> None:
    page = (REPO / "docs" / "scorers.md").read_text()
    assert "python: examples.scorers:tone" in page
    from evalcli import ScorerRun
    from examples.scorers import tone

    assert tone(ScorerRun("q", [{"role": "assistant", "content": "Sure, here it is."}])).score == 1.0  # type: ignore[union-attr]


def test_an_interrupted_run_stores_how_many_conversations_finished(tmp_path: Path) -> None:
    import signal

    from tests.reliability_helpers import cli_env, query, start_cli, wait_for_lines, write_project

    agent = """
import os, time
def generate(input, **kw):
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(input + "\\n")
    time.sleep(0.05 if input.startswith("fast") else 30)
    return "answer"
"""
    items = "\n".join([f"  - {{id: f{n}, input: fast{n}}}" for n in range(3)] + ["  - {id: slow, input: slow}"])
    write_project(tmp_path, agent=agent, dataset=f"target: agent:generate\nconcurrency: 1\ngates: [{{includes: answer}}]\n"
                  f"data:\n{items}\n")
    calls = tmp_path / "calls.txt"
    process = start_cli(["run", "ds.yaml"], tmp_path, env=cli_env(CALLS_FILE=str(calls)))
    wait_for_lines(calls, 4)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130
    rows = query(tmp_path / "evalcli.db", "SELECT status, total_items, completed_items FROM runs")
    assert rows == [("interrupted", 3, 3)]

