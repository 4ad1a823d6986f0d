"""Adversarial try 70: a newcomer's first hour, the README followed literally (a fresh clone, a clean environment:
``make demo``, ``evalcli init``, a first dataset of one's own agent) and the mistakes a newcomer makes, each error
read for what is wrong, where and what to do (exit 2, no traceback). The real CLI in subprocesses. Each test failed
on the main this branch started from.

- docs/datasets.md's "Validation" showed ``evalcli validate examples/invalid.yaml`` printing a hint it no longer
  prints, and three of the four mistakes it says the file has.
- A target defined only under ``if __name__ == "__main__":`` was "has no attribute ...; check the name after the
  colon" (the name was right); ``__main__:answer`` listed evalcli's own functions ("it defines: main").
- A ``data_file`` written relative to the current directory, not the dataset's folder, was "not found" with no word
  of where it was looked for.
- docs/targets/frameworks.md's offline command ran ``datasets/frameworks/*.yaml``, which holds datasets of extras the
  page's frameworks do not install (strands, google-adk): one target that does not import refuses the whole
  command, exit 2, nothing run.
- A target that needs an argument evalcli never passes (``def answer(input, history)``, ``generate(self, input, *,
  user_id)``) validated "ok", and the run then errored every conversation with the target's ``TypeError`` (exit 4).
- A judge whose provider's key is not set was "needs the environment variable OPENAI_API_KEY ..., which is not set",
  and no word of what to do.
- ``evalcli run eval.yml`` beside ``eval.yaml`` was "no such dataset file" with the hint of an example path;
  ``evalcli run my_agent.py`` (the agent named instead of its dataset) was "not valid YAML: expected '<document
  start>'".
- ``evalcli compare --help`` said ``--alpha`` exits 1 "when B is worse": compare has no B (its runs are compared with
  the first).
- A tab in the YAML was pyyaml's "found character '\\t' that cannot start any token" with "check the indentation
  and quoting on that line".
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

AGENT = '''
def answer(input: str) -> str:
    return "hello"
'''


def dataset(target: str = "agent:answer", data: str = "data:\n  - input: hi\n") -> str:
    return f"target: {target}\ngates: [{{excludes: error}}]\n{data}"


def refused(result: CliResult) -> str:
    """The error of a refused invocation: exit 2, no traceback, one ``error:`` with its hint."""
    assert result.code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "error:" in result.stderr and "hint:" in result.stderr
    return result.stderr


def test_the_validation_example_of_datasets_md_prints_what_the_page_shows() -> None:
    page = (REPO / "docs" / "datasets.md").read_text()
    block = page.split("$ evalcli validate examples/invalid.yaml\n", 1)[1].split("```", 1)[0]
    result = run_cli(["validate", "examples/invalid.yaml"], REPO)
    assert result.code == 2
    shown = result.stderr.splitlines()
    for line in block.splitlines():
        if line.endswith(", ..."):
            assert any(s.startswith(line.removesuffix("...")) for s in shown), line
        else:
            assert line in shown, (line, result.stderr)
    located = [s for s in shown if re.match(r"(error: )?examples/invalid\.yaml:\d+:\d+: ", s)]
    assert "(`examples/invalid.yaml` has four mistakes)" in page.replace("\n", " ") and len(located) == 4
    assert len([line for line in block.splitlines() if "examples/invalid.yaml:" in line]) == len(located)


def test_a_target_defined_under_if_name_main_is_said_so(write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("agent.py", 'import sys\n\nif __name__ == "__main__":\n    def answer(input: str) -> str:\n'
                      '        return "hi"\n\n    print(answer(sys.argv[1]))\n')
    write("d.yaml", dataset())
    error = refused(cli("validate", "d.yaml"))
    assert "d.yaml:1:9: target 'agent:answer': module 'agent' has no attribute 'answer'" in error
    assert "'answer' is defined at agent.py:4 inside 'if __name__ == \"__main__\":'" in error
    assert "define it at the module's top level" in error and "check the name after the colon" not in error


def test_a_target_in_main_names_the_program_running_not_evalclis_functions(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", dataset(target="__main__:answer"))
    error = refused(cli("run", "d.yaml"))
    assert "it defines: main" not in error
    assert "'__main__' is the program running" in error and "not the script that defines your agent" in error
    assert "my_agent:answer" in error
    assert not (workdir / "evalcli.db").exists()


def test_a_data_file_written_from_the_current_directory_says_where_it_was_looked_for_and_what_to_write(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("data/items.jsonl", '{"id": "a", "input": "hi"}\n')
    write("evals/d.yaml", dataset(target="agent:answer", data="data_file: data/items.jsonl\n"))
    error = refused(cli("run", "evals/d.yaml"))
    assert "evals/d.yaml:3:12: data file 'data/items.jsonl' not found (looked for evals/data/items.jsonl)" in error
    assert "write 'data_file: ../data/items.jsonl'" in error
    write("evals/e.yaml", dataset(target="agent:answer", data="data_file: nowhere.jsonl\n"))
    error = refused(cli("validate", "evals/e.yaml"))
    assert "data file 'nowhere.jsonl' not found (looked for evals/nowhere.jsonl)" in error
    assert "relative to the dataset file's folder" in error
    write("evals/items.jsonl", '{"id": "a", "input": "hi"}\n')
    write("evals/f.yaml", dataset(target="agent:answer", data="data_file: items.jsonl\n"))
    assert cli("run", "evals/f.yaml", "--quiet").code == 0


def test_a_tab_in_the_yaml_is_named_as_a_tab_with_the_fix(write: Callable[..., Path],
                                                          cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", "target: agent:answer\ngates:\n\t- excludes: error\ndata:\n  - input: hi\n")
    error = refused(cli("validate", "d.yaml"))
    assert "d.yaml:3:1: not valid YAML" in error
    assert "YAML indents with spaces, never tabs" in error and "check the indentation and quoting" not in error


def test_the_offline_command_of_frameworks_md_runs_as_written(tmp_path: Path) -> None:
    page = (REPO / "docs" / "targets" / "frameworks.md").read_text()
    script = page.split("Offline, a scripted stand-in plays the weather model", 1)[1].split("```sh\n", 1)[1]
    script = script.split("```", 1)[0]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = script.replace("8765", str(port)).replace(
        " &\n", f" &\nfor _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n", 1)
    for name in ("datasets", "examples"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "scorers.yaml", tmp_path / "scorers.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    env.pop("EVALCLI_JUDGE_MODEL", None)
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        # files, not pipes: the server the script leaves behind when it fails must not keep the test waiting
        process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env,
                                   stdout=out_file, stderr=err_file, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(timeout=SUBPROCESS_TIMEOUT)
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)  # the stand-in server, with the script
            except ProcessLookupError:
                pass
    out, err = stdout.read_text(), stderr.read_text()
    assert code == 0, (out, err)
    assert out.count("verdict: passed") == 3 and "error:" not in err, (out, err)


def test_a_target_that_needs_an_argument_evalcli_never_passes_is_refused_before_anything_runs(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", "def answer(input: str, history: list) -> str:\n    return 'hi'\n\n\n"
                      "class Bot:\n    def generate(self, input: str, *, user_id: str) -> str:\n        return user_id\n\n\n"
                      "bot = Bot()\n")
    write("d.yaml", dataset())
    error = refused(cli("validate", "d.yaml"))
    assert "d.yaml:1:9: target 'agent:answer': answer() requires the argument 'history', which evalcli does not pass" in error
    assert "give 'history' a default in the signature (history=None), or a value in target_options" in error
    write("e.yaml", dataset(target="agent:bot"))
    error = refused(cli("run", "e.yaml"))
    assert "Bot.generate() requires the argument 'user_id'" in error and not (workdir / "evalcli.db").exists()
    write("f.yaml", "target: agent:bot\ngates: [{includes: u1}]\ndata:\n  - input: hi\n    target_options: {user_id: u1}\n"
                    "  - input: hello\n    target_options: {user_id: u1}\n")
    assert cli("run", "f.yaml", "--quiet").code == 0
    write("g.yaml", "target: agent:bot\ngates: [{includes: u1}]\ndata:\n  - input: hi\n    target_options: {user_id: u1}\n"
                    "  - input: hello\n")
    assert "requires the argument 'user_id'" in refused(cli("validate", "g.yaml"))


def test_a_judge_whose_key_is_not_set_says_what_to_do(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", "target: agent:answer\nscorers:\n  - judge: {criterion: It greets., model: openai/gpt-4o-mini}\n"
                    "data:\n  - input: hi\n")
    result = cli("validate", "d.yaml", env={"OPENAI_API_KEY": ""})
    assert result.code == 0, result.stderr
    assert ("model openai/gpt-4o-mini needs the environment variable OPENAI_API_KEY (the openai API key), which is not "
            "set: set it (OPENAI_API_KEY=... before the command, or in the CI's secrets), or choose another model"
            ) in result.stderr


def test_a_dataset_path_a_newcomer_mistypes_or_the_agents_module_is_said_so(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("my_agent.py", AGENT)
    write("evals/eval.yaml", dataset(target="my_agent:answer"))
    error = refused(cli("run", "evals/eval.yml"))
    assert "evals/eval.yml: no such dataset file (did you mean evals/eval.yaml?)" in error
    assert "name the file that is there: evals/eval.yaml" in error
    error = refused(cli("validate", "evals/nothing.yaml"))
    assert "no such dataset file\n" in error and "did you mean" not in error
    error = refused(cli("run", "my_agent.py"))
    assert "my_agent.py: this is a Python file, not a dataset" in error and "'target: my_agent:answer'" in error
    assert "not valid YAML" not in error


def test_compares_help_says_which_run_alpha_compares(workdir: Path) -> None:
    result = run_cli(["compare", "--help"], workdir, {"COLUMNS": "200"})
    assert result.code == 0
    alpha = " ".join(result.stdout.split("--alpha X", 1)[1].split("--detect", 1)[0].split())
    assert alpha.startswith("Exit 1 only when B is worse than A (with compare: a later run than the first) beyond the "
                            "noise"), alpha
