"""The tests' CLI fork server (``tests/cli_server.py``) gives what a fresh ``python -m evalcli`` gives: the same exit
codes, stdout and stderr, the run's own working directory, environment and agents, and a kill on timeout."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.conftest import cli_base_env, cli_server, run_cli

DATASET = """
target: agents:echo
data:
  - {id: a, input: hello}
  - {id: b, input: bye}
scorers:
  - includes: hello
"""


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    client = cli_server()
    if client is None:
        pytest.skip("EVALCLI_TEST_FRESH=1: no fork server in this process")
    return client


@pytest.mark.parametrize("args", [
    ["--help"],
    ["run", "d.yaml", "--json", "-"],
    ["run", "d.yaml"],
    ["run", "missing.yaml"],
    ["validate", "bad.yaml"],
    ["nonsense-command"],
])
def test_a_forked_run_is_what_a_fresh_interpreter_gives(server, workdir: Path, args: list[str]) -> None:
    (workdir / "d.yaml").write_text(DATASET)
    (workdir / "bad.yaml").write_text("target: agents:echo\ndata:\n  - {id: a, inputs: 3}\n")
    assert server.can_run({**cli_base_env(), "X": "1"}, str(workdir))
    def stored_in(db: str) -> list[str]:
        return [*args, "--db", db] if args[0] == "run" else args
    forked = run_cli(stored_in("forked.db"), workdir)
    fresh = run_cli(stored_in("fresh.db"), workdir, fresh=True)
    assert forked.code == fresh.code
    assert _same(forked.stdout) == _same(fresh.stdout)
    assert _same(forked.stderr) == _same(fresh.stderr)
    assert forked.code in (0, 1, 2)


def _same(text: str) -> str:
    """A run's output with what differs between any two runs (run ids, times) taken out."""
    text = re.sub(r'"(run_id|started_at|finished_at|duration_ms|latency_ms|created_at)": [^,}\n]+', r'"\1": _',
                  text)
    uuid = r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    text = re.sub(uuid + r"|\b[0-9A-Z]{26}\b|\b[0-9a-f]{8,}\b|\d+(\.\d+)?\s?m?s\b", "_", text)
    return text.replace("forked.db", "X.db").replace("fresh.db", "X.db")


def test_each_run_has_its_own_directory_environment_and_agents(server, tmp_path: Path) -> None:
    for name, word in (("one", "first"), ("two", "second")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "agents.py").write_text(textwrap.dedent(f"""
            import os
            def echo(input, **kw):
                return "{word} " + os.environ.get("ONLY_HERE", "unset") + " " + os.getcwd()
        """))
        (folder / "d.yaml").write_text("target: agents:echo\nscorers: [{includes: x}]\ndata:\n  - {id: a, input: hi}\n")
    one = run_cli(["run", "d.yaml", "--json", "-"], tmp_path / "one", env={"ONLY_HERE": "set"})
    two = run_cli(["run", "d.yaml", "--json", "-"], tmp_path / "two")
    assert one.code == two.code == 0, one.stderr + two.stderr
    assert one.json["items"][0]["turns"][0]["output"][0]["content"] == f"first set {tmp_path / 'one'}"
    assert two.json["items"][0]["turns"][0]["output"][0]["content"] == f"second unset {tmp_path / 'two'}"
    assert (tmp_path / "one" / "evalcli.db").exists() and (tmp_path / "two" / "evalcli.db").exists()


