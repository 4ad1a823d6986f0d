"""``--resume`` compares the configuration the run actually uses (docs/identity.md): after ${VAR} interpolation, with the
files the dataset names read; a difference is exit 2 naming its path, never a secret's value."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.fingerprint import SALT, differences, fingerprint, leaves
from tests.conftest import CliResult
from tests.reliability_helpers import RESUMABLE, stored_run


def test_a_per_item_option_from_the_environment_is_refused_by_its_path(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata:\n  - input: hi\n"
                    "  - {input: ho, target_options: {temperature: '${ITEM_T}'}}\n")
    first = cli("run", "d.yaml", "--json", "-", env={"ITEM_T": "1"})
    assert first.code == 0
    again = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"ITEM_T": "2"})
    assert again.code == 2 and "data[1].target_options.temperature (changed)" in again.stderr  # old main: accepted
    same = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"ITEM_T": "1"})
    assert same.code == 0, same.stderr


def test_a_conversations_limit_and_a_tool_mock_from_the_environment_are_part_of_it(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\ngates: [{includes: said}]\nlimits: {turns: '${TURNS}'}\n"
                    "data:\n  - input: hi\n  - {input: ho, tools: {lookup: {returns: '${ANSWER}'}}}\n")
    first = cli("run", "d.yaml", "--json", "-", env={"TURNS": "3", "ANSWER": "sunny"})
    assert first.code == 0, first.stderr
    limit = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"TURNS": "4", "ANSWER": "sunny"})
    assert limit.code == 2 and "data[0].limits (changed)" in limit.stderr, limit.stderr
    mock = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"TURNS": "3", "ANSWER": "rain"})
    assert mock.code == 2 and "data[1].tools.mocks.lookup (changed)" in mock.stderr, mock.stderr
    assert "rain" not in mock.stderr and "sunny" not in mock.stderr


def test_a_model_targets_system_file_and_an_http_header_are_part_of_it(write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: every call is refused at once (the conversations error)
    write("d.yaml", f"target:\n  http: {{url: 'http://127.0.0.1:{port}/chat', headers: {{Authorization: "
                    "'Bearer ${TOKEN}'}, body: {message: '{{input}}', style: '${STYLE}'}}\n"
                    "gates: [{includes: x}]\ndata: [{input: hi}]\n")
    first = cli("run", "d.yaml", "--json", "-", env={"TOKEN": "sekrit-one", "STYLE": "plain"})
    run_id = first.json["run_id"]
    style = cli("run", "d.yaml", "--resume", run_id, env={"TOKEN": "sekrit-one", "STYLE": "polite"})
    assert style.code == 2 and "target.http.body.style (changed)" in style.stderr  # old main: accepted
    token = cli("run", "d.yaml", "--resume", run_id, env={"TOKEN": "sekrit-two", "STYLE": "plain"})
    assert token.code == 2 and "target.http.headers.Authorization (changed)" in token.stderr
    assert "sekrit" not in token.stderr + token.stdout
    stored = "".join(str(tuple(row)) for row in first.db().execute("SELECT * FROM runs"))
    assert "sekrit" not in stored
    write("sys.txt", "Answer in °F.")
    write("m.yaml", "target: {model: openai/x, system_file: sys.txt}\ngates: [{includes: x}]\ndata: [{input: hi}]\n")
    model = cli("run", "m.yaml", "--json", "-", env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}"})
    write("sys.txt", "Answer in °C.")
    edited = cli("run", "m.yaml", "--resume", model.json["run_id"])
    assert edited.code == 2 and "target.model.system (changed: the content of sys.txt)" in edited.stderr, edited.stderr


def test_a_resume_refused_for_an_edit_names_the_paths_that_changed(write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult]) -> None:
    dataset = RESUMABLE
    run_id = stored_run(write, cli)
    write("d.yaml", dataset.replace("gates: [{includes: fine}]}", "gates: [{includes: fin}]}"))
    gate = cli("run", "d.yaml", "--resume", run_id)
    # old main: "d.yaml changed since run ... started" and nothing about where
    assert gate.code == 2 and ("d.yaml changed since run" in gate.stderr and "data[1].turns[1].gates.includes(fine) "
                               "(removed), data[1].turns[1].gates.includes(fin) (added)" in gate.stderr), gate.stderr
    write("d.yaml", dataset.replace("{id: a, input: hi}", "{id: a, input: ho}") + "  - {id: c, input: new}\n")
    items = cli("run", "d.yaml", "--resume", run_id)
    assert items.code == 2 and "data[0].inputs[0] (changed), data[2] (added)" in items.stderr, items.stderr
    write("d.yaml", dataset.replace("data:\n", "data:   # the same conversations\n"))
    comment = cli("run", "d.yaml", "--resume", run_id)
    assert comment.code == 2 and "no path of its configuration differs" in comment.stderr, comment.stderr


tree = st.recursive(st.one_of(st.integers(), st.text(max_size=4), st.booleans(), st.none()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text("abc", min_size=1, max_size=2), inner, max_size=3)),
                    max_leaves=12)


@given(tree, st.data())
def test_changing_any_leaf_changes_the_fingerprint_at_that_path(config: Any, data: st.DataObject) -> None:
    stored = fingerprint(config)
    assert differences(stored, config) == []
    assert not any(str(value) in stored.values() for _, value in leaves(config) if isinstance(value, str) and value)
    paths = [path for path, _ in leaves(config)]
    target = data.draw(st.sampled_from(paths))
    edited = json.loads(json.dumps(config))

    def change(node: Any, path: str) -> Any:
        if path == target:
            return [*node, "x"] if isinstance(node, list) else [node, "x"]
        if isinstance(node, dict):
            return {k: change(v, f"{path}.{k}" if path else k) for k, v in node.items()}
        if isinstance(node, list):
            return [change(v, f"{path}[{n}]") for n, v in enumerate(node)]
        return node

    edited = change(edited, "")
    found = differences(stored, edited)
    assert found and any(f.startswith(target) for f in found)
    assert fingerprint(config, stored[SALT]) == stored  # the same configuration, the same fingerprint


@given(tree, tree)
def test_a_refusal_names_every_difference_once_by_its_whole_subtree(before: Any, after: Any) -> None:
    from evalcli.run.resume import _ancestors, collapsed

    stored = fingerprint({"c": before})
    now = fingerprint({"c": after}, stored[SALT])
    leaves_then, leaves_now = set(stored) - {SALT}, set(now) - {SALT}
    named = collapsed(differences(stored, {"c": after}), leaves_then, leaves_now)
    assert len(named) == len(set(named))
    for entry in named:
        path, _, kind = entry.rpartition(" (")
        # a removed (added) path has nothing under it now (then); a changed one is a leaf of both
        others = {"removed)": leaves_now, "added)": leaves_then, "changed)": set()}[kind]
        assert not any(path in _ancestors(other) for other in others)
    for leaf in (leaves_then ^ leaves_now):  # every leaf that went or came is under a named path
        assert any(entry.rpartition(" (")[0] in _ancestors(leaf) for entry in named)


def per_leaf(config: Any, salt: str) -> dict[str, str]:
    """The fingerprint as runs stored it before a conversation had one entry: a digest per leaf, conversations too."""
    from evalcli.fingerprint import leaf_digest

    return {SALT: salt, **{path: leaf_digest(salt, path, value) for path, value in leaves(config)}}


@given(tree, st.lists(tree, min_size=1, max_size=3), tree, st.lists(tree, max_size=3))
def test_one_entry_per_conversation_names_what_a_digest_per_leaf_named(rest: Any, items: list[Any], rest_after: Any,
                                                                       items_after: list[Any]) -> None:
    from evalcli.fingerprint import SHAPES, paths
    from evalcli.run.resume import collapsed

    before, after = {"c": rest, "data": items}, {"c": rest_after, "data": items_after}
    stored = fingerprint(before)
    assert SHAPES in stored and all(key == SALT or not key.startswith("data[") or "|" in value
                                    for key, value in stored.items())
    assert fingerprint(before, stored[SALT]) == stored and differences(stored, before) == []
    legacy = per_leaf(before, stored[SALT])
    named = collapsed(differences(stored, after), *paths(stored, after))
    expected = collapsed(differences(legacy, after), set(legacy), set(per_leaf(after, stored[SALT])))
    # the same paths, unless a changed conversation's leaves collide in their 4 hex digits: then it is named whole
    assert sorted(named) == sorted(expected) or any(n.endswith("] (changed)") for n in named)
    assert bool(named) == bool(expected)


def test_a_conversation_costs_one_entry_not_a_digest_per_leaf() -> None:
    config = {"target": {"spec": "agents:echo"},
              "data": [{"input": f"question {n}", "target_options": {"temperature": 0.5, "top_p": 1},
                        "turns": None, "tools": {"mocks": {"lookup": "x", "search": "y"}}, "limits": "None",
                        "gates": {"includes(a)": {"kind": "includes", "args": ["a"], "threshold": None}}}
                       for n in range(1000)]}
    stored = fingerprint(config)
    per_item = len(json.dumps(stored)) / 1000
    assert per_item < 100, per_item  # 85 bytes; a digest per leaf took 511 a conversation of this shape
    assert len(json.dumps(per_leaf(config, stored[SALT]))) / 1000 > 500
