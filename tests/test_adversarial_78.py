"""Adversarial tries, second round, of what a developer builds on evalcli: a package's adapter and scorer kind
(docs/extending.md), the library API (docs/python-api.md) and the pytest plugin (docs/pytest.md). Made-up packages
installed for the run as pip installs them (tests/plugin_packages.py), the real CLI and pytest in subprocesses,
real SQLite files."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalcli import RunOptions, plan_runs
from evalcli.errors import UsageError
from tests.plugin_packages import installed
from tests.pytest_project import run_pytest, write_project
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, run_cli

DECLARATION = '''
from evalcli.targets import AdapterDeclaration

ODD = AdapterDeclaration(name="odd", adapter="odd_adapter.adapter:OddAdapter", summary="an agent with odd replies",
                         recognises=("odd_agent.OddAgent",), install="pip install odd-adapter",
                         frameworks=("odd_agent",))
'''
ADAPTER = '''
from evalcli.targets import Adapter, Reply


class OddAdapter(Adapter):
    name = "odd"

    def open(self, *, multi_turn, calls, conversation=None, item=None):
        return SyncSession() if item.id == "sync" else OddSession()


class OddSession:
    thread_id = resource_id = None

    async def send(self, text):
        if text == "list":
            return [{"role": "assistant", "content": "Sunny"}]
        if text == "none":
            return None
        if text == "not-a-dict":
            return Reply(["Sunny"])
        if text == "no-role":
            return Reply([{"content": "Sunny"}])
        return Reply([{"role": "assistant", "content": "Sunny"}])

    async def close(self):
        pass


class SyncSession(OddSession):
    def send(self, text):
        return Reply([{"role": "assistant", "content": "Sunny"}])
'''
AGENT = "class OddAgent:\n    pass\n\nagent = OddAgent()\n"


def test_a_packages_session_whose_reply_is_not_a_reply_of_message_dicts_is_that_conversations_error(
        tmp_path: Path) -> None:
    # was: a list (or None) from send() ended the whole run, "internal error: AttributeError: 'list' object has no
    # attribute 'messages'" (exit 70); a message that is no dict was stored, then made 'evalcli show' an internal
    # error and the built-in scorers' an AttributeError; a `def send` was "the target raised TypeError: object Reply
    # can't be used in 'await' expression"
    installed(tmp_path, "odd-adapter", {"evalcli.adapters": {"odd": "odd_adapter:ODD"}},
              {"odd_adapter/__init__.py": DECLARATION, "odd_adapter/adapter.py": ADAPTER, "odd_agent.py": AGENT})
    (tmp_path / "d.yaml").write_text("target: odd_agent:agent\ngates: [{includes: Sunny}]\ndata:\n" + "".join(
        f"  - {{id: {name}, input: {name}}}\n" for name in ("plain", "list", "none", "not-a-dict", "no-role", "sync")))
    done = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert done.returncode == 4, done.stderr
    assert "internal error" not in done.stderr
    with sqlite3.connect(tmp_path / "x.db") as conn:
        errors = dict(conn.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())
        outputs = dict(conn.execute("SELECT item_id, output FROM turns").fetchall())
    assert errors == {
        "plain": "ok",
        "list": "turn 0: the adapter odd's session.send() returned list, not an evalcli.targets.Reply (return "
                "Reply(messages))",
        "none": "turn 0: the adapter odd's session.send() returned NoneType, not an evalcli.targets.Reply (return "
                "Reply(messages))",
        "not-a-dict": "turn 0: response message 0 from the adapter odd is str, not a message dict with a 'role' "
                      "(OpenAI chat format)",
        "no-role": "turn 0: response message 0 from the adapter odd has no 'role' (a message dict in OpenAI chat "
                   "format has one: 'assistant' or 'tool')",
        "sync": "turn 0: the adapter odd's session.send() returned Reply, not an awaitable: write it 'async def "
                "send(self, text)' (docs/extending.md)",
    }
    assert outputs["not-a-dict"] == outputs["no-role"] == "[]"
    shown = run_cli(["show", "latest", "not-a-dict", "--db", "x.db"], tmp_path)
    assert shown.returncode == 0 and "internal error" not in shown.stderr, shown.stderr


KINDS = '''
import math
from pydantic import BaseModel, ConfigDict
from evalcli.results import Outcome

class A(BaseModel):
    model_config = ConfigDict(extra="forbid")
    what: str

SCORES = {"nan": math.nan, "inf": math.inf, "none": None, "text": "1", "false": False, "true": True, "big": 1.5}

class Odd:
    def __init__(self, what):
        self.what = what

    async def score(self, run):
        if self.what == "mutate":  # it empties what it was given: its siblings must not see that
            run.output.clear()
            run.turns[0].output.clear()
            return Outcome(score=1.0, reason="emptied the run")
        return Outcome(score=SCORES[self.what], reason=self.what)

ODD = Kind(name="odd_score", args=A, main="what", build=lambda a, c: Odd(a.what), summary="odd scores")
'''
KINDS = "from evalcli.scorers import Kind\n" + KINDS
WEATHER = "examples.weather_agent:weather_agent"


def _kind_run(tmp_path: Path, gates: list[str], scorers: list[str]) -> dict[str, tuple[object, object]]:
    installed(tmp_path, "oddscore", {"evalcli.scorers": {"odd_score": "oddscore:ODD"}},
              {"oddscore/__init__.py": KINDS})
    (tmp_path / "k.yaml").write_text(
        f"target: {WEATHER}\ngates:\n" + "".join(f"  - odd_score: '{g}'\n" for g in gates)
        + "scorers:\n" + "".join(f"  - {s}\n" for s in scorers)
        + "data:\n  - id: a\n    input: What is the weather in Brooklyn?\n")
    done = run_cli(["run", "k.yaml", "--db", "k.db", "--json", "k.json"], tmp_path)
    assert "internal error" not in done.stderr and done.returncode in (0, 1, 4), done.stderr
    outcomes = json.loads((tmp_path / "k.json").read_text())["items"][0]["outcomes"]
    return {key: (value["score"], value.get("error")) for group in ("gates", "scorers")
            for key, value in outcomes[group].items()}


def test_a_package_kinds_score_that_is_no_finite_number_is_that_scorers_error(tmp_path: Path) -> None:
    # was: a text score ended the run ("internal error: TypeError: unsupported operand type(s) for +=", exit 70); nan
    # and inf were stored as null with no error (docs/scorers.md: a score must be a finite number, or it is the
    # scorer's error); False/True were stored as JSON booleans
    seen = _kind_run(tmp_path, ["nan", "inf", "none", "text", "false", "true", "big"], [])
    said = "the scorer kind odd_score's score() returned"
    assert seen["odd_score(nan)"] == (0.0, f"ValueError: {said} the score nan: a score must be a finite number "
                                           "(Outcome(not_scorable=True, reason=...) when there is nothing to score)")
    assert seen["odd_score(inf)"][1].startswith(f"ValueError: {said} the score inf: a score must be a finite")
    assert seen["odd_score(none)"] == (0.0, f"TypeError: {said} an Outcome whose score is NoneType, not a number "
                                            "(return Outcome(score=..., reason=...), or Outcome(not_scorable=True, "
                                            "reason=...) when there is nothing to score)")
    assert seen["odd_score(text)"][1].startswith(f"TypeError: {said} an Outcome whose score is str, not a number")
    assert [(seen[k], type(seen[k][0])) for k in ("odd_score(false)", "odd_score(true)", "odd_score(big)")] == [
        ((0.0, None), float), ((1.0, None), float), ((1.5, None), float)]


def test_a_package_kind_that_changes_the_run_it_is_given_changes_nothing_its_siblings_see(tmp_path: Path) -> None:
    # was: a package's kind got the run itself (a custom Python scorer gets a copy): emptying run.output made the
    # sibling includes(brooklyn) score 0 on "(no assistant text)"
    seen = _kind_run(tmp_path, ["mutate"], ["includes: brooklyn", "called_tool: get_weather"])
    assert seen == {"odd_score(mutate)": (1.0, None), "includes(brooklyn)": (1.0, None),
                    "called_tool(get_weather)": (1.0, None)}


@pytest.mark.parametrize("workers", [0, "2", True, 2.0])
def test_workers_out_of_range_in_run_options_name_run_options_not_the_flag(workers: object, tmp_path: Path) -> None:
    # was: RunOptions(workers="2") said "--workers 2: a run is played by 1 to 64 processes", the flag's value that
    # the command line takes
    (tmp_path / "d.yaml").write_text(f"target: {WEATHER}\ngates: [{{includes: brooklyn}}]\ndata:\n  - {{input: hi}}\n")
    with pytest.raises(UsageError, match=rf"^RunOptions\(workers={workers!r}\): --workers takes a whole number from 1 "
                                         r"to 64") as caught:
        plan_runs([str(tmp_path / "d.yaml")], RunOptions(workers=workers))  # type: ignore[arg-type]
    assert "give workers a whole number from 1 to 64" in (caught.value.hint or "")


HANGS = '''
import asyncio, sys
from evalcli.run import arun_evals

async def main():
    try:
        result = await asyncio.wait_for(arun_evals("h.yaml"), 4)
    except TimeoutError:
        print("the run never ended")
        return
    print(result.items[0].status, result.items[0].gate_scores)

asyncio.run(main())
'''
HANGING_KIND = '''
import asyncio
from pydantic import BaseModel
from evalcli.scorers import Kind

class A(BaseModel):
    n: int = 1

class Hangs:
    async def score(self, run):
        await asyncio.sleep(3600)

HANG = Kind(name="hangs", args=A, main="n", build=lambda a, c: Hangs(), summary="never returns")
'''


@pytest.mark.xfail(strict=True, reason="nothing bounds scoring: a package's (or a custom) scorer that never returns "
                                       "hangs the run, whatever --turn-timeout and limits: {seconds} say; bounding it "
                                       "needs a scoring time limit to be designed (what it is, and what it stops)")
def test_a_scorer_that_never_returns_is_stopped_by_the_conversations_limit(tmp_path: Path) -> None:
    installed(tmp_path, "hangs", {"evalcli.scorers": {"hangs": "hangs:HANG"}}, {"hangs.py": HANGING_KIND})
    (tmp_path / "h.yaml").write_text(f"target: {WEATHER}\nlimits: {{seconds: 1}}\ngates:\n  - hangs: 1\n"
                                     "data:\n  - id: a\n    input: What is the weather in Brooklyn?\n")
    (tmp_path / "hangs_run.py").write_text(HANGS)
    done = subprocess.run([sys.executable, "hangs_run.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT, env=cli_env())
    assert "the run never ended" not in done.stdout, done.stdout + done.stderr


@pytest.mark.xfail(strict=True, reason="pytest splits a node id at every '::' before a '[': a conversation whose id "
                                       "holds '::' is collected as FILE::a::b, which -k and --lf select but the node "
                                       "id pytest prints does not; fixing it means choosing its name under pytest")
def test_a_conversation_whose_id_holds_a_double_colon_is_selected_by_the_node_id_pytest_prints(
        tmp_path: Path) -> None:
    write_project(tmp_path, {"d.yaml": "target: agent:weather\ngates: [{includes: sunny}]\ndata:\n"
                                       "  - {id: 'a::b', input: 'Weather in Rome?'}\n  - {id: c, input: hi}\n"})
    printed = run_pytest(tmp_path, "-q", "-rA", "d.yaml", timeout=SUBPROCESS_TIMEOUT)
    assert "PASSED d.yaml::a::b" in printed.out, printed.out
    again = run_pytest(tmp_path, "-q", "d.yaml::a::b", timeout=SUBPROCESS_TIMEOUT)
    assert again.code == 0 and "1 passed" in again.out, again.out


def _claiming(folder: Path, name: str) -> None:
    """The package ``NAME-adapter``, whose adapter ``NAME`` recognises ``shared_agent.Agent`` and says its name."""
    installed(folder, f"{name}-adapter", {"evalcli.adapters": {name: f"{name}_adapter:DECLARED"}}, {
        f"{name}_adapter/__init__.py": f'''
            from evalcli.targets import AdapterDeclaration

            DECLARED = AdapterDeclaration(name="{name}", adapter="{name}_adapter.adapter:Claims", summary="{name}",
                                          recognises=("shared_agent.Agent",))
            ''',
        f"{name}_adapter/adapter.py": f'''
            from evalcli.targets import Adapter, Reply

            class Claims(Adapter):
                name = "{name}"

                def open(self, *, multi_turn, calls, conversation=None, item=None):
                    return Said()

            class Said:
                thread_id = resource_id = None

                async def send(self, text):
                    return Reply([{{"role": "assistant", "content": "{name} ran it"}}])

                async def close(self):
                    pass
            '''})


def test_two_packages_whose_adapters_recognise_one_agent_are_named_in_a_warning(tmp_path: Path) -> None:
    # was: the adapter of the package first by name ran it, silently (installing 'alpha-adapter' took over an agent
    # 'zeta-adapter' had run)
    _claiming(tmp_path, "zeta")
    _claiming(tmp_path, "alpha")
    (tmp_path / "shared_agent.py").write_text("class Agent:\n    pass\n\nagent = Agent()\n")
    (tmp_path / "d.yaml").write_text("target: shared_agent:agent\ngates: [{includes: ran}]\ndata:\n  - {id: a, input: hi}\n")
    (tmp_path / "e.yaml").write_text("target: shared_agent:agent\ntarget_options: {adapter: zeta}\n"
                                     "gates: [{includes: ran}]\ndata:\n  - {id: a, input: hi}\n")
    done = run_cli(["validate", "d.yaml", "e.yaml"], tmp_path)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "recognises it too" in line]
    assert warned == ["warning: d.yaml: target 'shared_agent:agent': the alpha adapter runs it, and zeta (zeta-adapter "
                      "1.0) recognises it too; name the one you mean with 'target_options: {adapter: alpha}'"]
    ran = run_cli(["run", "e.yaml", "--db", "x.db", "--json", "-"], tmp_path)
    assert json.loads(ran.stdout)["items"][0]["turns"][0]["output"][0]["content"] == "zeta ran it"


VALIDATING = '''
from pydantic import BaseModel, ConfigDict, Field, field_validator
from evalcli.results import Outcome
from evalcli.scorers import Kind

class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=1)

    @field_validator("n")
    @classmethod
    def taken(cls, value):
        if value == 3:
            raise KeyError("three is taken")  # not a ValueError: pydantic lets it through
        if value == 5:
            raise ValueError("five is too many")
        return value

class Scores:
    async def score(self, run):
        return Outcome(score=1.0, reason="ok")

def default_id(values):
    if values["n"] == 9:
        raise RuntimeError("no id for nine")
    return f"val({values['n']})"

KIND = Kind(name="val", args=Args, main="n", build=lambda a, c: Scores(), summary="validating", default_id=default_id)
'''


@pytest.mark.parametrize(("value", "said"), [
    (3, "error: the entry point 'val = valkind:KIND' (group evalcli.scorers) of the package valkind 1.0 could not "
        "read the scorer val: 3 (d.yaml:3:10): KeyError: 'three is taken'"),
    (9, "error: the entry point 'val = valkind:KIND' (group evalcli.scorers) of the package valkind 1.0 could not "
        "read the scorer val: 9 (d.yaml:3:10): RuntimeError: no id for nine"),
])
def test_a_package_kind_whose_arguments_cannot_be_read_is_that_packages_error(tmp_path: Path, value: int,
                                                                               said: str) -> None:
    # was (3 and 9): "internal error: KeyError: 'three is taken' ... this is a bug in evalcli" (exit 70)
    installed(tmp_path, "valkind", {"evalcli.scorers": {"val": "valkind:KIND"}}, {"valkind/__init__.py": VALIDATING})
    (tmp_path / "d.yaml").write_text(f"target: {WEATHER}\ngates:\n  - val: {value}\ndata:\n  - id: a\n    input: hi\n")
    done = run_cli(["validate", "d.yaml"], tmp_path)
    assert done.returncode == 2 and done.stderr.splitlines()[0] == said, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.timing
def test_show_prints_a_message_of_megabytes_in_time_that_grows_with_its_length(tmp_path: Path) -> None:
    # was: rich wraps one Text in time that grows with the square of its length: 'evalcli show' took 18 s on a
    # message of 8 MB (six minutes on 20 MB); printed in pieces, it takes about as long as printing 8 MB does
    import time

    (tmp_path / "agent.py").write_text("def big(input, **options):\n    return 'x' * 8_000_000\n")
    (tmp_path / "d.yaml").write_text("target: agent:big\ngates: [{includes: x}]\ndata:\n  - {id: a, input: hi}\n")
    assert run_cli(["run", "d.yaml", "--db", "b.db"], tmp_path).returncode == 0
    started = time.monotonic()
    shown = run_cli(["show", "latest", "a", "--db", "b.db"], tmp_path)
    took = time.monotonic() - started
    assert shown.returncode == 0 and shown.stdout.count("x") >= 8_000_000, shown.stderr
    assert took < 9, f"evalcli show took {took:.1f} s"
