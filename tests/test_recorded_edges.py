"""docs/targets/index.md edges outside the targets: a JSONL data file with a byte-order mark, a judge on an OpenAI-compatible
route that never imports litellm, and a second SIGTERM while the last reports are written."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.llm_server import LLMServer, verdict
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, query, start_cli
from tests.test_cli_edges import SLOW, completed


def test_a_jsonl_data_file_with_a_byte_order_mark_is_read(write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers: [{includes: a}]
        data_file: items.jsonl
        """)
    (write("x", "").parent / "items.jsonl").write_bytes(
        "\ufeff".encode() + b'{"id": "first", "input": "a"}\n{"id": "second", "input": "b"}\n')
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [i["id"] for i in result.json["items"]] == ["first", "second"]


MODULES = """
import atexit, json, os, runpy, sys, threading
def dump():
    for thread in threading.enumerate():  # the warm-up thread included: wait until it is done
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(10)
    open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
atexit.register(dump)
sys.argv = ["evalcli", *sys.argv[1:]]
runpy.run_module("evalcli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("model", ["hosted_vllm/judge-m", "openai/judge-m"])
def test_a_judge_with_api_base_on_an_openai_compatible_route_never_imports_litellm(
        write: Callable[..., Path], llm_server: LLMServer, model: str) -> None:
    llm_server.responder = lambda request: verdict(True)
    folder = write("d.yaml", f"""
        target: agents:echo
        scorers:
          - judge: {{model: {model}, api_base: "{llm_server.url}", criterion: The assistant echoed.}}
        data: [{{id: one, input: hello}}, {{id: two, input: again}}]
        """).parent
    (folder / "driver.py").write_text(MODULES)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MODULES_OUT": str(folder / "modules.json"),
           "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789"}
    env.pop("OPENAI_API_BASE", None)
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run([sys.executable, "driver.py", "run", "d.yaml", "--json", "-"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(llm_server.requests) == 2
    modules = json.loads((folder / "modules.json").read_text())
    assert "litellm" not in modules and "aiohttp" in modules


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_while_the_last_reports_are_written_still_exits_130(second: signal.Signals,
                                                                           tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "d.yaml").write_text("target: slow:answer\nscorers: [{includes: ok}]\ndata: [{id: a, input: a}]\n")
    pipe = tmp_path / "junit.xml"
    os.mkfifo(pipe)  # writing the JUnit report blocks until someone reads it: the signals come then
    process = start_cli(["run", "d.yaml", "--junit", str(pipe)], tmp_path, cli_env(CALLS_FILE=str(tmp_path / "c.txt")))
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while not completed(tmp_path / "evalcli.db") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # past the terminal report, blocked opening the pipe
    process.send_signal(signal.SIGTERM)
    for _ in range(100):  # and again, and again, while the run is marked interrupted and the command says so
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(second)
        time.sleep(0.002)
    out, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
    assert process.returncode == 130, (process.returncode, out, err)
    assert "Traceback" not in err
    run_id = query(tmp_path / "evalcli.db", "SELECT id FROM runs")[0][0]
    assert f"INTERRUPTED while finishing run {run_id}" in out
    assert query(tmp_path / "evalcli.db", "SELECT status, exit_code FROM runs") == [("interrupted", 130)]
