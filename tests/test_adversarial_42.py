"""Issues 41 and 42 tried as demanding users would: each test failed on the main this branch started from.

- A reader that goes away (``evalcli run --json - | head -1``) ends the output quietly: the run keeps its own exit
  code (docs/reference/exit-codes.md), never an internal error.
- ``--quiet`` lets none of the agent's own output through, stdout included (docs/ci.md, "--quiet").
- A tracked scorer that errors is its error: its threshold is not shown failed.
- A simulated user's message, once asked for, is sent: a turn's limits are checked once, before it begins.
- A package's scorer kind named like a key of a scorer entry (`threshold`) is refused, as a taken name is.
- A resume whose secrets were keyed with another machine's digest key says it cannot compare them
  (docs/reliability.md, "Secrets").
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult, cli_base_env, run_cli
from tests.llm_server import LLMServer, text
from tests.plugin_packages import installed
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

NOISY = '''
import logging, os, sys
logging.basicConfig(level=logging.INFO)

def agent(input, **kw):
    print("AGENT PRINTED THIS")
    os.write(1, b"AGENT WROTE FD1\\n")
    sys.stderr.write("AGENT STDERR\\n")
    logging.getLogger("agent").info("AGENT LOGGED")
    return "hello " + input
'''


def test_quiet_lets_no_agent_stdout_through(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("noisy.py", NOISY)
    write("d.yaml", """
        target: noisy:agent
        gates: [{includes: hello}]
        data: [{input: hi}, {input: there}]
    """)
    done = cli("run", "d.yaml", "--quiet")
    assert done.code == 0, done.stderr
    assert "AGENT" not in done.stdout + done.stderr
    assert done.stdout.strip().startswith("verdict: passed")  # evalcli's own line still reaches the real stdout
    with_json = cli("run", "d.yaml", "--quiet", "--json", "-")
    assert with_json.code == 0 and with_json.json["verdict"] == "passed"
    assert "AGENT" not in with_json.stderr


def test_a_reader_that_goes_away_keeps_the_runs_exit_code(write: Callable[..., Path], workdir: Path) -> None:
    write("d.yaml", "target: agents:scripted\ngates: [{includes: fine}]\nscorers: [{includes: x}]\ndata:\n" + "".join(
        f"  - {{id: c{n}, input: 'padding {'p' * 300} {n} => fine'}}\n" for n in range(300)))
    for args in (["--json", "-"], ["--json", "-", "--quiet"], ["--verbose"]):
        process = subprocess.Popen([sys.executable, "-m", "evalcli", "run", "d.yaml", "--junit", "j.xml", *args],
                                   cwd=workdir, env=cli_base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        process.stdout.readline()  # `| head -1`
        process.stdout.close()
        _, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
        text = err.decode()
        assert process.returncode == 0, (args, text)
        assert "internal error" not in text and "Traceback" not in text and "BrokenPipe" not in text
        assert (workdir / "j.xml").read_text().count("<testcase") == 300  # the files after the JSON are written
        (workdir / "j.xml").unlink()


def test_resume_with_another_digest_key_says_secrets_are_unchecked(write: Callable[..., Path], workdir: Path,
                                                                  cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:scripted
        secrets: [PIN]
        gates: [{includes: ok}]
        data:
          - {id: a, input: "my pin is ${PIN} => ok"}
          - {id: b, input: "nothing secret => ok"}
    """)
    first = cli("run", "d.yaml", "--json", "-", env={"PIN": "111222333", "EVALCLI_DIGEST_KEY": "key-of-machine-a"})
    assert first.code == 0, first.stderr
    run_id = first.json["run_id"]
    same_key = cli("run", "d.yaml", "--resume", run_id, env={"PIN": "111222333", "EVALCLI_DIGEST_KEY": "key-of-machine-a"})
    assert same_key.code == 0 and "digest key" not in same_key.stderr
    other = cli("run", "d.yaml", "--resume", run_id, env={"PIN": "999888777", "EVALCLI_DIGEST_KEY": "key-of-machine-b"})
    assert other.code == 0, other.stderr
    assert "another digest key" in other.stderr and "data[0].inputs[0]" in other.stderr
    assert "EVALCLI_DIGEST_KEY" in other.stderr
    for shown in (other.stdout, other.stderr):
        assert "999888777" not in shown and "111222333" not in shown


SCORERS = '''
def nan(run):
    return float("nan")
'''


