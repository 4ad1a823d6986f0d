"""Adversarial tries of the library API as a Python user calls it (docs/python-api.md, "Mistakes of a Python
caller"): every mistake a UsageError saying what to write, never a TypeError from inside a run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from evalcli import RunOptions, plan_runs, run_evals, run_planned
from evalcli.errors import UsageError
from evalcli.evaluate import arun_planned
from evalcli.run import arun_evals
from evalcli.store import Store

DATASET = """\
target: examples.weather_agent:weather_agent
scorers:
  - includes: brooklyn
data:
  - id: a
    input: What is the weather in Brooklyn?
  - id: b
    input: What is the weather in London?
"""
AGENT = "examples.weather_agent:weather_agent"


@pytest.fixture
def dataset(tmp_path: Path) -> str:
    path = tmp_path / "ds.yaml"
    path.write_text(DATASET)
    return str(path)


@pytest.mark.parametrize("options", [
    {"concurrency": 0}, {"concurrency": -1}, {"concurrency": "4"}, {"judge_concurrency": 0}, {"repeat": 0},
    {"turn_timeout": 0}, {"turn_timeout": -5}, {"max_errors": -1}, {"grace_seconds": -1},
])
def test_run_options_out_of_their_flags_range_are_refused(dataset: str, options: dict[str, Any]) -> None:
    # turn_timeout=0 made every conversation an error (exit 4); repeat=0 and concurrency=-1 ran as if not given
    name = next(iter(options))
    with pytest.raises(UsageError, match=rf"RunOptions\({name}=") as caught:
        run_evals(dataset, options=RunOptions(**options))
    assert caught.value.hint
    with pytest.raises(UsageError, match=rf"RunOptions\({name}="):
        plan_runs([dataset], RunOptions(**options))


def test_a_limit_below_zero_is_refused(dataset: str) -> None:
    from evalcli.dataset import Selection

    with pytest.raises(UsageError, match=r"RunOptions\(selection.limit=-1\)"):
        run_evals(dataset, options=RunOptions(selection=Selection(limit=-1)))


def test_options_that_are_not_run_options_are_refused(dataset: str) -> None:
    with pytest.raises(UsageError, match="options must be a RunOptions, not dict"):
        run_evals(dataset, options={"concurrency": 2})  # type: ignore[arg-type]


def test_an_agent_object_as_target_names_its_import_path(dataset: str) -> None:
    from examples.weather_agent import weather_agent

    with pytest.raises(UsageError, match="is a Python object") as caught:
        plan_runs([dataset], targets=[weather_agent])  # type: ignore[list-item]
    assert AGENT in (caught.value.hint or "")


def test_one_path_and_one_target_are_not_split_into_letters(dataset: str) -> None:
    plans = plan_runs(dataset, targets=AGENT)  # type: ignore[arg-type]
    assert [(plan.dataset.path, plan.target) for plan in plans.runs] == [(dataset, AGENT)]


def test_a_store_given_as_a_path_is_refused(dataset: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="store must be an open evalcli"):
        run_evals(dataset, store=str(tmp_path / "x.db"))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="store must be an open"):
        run_planned(plan_runs([dataset]), store=str(tmp_path / "x.db"))  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()


def test_the_synchronous_calls_inside_a_running_loop_say_what_to_await(dataset: str, tmp_path: Path) -> None:
    async def notebook() -> list[str]:
        said = []
        for call in (lambda: run_evals(dataset), lambda: run_planned(plan_runs([dataset]))):
            try:
                call()
            except UsageError as exc:
                said.append(exc.hint or "")
        with Store(tmp_path / "nb.db") as store:  # and the awaitable ones work there, twice
            first = await arun_evals(dataset, store=store)
            second = await arun_planned(plan_runs([dataset]), store=store)
        assert first.exit_code == 0 and second.exit_code == 0
        return said

    said = asyncio.run(notebook())
    assert said == ["write 'await arun_evals(dataset, ...) (from evalcli.run import arun_evals)' there instead",
                    "write 'await arun_planned(plans, ...)' there instead"]


def test_events_that_are_not_an_events_subclass_are_refused_before_the_run(dataset: str, tmp_path: Path) -> None:
    class Duck:  # only what it shows: the run failed later on 'Duck' object has no attribute 'warning'
        def started(self, *args: Any, **kwargs: Any) -> None:
            pass

    with Store(tmp_path / "ev.db") as store:
        with pytest.raises(UsageError, match=r"events must be an evalcli\.run\.Events, not Duck"):
            run_evals(dataset, store=store, events=Duck())  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="events must be"):
            run_planned(plan_runs([dataset]), store=store, events=Duck())  # type: ignore[arg-type]
        assert store.conn.execute("select count(*) from runs").fetchone()[0] == 0


KINDS = '''
from pydantic import BaseModel, ConfigDict
from evalcli.scorers import Kind

class A(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = 1

class ReturnsFloat:
    async def score(self, run):
        return 0.5

def build_boom(args, context):
    raise RuntimeError("build blew up")

FLOAT = Kind(name="adv_float", args=A, main="n", build=lambda a, c: ReturnsFloat(), summary="float")
BUILD = Kind(name="adv_build", args=A, main="n", build=build_boom, summary="build")
'''


def _kind_run(tmp_path: Path, kind: str) -> Any:
    from tests.plugin_packages import installed
    from tests.reliability_helpers import run_cli

    installed(tmp_path, "advkinds", {"evalcli.scorers": {"adv_float": "advkinds:FLOAT", "adv_build": "advkinds:BUILD"}},
              {"advkinds/__init__.py": KINDS})
    (tmp_path / "k.yaml").write_text(f"target: {AGENT}\ngates:\n  - {kind}: 1\n"
                                     "data:\n  - id: a\n    input: What is the weather in Brooklyn?\n")
    return run_cli(["run", "k.yaml", "--db", "k.db", "--json", "k.json"], tmp_path)


def test_a_package_kind_whose_build_raises_is_that_packages_error_not_evalclis(tmp_path: Path) -> None:
    done = _kind_run(tmp_path, "adv_build")  # was: internal error, "this is a bug in evalcli", exit 70
    assert done.returncode == 2, done.stderr
    assert "of the package advkinds 1.0 could not build the scorer adv_build(1) (k.yaml:3:5): RuntimeError: build " \
           "blew up" in done.stderr
    assert "pip uninstall advkinds" in done.stderr and "Traceback" not in done.stderr
    from tests.reliability_helpers import query

    assert query(tmp_path / "k.db", "select status, exit_code from runs") == [("failed", 2)]  # was 70


def test_a_package_kind_whose_score_returns_a_float_says_so(tmp_path: Path) -> None:
    import json

    done = _kind_run(tmp_path, "adv_float")  # was: AttributeError: 'float' object has no attribute 'reason'
    assert done.returncode == 1, done.stderr
    error = json.loads((tmp_path / "k.json").read_text())["items"][0]["outcomes"]["gates"]["adv_float(1)"]["error"]
    assert error == ("TypeError: the scorer kind adv_float's score() returned float, not an "
                     "evalcli.results.Outcome (return Outcome(score=..., reason=...))")


@pytest.mark.parametrize("datasets", [[], [None], [3]])
def test_no_dataset_or_one_that_is_not_a_path_is_refused(datasets: list[Any]) -> None:
    # [] planned nothing and run_planned exited 0; None and 3 were TypeErrors from os.fspath
    with pytest.raises(UsageError, match=r"no dataset given|a dataset is a path"):
        plan_runs(datasets)
    if datasets:
        with pytest.raises(UsageError, match="a dataset is a path"):
            run_evals(datasets[0])