def test_a_run_past_its_timeout_is_killed_and_reported_as_subprocess_does(server, tmp_path: Path) -> None:
    (tmp_path / "agents.py").write_text("import time\ndef slow(input, **kw):\n    time.sleep(60)\n    return 'x'\n")
    (tmp_path / "d.yaml").write_text("target: agents:slow\nscorers: [{includes: x}]\ndata:\n  - {id: a, input: hi}\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(["run", "d.yaml"], tmp_path, timeout=3)
    after = run_cli(["--help"], tmp_path)  # the server still serves
    assert after.code == 0 and "run" in after.stdout


def test_an_environment_read_at_import_gets_a_fresh_interpreter(server, tmp_path: Path) -> None:
    env, here = cli_base_env(), str(tmp_path)
    assert server.can_run(env, here)
    assert not server.can_run({**env, "PYTHONHASHSEED": "3"}, here)
    assert not server.can_run({**env, "LC_ALL": "C"}, here)
    assert not server.can_run({**env, "PYTHONPATH": f"/elsewhere:{env['PYTHONPATH']}"}, here)
    assert not server.can_run({**env, "EVALCLI_TEST_FRESH": "1"}, here)
    without = dict(env)
    without.pop("PYTHONPATH")
    assert not server.can_run(without, here)


def test_a_folder_with_a_module_named_like_one_imported_ahead_gets_a_fresh_interpreter(server, tmp_path: Path) -> None:
    assert "yaml" in server.ahead and "rich" in server.ahead
    assert server.can_run(cli_base_env(), str(tmp_path))
    (tmp_path / "yaml.py").write_text("raise SystemExit('the local yaml.py')\n")
    assert not server.can_run(cli_base_env(), str(tmp_path))
    (tmp_path / "d.yaml").write_text(DATASET)
    shadowed = run_cli(["run", "d.yaml"], tmp_path)  # what python -m evalcli does here: the local yaml.py
    assert "the local yaml.py" in shadowed.stderr and shadowed.code == 1


def test_a_forked_run_has_not_imported_what_evalcli_imports_only_when_needed(server, tmp_path: Path) -> None:
    (tmp_path / "agents.py").write_text(
        "import sys\ndef probe(input, **kw):\n"
        "    return ' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(input.split())))\n")
    heavy = "litellm scipy pydantic_ai langgraph langchain_core openai llama_cpp playwright numpy"
    (tmp_path / "d.yaml").write_text("target: agents:probe\nscorers: [{includes: x}]\n"
                                     f"data:\n  - {{id: a, input: {heavy}}}\n")
    done = run_cli(["run", "d.yaml", "--json", "-"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.json["items"][0]["turns"][0]["output"][0]["content"] == ""


def test_the_frameworks_server_forks_framework_runs_and_leaves_a_local_agents_module_to_a_fresh_interpreter(
        tmp_path: Path) -> None:
    frameworks = cli_server("frameworks")
    if frameworks is None:
        pytest.skip("EVALCLI_TEST_FRESH=1: no fork server in this process")
    assert {"agents", "pydantic_ai", "langgraph", "langchain_openai"} <= frameworks.ahead
    assert not {"litellm", "scipy", "llama_cpp", "playwright"} & frameworks.ahead
    assert not {"agents", "pydantic_ai", "langgraph"} & cli_server("base").ahead  # type: ignore[union-attr]
    env = {**cli_base_env(), "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9"}
    assert frameworks.can_run(env, str(tmp_path))
    assert not frameworks.can_run({**env, "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1"}, str(tmp_path))
    (tmp_path / "agents.py").write_text("def echo(input, **kw):\n    return input\n")  # the SDK's name
    assert not frameworks.can_run(env, str(tmp_path))
    (tmp_path / "app.py").write_text(textwrap.dedent("""
        from pydantic_ai import Agent
        from pydantic_ai.models.test import TestModel
        agent = Agent(TestModel(custom_output_text="from the test model"))
    """))
    (tmp_path / "d.yaml").write_text("target: app:agent\nscorers: [{includes: test model}]\n"
                                     "data:\n  - {id: a, input: hi}\n")
    (tmp_path / "agents.py").unlink()
    code, out, err = frameworks.run(["run", "d.yaml", "--json", "-"], str(tmp_path), env, 120)
    fresh = run_cli(["run", "d.yaml", "--json", "-", "--db", "fresh.db"], tmp_path, env=env, fresh=True)
    assert (code, fresh.code) == (0, 0), err + fresh.stderr
    assert _same(out) == _same(fresh.stdout).replace("fresh.db", "evalcli.db")