def test_an_errored_scorers_threshold_is_not_shown_failed(write: Callable[..., Path],
                                                          cli: Callable[..., CliResult]) -> None:
    """A tracked scorer that errors is its error: `show` and the JSON never say its threshold FAILED while the
    run's verdict is passed (the threshold was not decided)."""
    write("myscorers.py", SCORERS)
    write("d.yaml", """
        target: agents:scripted
        gates: [{includes: ok}]
        scorers:
          - scorer: {python: "myscorers:nan"}
            threshold: 0.5
        data: [{id: one, input: "x => ok"}]
    """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 4, done.stderr
    assert done.json["verdict"] == "passed" and done.json["summary"]["scorer_errors"] == {"python(myscorers:nan)": 1}
    outcome = done.json["items"][0]["outcomes"]["scorers"]["python(myscorers:nan)"]
    assert outcome["error"] and outcome["passed"] is None
    show = cli("show", done.json["run_id"], "one")
    line = next(line for line in show.stdout.splitlines() if "python(myscorers:nan)" in line)
    assert "error" in line and "FAIL" not in line


def test_a_simulated_users_message_once_asked_is_sent(write: Callable[..., Path], workdir: Path,
                                                     llm_server: LLMServer) -> None:
    """`limits: {tokens: 30}` with simulator calls of 18 tokens: before turn 1 the conversation has used 18, so the
    simulator is asked and its message is sent; before turn 2 it has used 36 and stops, the simulator not asked."""
    answers = iter(range(1000))
    llm_server.responder = lambda request: text(f"user message {next(answers)} => reply")
    write("d.yaml", """
        target: agents:scripted
        gates: [{includes: reply}]
        limits: {tokens: 30}
        data:
          - id: chat
            simulate: {goal: chat, max_turns: 10, model: openai/sim}
    """)
    done = run_cli(["run", "d.yaml", "--json", "-", "--no-cache"], workdir,
                   env={"OPENAI_API_BASE": llm_server.url, "EVALCLI_LLM_RETRIES": "0"})
    assert done.code == 4, done.stderr
    item = done.json["items"][0]
    assert item["limited"] == {"limit": "tokens", "turns": 2}
    assert [turn["input"] for turn in item["turns"]] == ["user message 0 => reply", "user message 1 => reply"]
    assert len(llm_server.requests) == 2  # every message the simulator wrote was sent


RESERVED_KIND = '''
from pydantic import BaseModel
from evalcli.results import Outcome
from evalcli.scorers import Kind

class Args(BaseModel):
    value: str = "x"

class Zero:
    async def score(self, run):
        return Outcome(score=0.0, reason="never usable")

KIND = Kind(name="threshold", args=Args, main="value", build=lambda args, context: Zero(), summary="odd",
            example="threshold: x")
'''


def test_a_plugin_kind_named_like_an_entry_key_is_refused(workdir: Path, cli: Callable[..., CliResult]) -> None:
    """A package's scorer kind called `threshold` (or `id`, `scorer`, `min`, `max`) could never be used: a dataset
    reads that key as the entry's own. It is refused like a taken name, naming the package, never listed."""
    installed(workdir, "odd-kinds", {"evalcli.scorers": {"odd": "odd_kinds:KIND"}}, {"odd_kinds.py": RESERVED_KIND})
    listed = cli("scorers", "--json")
    assert listed.code == 2, listed.stdout
    assert "odd-kinds 1.0" in listed.stderr and "'threshold'" in listed.stderr and "Traceback" not in listed.stderr


def test_a_hint_rewriting_an_entry_keeps_the_secrets_reference(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    """A validation hint that rewrites the user's entry writes an interpolated secret as `${NAME}`, as the dataset
    does, never its value and never a `[redacted]` that, copied back, would change the criterion."""
    write("d.yaml", """
        target: agents:echo
        gates:
          - judge: "The agent never reveals ${MY_API_TOKEN}"
            model: openai/judge
        data: [{input: hi}]
    """)
    done = cli("validate", "d.yaml", env={"MY_API_TOKEN": "Zq9xT7pLm2Vb8Nc4Rk6Wd1Yh"})
    assert done.code == 2
    assert "criterion: The agent never reveals ${MY_API_TOKEN}" in done.stderr
    assert "Zq9xT7pLm2Vb8Nc4Rk6Wd1Yh" not in done.stdout + done.stderr and "[redacted]" not in done.stderr
