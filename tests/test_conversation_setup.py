"""Per-conversation setup, per-item options and metadata (docs/targets/frameworks.md), through the real CLI with callable targets:
what the setup is told, what the target gets, the cleanup (also after a failure), and every bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult

SETUPS = '''
import asyncio, json, os, pathlib

LOG = pathlib.Path(__file__).with_name("setup.jsonl")


def log(**fields):
    with LOG.open("a") as out:
        out.write(json.dumps(fields) + "\\n")


def info_of(info):
    return {"thread": info.thread, "resource": info.resource, "item_id": info.item_id, "tags": info.tags,
            "ground_truth": info.ground_truth, "metadata": info.metadata}


def plain(info):
    log(kind="plain", **info_of(info))
    return {"greeting": f"hello {info.metadata.get('name', 'nobody')}"}


async def coroutine(info):
    await asyncio.sleep(0)
    log(kind="coroutine", **info_of(info))
    return {"greeting": "from a coroutine"}


def generator(info):
    log(kind="enter", item_id=info.item_id)
    box = {"greeting": f"generated for {info.item_id}", "seen": []}
    yield {"greeting": box["greeting"], "box": box}
    log(kind="cleanup", item_id=info.item_id, seen=box["seen"])


async def async_generator(info):
    log(kind="enter", item_id=info.item_id)
    box = {"greeting": "async", "seen": []}
    yield {"greeting": "async", "box": box}
    await asyncio.sleep(0)
    log(kind="cleanup", item_id=info.item_id, seen=box["seen"])


def raises(info):
    if info.item_id == "bad":
        raise RuntimeError("no database for you")
    return {"greeting": "fine"}


def not_a_mapping(info):
    return ["greeting"]


def unknown_option(info):
    return {"colour": "blue"}


def reserved(info):
    return {"memory": {"resource": "x"}}


def twice(info):
    yield {"greeting": "one"}
    yield {"greeting": "two"}


def failing_cleanup(info):
    yield {"greeting": "ok"}
    raise OSError("disk gone")


def never_yields(info):
    if False:
        yield {}


def slow(info):
    import time
    time.sleep(3)
    return {}


class Fixture:
    """A callable object whose call returns a generator: a generator setup all the same."""

    def __call__(self, info):
        return generator(info)


fixture = Fixture()


class Agent:
    memory = True

    def generate(self, input, *, memory=None, greeting="(none)", box=None, colour=None):
        if box is not None:
            box["seen"].append(input)
        if "boom" in input:
            raise ValueError("the agent broke")
        return f"{greeting} / {input}"


agent = Agent()


def meddler(info):
    info.metadata["touched_by"] = info.item_id  # a setup that writes into what it is handed
    if isinstance(info.ground_truth, dict):
        info.ground_truth["city"] = "Nowhere"
    return {}


def strict(input, *, memory=None, greeting="(none)"):
    return f"{greeting} / {input}"
'''


@pytest.fixture
def setups(workdir: Path) -> Path:
    (workdir / "fixtures.py").write_text(SETUPS)
    return workdir


def logged(folder: Path) -> list[dict[str, Any]]:
    path = folder / "setup.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def texts(item: dict[str, Any]) -> list[str]:
    return [m["content"] for turn in item["turns"] for m in turn["output"] if m["role"] == "assistant"]


@pytest.mark.parametrize("setup", ["plain", "coroutine"])
def test_a_setup_is_told_about_the_conversation_and_its_options_reach_the_target(
        setup: str, setups: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", f"""
        target: fixtures:agent
        target_options: {{setup: fixtures:{setup}}}
        gates: [{{includes: " / "}}]
        data:
          - id: one
            tags: [smoke]
            metadata: {{name: Ada, plan: gold}}
            ground_truth: {{city: Oslo}}
            inputs: [Hi, Again]
          - {{id: two, input: Single}}
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 0, done.stderr
    items = {item["id"]: item for item in done.json["items"]}
    calls = {entry["item_id"]: entry for entry in logged(setups)}
    assert calls["one"] == {"kind": setup, "thread": items["one"]["thread_id"], "resource": items["one"]["resource_id"],
                            "item_id": "one", "tags": ["smoke"], "ground_truth": {"city": "Oslo"},
                            "metadata": {"name": "Ada", "plan": "gold"}}
    assert calls["one"]["thread"] is not None and calls["two"]["metadata"] == {}
    expected = "hello Ada" if setup == "plain" else "from a coroutine"
    assert texts(items["one"]) == [f"{expected} / Hi", f"{expected} / Again"]  # called once, for every turn
    assert len(logged(setups)) == 2
    assert items["one"]["metadata"] == {"name": "Ada", "plan": "gold"} and items["two"]["metadata"] == {}


