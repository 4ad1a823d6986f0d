"""Mistakes found before a run starts are the user's (exit 2, no run row), never a crash mid-run; and what a run
leaves behind (worker threads, the interpreter's switch interval) is cleaned up, also for library callers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli import RunOptions, run_evals
from evalcli.errors import EvalcliError
from evalcli.store import Store
from tests.conftest import REPO, CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

JUDGED = """
target: agents:echo
scorers: [{judge: {criterion: The agent answered., model: openai/judge-model, api_base: 'http://127.0.0.1:9'}}]
data: [{id: a, input: hello}]
"""


@pytest.mark.parametrize(("name", "value"), [("EVALCLI_LLM_RETRIES", "abc"), ("EVALCLI_LLM_RETRIES", "-1"),
                                             ("EVALCLI_LLM_TIMEOUT", "soon"), ("EVALCLI_LLM_TIMEOUT", "0"),
                                             ("EVALCLI_LLM_BACKEND", "fast")])
def test_a_bad_llm_setting_is_exit_2_before_any_run_row(name: str, value: str, workdir: Path,
                                                        write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("d.yaml", JUDGED)
    result = cli("run", "d.yaml", env={name: value, "OPENAI_API_KEY": "sk-test-0123456789abcdef"})
    assert result.code == 2, result.stderr
    assert f"{name}={value!r} is not" in result.stderr and "Traceback" not in result.stderr
    assert not (workdir / "evalcli.db").exists()
    # the library checks too, before it writes the run's row
    store = Store(workdir / "lib.db")
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(name, value)
            env.chdir(workdir)
            with pytest.raises(EvalcliError, match=name):
                run_evals(workdir / "d.yaml", store=store)
        assert store.runs() == []
    finally:
        store.close()


def test_a_callable_target_refuses_an_option_it_does_not_declare(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    write("strict_agent.py", "def answer(input, *, memory=None, temperature=1.0):\n"
                             "    return f'said {input} at {temperature}'\n")
    write("d.yaml", "target: strict_agent:answer\ntarget_options:\n  temprature: 0\n"
                    "scorers: [{includes: said}]\ndata: [{input: q}]\n")
    result = cli("run", "d.yaml")
    assert result.code == 2, result.stderr
    assert "d.yaml:3:3: target_options for strict_agent:answer: 'temprature' is not an option of answer() " \
           "(did you mean 'temperature'?) (it takes: temperature; add 'temprature' or **options to its signature to " \
           "receive it)" in result.stderr
    write("d.yaml", "target: strict_agent:answer\ntarget_options:\n  temperature: 0\n"
                    "scorers: [{includes: at 0}]\ndata: [{input: q}]\n")
    assert cli("run", "d.yaml").code == 0


def test_timed_out_sync_targets_end_quietly_after_the_run(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("import time\n\ndef answer(input, **kw):\n    time.sleep(1.5)\n    return 'late'\n")
    (tmp_path / "d.yaml").write_text("target: slow:answer\nconcurrency: 3\nscorers: [{includes: late}]\n"
                                     "data: [{input: a}, {input: b}, {input: c}]\n")
    script = textwrap.dedent(f"""
        import time
        from evalcli import RunOptions, run_evals
        result = run_evals({str(tmp_path / 'd.yaml')!r}, options=RunOptions(turn_timeout=0.2))
        print("errors", result.summary.errors, flush=True)
        time.sleep(2.5)  # the hung calls return now, after their run's event loop closed
        print("done", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["errors", "3", "done"]
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr, done.stderr


def test_the_switch_interval_is_restored_when_runs_overlap_or_a_run_cannot_start(tmp_path: Path) -> None:
    import asyncio
    import sys as interpreter

    from evalcli.run import arun_evals

    # a module name of its own: these runs import it into the test process (``agents`` is the OpenAI Agents SDK)
    (tmp_path / "overlapping.py").write_text("import asyncio\n\nasync def wait(input, **kw):\n"
                                        "    await asyncio.sleep(float(input))\n    return 'ok'\n")
    (tmp_path / "short.yaml").write_text("target: overlapping:wait\nscorers: [{includes: ok}]\ndata: [{input: '0.05'}]\n")
    (tmp_path / "long.yaml").write_text("target: overlapping:wait\nscorers: [{includes: ok}]\ndata: [{input: '0.4'}]\n")
    original = interpreter.getswitchinterval()

    async def both() -> None:
        await asyncio.gather(arun_evals(tmp_path / "long.yaml"), arun_evals(tmp_path / "short.yaml"))

    asyncio.run(both())
    assert interpreter.getswitchinterval() == original
    Store(tmp_path / "ro.db").close()
    readonly = Store.existing(tmp_path / "ro.db")  # a store open read-only cannot give a run its writer
    try:
        with pytest.raises(EvalcliError, match="read-only"):
            run_evals(tmp_path / "short.yaml", store=readonly, options=RunOptions())
    finally:
        readonly.close()
    assert interpreter.getswitchinterval() == original
