"""A resume after a custom scorer's module changed says so, naming its file, as for the target's module
(docs/identity.md "The resolved configuration"): the real CLI, a run left errored and resumed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import run_cli

AGENT = '''
def agent(input, **kw):
    if input == "boom":
        raise RuntimeError("boom")
    return "hello " + input
'''

SCORER = '''
def polite(run):
    return 1.0
'''

DATASET = """
target: agent:agent
gates:
  - includes: hello
scorers:
  - python: my_scorers:polite
data:
  - {id: a, input: hi}
  - {id: b, input: boom}
"""


def test_a_resume_after_a_custom_scorers_code_changed_says_so_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "my_scorers.py").write_text(SCORER)
    (tmp_path / "d.yaml").write_text(DATASET)
    first = run_cli(["run", "d.yaml", "--quiet"], tmp_path)
    assert first.code == 4, first.stdout + first.stderr
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    run_id, options = conn.execute("SELECT id, options FROM runs").fetchone()
    assert any(path.startswith("code.my_scorers:polite.source") for path in json.loads(options)["config"])
    same = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)
    assert same.code == 4 and "code changed" not in same.stderr, same.stdout + same.stderr
    (tmp_path / "my_scorers.py").write_text(SCORER.replace("1.0", "0.5"))
    resumed = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)  # before: resumed without a word
    assert resumed.code == 4, resumed.stdout + resumed.stderr
    assert (f"the custom scorers' (or setup's) code changed since run {run_id} started: "
            "code.my_scorers:polite.source (changed: the content of my_scorers.py)") in resumed.stderr, resumed.stderr
    # with the target's file edited too, both are named in one warning
    (tmp_path / "agent.py").write_text(AGENT.replace('"boom"', '"never"'))
    both = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)
    assert both.code == 0, both.stdout + both.stderr
    assert "the target's and the custom scorers' (or setup's) code changed" in both.stderr, both.stderr
    assert "target.source (changed: the content of agent.py)" in both.stderr


def test_a_run_stored_without_the_code_resumes_without_a_word_of_it(tmp_path: Path) -> None:
    """A run stored before evalcli kept the custom scorers' files has no ``code.`` paths: nothing to compare."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "my_scorers.py").write_text(SCORER)
    (tmp_path / "d.yaml").write_text(DATASET)
    assert run_cli(["run", "d.yaml", "--quiet"], tmp_path).code == 4
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    run_id, options = conn.execute("SELECT id, options FROM runs").fetchone()
    stored = json.loads(options)
    stored["config"] = {k: v for k, v in stored["config"].items() if not k.startswith("code.")}
    conn.execute("UPDATE runs SET options = ? WHERE id = ?", (json.dumps(stored), run_id))
    conn.commit()
    (tmp_path / "my_scorers.py").write_text(SCORER.replace("1.0", "0.5"))
    resumed = run_cli(["run", "d.yaml", "--resume", run_id], tmp_path)
    assert resumed.code == 4 and "changed" not in resumed.stderr, resumed.stdout + resumed.stderr