@pytest.mark.parametrize("setup", ["generator", "async_generator"])
def test_a_generator_setup_is_cleaned_up_after_its_conversation_also_when_it_failed(
        setup: str, setups: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", f"""
        target: fixtures:agent
        target_options: {{setup: fixtures:{setup}}}
        gates: [{{includes: " / "}}]
        data:
          - {{id: good, inputs: [first, second]}}
          - {{id: broken, inputs: [first, boom, never sent]}}
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 4, done.stderr
    items = {item["id"]: item for item in done.json["items"]}
    assert items["broken"]["status"] == "error" and "the agent broke" in items["broken"]["error"]
    cleanups = {e["item_id"]: e["seen"] for e in logged(setups) if e["kind"] == "cleanup"}
    assert cleanups == {"good": ["first", "second"], "broken": ["first", "boom"]}  # what the conversation left
    assert [e["kind"] for e in logged(setups)].count("enter") == 2


@pytest.mark.parametrize(("setup", "message"), [
    ("raises", "setup fixtures:raises raised RuntimeError: no database for you"),
    ("not_a_mapping", "setup fixtures:not_a_mapping returned list, not a mapping of run options"),
    ("unknown_option", "setup fixtures:unknown_option returned options the target does not take: 'colour' is not "
                       "an option of"),
    ("reserved", "'memory' is set by evalcli and cannot come from a setup"),
    ("twice", "setup fixtures:twice yielded more than once"),
    ("failing_cleanup", "setup fixtures:failing_cleanup: its cleanup raised OSError: disk gone"),
    ("never_yields", "setup fixtures:never_yields did not yield"),
])
def test_what_goes_wrong_in_a_setup_is_that_conversations_error_named_as_the_setups(
        setup: str, message: str, setups: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    target = "fixtures:strict" if setup == "unknown_option" else "fixtures:agent"
    write("d.yaml", f"""
        target: {target}
        target_options: {{setup: fixtures:{setup}}}
        gates: [{{includes: " / "}}]
        data: [{{id: bad, input: hi}}, {{id: other, input: hi}}]
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 4, done.stderr
    bad = done.json["items"][0]
    assert bad["status"] == "error" and message in bad["error"], bad["error"]
    assert bad["traceback"]
    if setup == "raises":
        assert done.json["items"][1]["status"] == "ok"  # only that conversation failed
        assert bad["turns"] == []  # nothing was sent


def test_a_setup_runs_under_the_turn_timeout_and_any_callable_may_be_one(
        setups: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: fixtures:agent
        gates: [{includes: " / "}]
        data:
          - {id: slow, input: hi, target_options: {setup: "fixtures:slow"}}
          - {id: object, inputs: [a, b], target_options: {setup: "fixtures:fixture"}}
        """)
    done = cli("run", "d.yaml", "--json", "-", "--turn-timeout", "0.5")
    assert done.code == 4, done.stderr
    slow, made = done.json["items"]
    assert slow["error"] == "setup fixtures:slow did not finish within 0.5s"
    assert made["status"] == "ok" and texts(made) == ["generated for object / a", "generated for object / b"]
    assert [e["kind"] for e in logged(setups)] == ["enter", "cleanup"]


def test_item_options_merge_key_by_key_and_pin_that_conversations_resource(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:recorder
        target_options:
          memory: {resource: shared-user}
          temperature: 0
          config: {style: terse, depth: 1}
        gates: [{includes: recorded}]
        data:
          - {id: plain, inputs: [a]}
          - id: own
            target_options: {memory: {resource: user-7}, config: {depth: 3}}
            metadata: {source: ticket-42}
            inputs: [b]
        """)
    done = cli("run", "d.yaml", "--json", "-", "--concurrency", "1")
    assert done.code == 0, done.stderr
    calls = {c["input"]: c for c in (json.loads(line) for line in (workdir / "calls.jsonl").read_text().splitlines())}
    assert calls["a"]["memory"]["resource"] == "shared-user"
    assert calls["b"]["memory"]["resource"] == "user-7"
    assert calls["a"]["options"] == {"temperature": 0, "config": {"style": "terse", "depth": 1}}
    assert calls["b"]["options"] == {"temperature": 0, "config": {"style": "terse", "depth": 3}}
    items = {item["id"]: item for item in done.json["items"]}
    assert items["own"]["resource_id"] == "user-7" and items["own"]["metadata"] == {"source": "ticket-42"}
    shown = cli("show", "latest", "own")
    assert shown.code == 0 and 'metadata {"source": "ticket-42"}' in shown.stdout
    shown_json = json.loads(cli("show", "latest", "own", "--json", "-").stdout)
    assert shown_json["item"]["metadata"] == {"source": "ticket-42"}
    [row] = done.db().execute("SELECT metadata FROM items WHERE item_id = 'own'").fetchall()
    assert json.loads(row["metadata"]) == {"source": "ticket-42"}


def test_every_bad_option_is_a_validation_error_with_its_line(setups: Path, write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: fixtures:strict
        target_options:
          greeting: hi
        gates: [used_no_tools]
        data:
          - id: a
            target_options: {adapter: callable}
            input: hi
          - id: b
            target_options: {size: 3}
            input: hi
          - id: c
            target_options: {setup: nowhere:fixture}
            input: hi
          - id: d
            target_options: {setup: fixtures:LOG}
            input: hi
        """)
    done = cli("validate", "d.yaml")
    assert done.code == 2
    err = done.stderr
    assert "d.yaml:7:" in err and "'adapter' holds for the whole run and cannot be set per item" in err
    assert "d.yaml:10:" in err and "item 1 (b): target_options: 'size' is not an option of strict() (it takes: " \
                                   "greeting; add 'size' or **options to its signature to receive it)" in err
    assert "d.yaml:13:" in err and "setup 'nowhere:fixture' does not import" in err
    assert "d.yaml:16:" in err and "setup 'fixtures:LOG' is a PosixPath, not a function" in err
    assert "Traceback" not in err
    write("d.yaml", "target: fixtures:strict\ntarget_options:\n  colour: blue\ngates: [used_no_tools]\n"
                    "data: [{input: hi}]\n")
    done = cli("run", "d.yaml")
    assert done.code == 2 and not (done.cwd / "evalcli.db").exists()
    # located at the option itself (line 3, column 3), inside target_options
    assert "d.yaml:3:3: target_options for fixtures:strict: 'colour' is not an option of strict() (it takes: " \
           "greeting;" in done.stderr


def test_a_callable_with_kwargs_takes_any_option(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\ntarget_options: {anything: 1}\ngates: [used_no_tools]\n"
                    "data: [{input: hi, target_options: {more: 2}}]\n")
    assert cli("validate", "d.yaml").code == 0


def test_what_a_setup_writes_into_metadata_or_ground_truth_stays_its_own(setups: Path, write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult]) -> None:
    """The setup gets copies: the items without metadata share one empty mapping, so a setup writing into it wrote
    into every other conversation's stored metadata (and the run's fingerprint, made beside the first turns)."""
    write("d.yaml", """
        target: fixtures:agent
        target_options: {setup: fixtures:meddler}
        gates: [{includes: " / "}]
        concurrency: 1
        data:
          - {id: one, input: A}
          - {id: two, input: B, metadata: {name: Ada}, ground_truth: {city: Oslo}}
          - {id: three, input: C}
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 0, done.stderr
    stored = {item["id"]: (item["metadata"], item.get("ground_truth")) for item in done.json["items"]}
    assert stored["one"][0] == {} and stored["three"][0] == {}
    assert stored["two"][0] == {"name": "Ada"}
    shown = cli("show", done.json["run_id"], "--json", "-")
    assert shown.code == 0 and '"two"' in shown.stdout, shown.stderr
    assert "touched_by" not in shown.stdout and "Nowhere" not in shown.stdout + done.stdout
