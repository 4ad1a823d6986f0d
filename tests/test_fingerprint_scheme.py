"""The configuration fingerprint made in one pass over each conversation (docs/identity.md, docs/performance.md): a
conversation's leaves digested by their path within it, which names any changed leaf as before; a run stored before
(each leaf digested by its whole path, no ``#scheme``) is still compared its own way and resumes exactly."""

from __future__ import annotations

import datetime
import json
import math
import pickle
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.dataset import load_dataset
from evalcli.fingerprint import (
    RELATIVE,
    SALT,
    SCHEME,
    SHAPES,
    _salted,
    _text,
    differences,
    fingerprint,
    leaf_digest,
    leaf_texts,
    leaves,
)
from evalcli.identity import _canonical, canonical_json
from evalcli.scorers import ScorerSpec
from evalcli.thresholds import Threshold
from tests.conftest import CliResult
from tests.reliability_helpers import RESUMABLE, stored_run


def old_form(tree: dict[str, Any], salt: str) -> dict[str, str]:
    """The fingerprint as main stored it before the one-pass scheme: each conversation's leaves digested by their
    whole path (``data[1].turns[0].input``), no ``#scheme`` key."""
    digests = {SALT: salt}
    for path, value in leaves({key: value for key, value in tree.items() if key != "data"}):
        if path:
            digests[path] = leaf_digest(salt, path, value)
    shapes: dict[tuple[str, ...], int] = {}
    for n, item in enumerate(tree["data"]):
        prefix = f"data[{n}]"
        found = list(leaves(item, prefix))
        index = shapes.setdefault(tuple(path[len(prefix):] for path, _ in found), len(shapes))
        shorts = ",".join(leaf_digest(salt, path, value, short=True) for path, value in found)
        digests[prefix] = f"{index}|{leaf_digest(salt, prefix, item)}|{shorts}"
    digests[SHAPES] = json.dumps([list(shape) for shape in shapes])
    return digests


scalar = st.one_of(st.integers(), st.floats(), st.text(max_size=4), st.booleans(), st.none())
tree = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text("abc.[", min_size=1, max_size=2), inner, max_size=3)),
    max_leaves=12)
conversation = st.dictionaries(st.sampled_from(["form", "inputs", "turns", "metadata"]), tree, min_size=1)


def _edited(value: Any, target: str, path: str = "") -> Any:
    """``value`` with the leaf at ``target`` replaced by a value no leaf holds."""
    if path == target:
        return {"changed": [value]}
    if isinstance(value, dict) and value:
        return {k: _edited(v, target, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list) and value:
        return [_edited(v, target, f"{path}[{n}]") for n, v in enumerate(value)]
    return value


@given(st.lists(conversation, min_size=1, max_size=3), st.data())
@settings(max_examples=150, deadline=None)
def test_any_changed_leaf_of_a_conversation_is_named_by_either_scheme(items: list[Any], data: st.DataObject) -> None:
    config = {"target": {"spec": "agents:echo"}, "data": items}
    stored = fingerprint(config)
    old = old_form(config, stored[SALT])
    assert stored[SCHEME] == RELATIVE and SCHEME not in old
    for n in range(len(items)):  # a conversation's whole digest is the one main stored
        assert stored[f"data[{n}]"].split("|")[1] == old[f"data[{n}]"].split("|")[1]
    assert differences(stored, config) == [] and differences(old, config) == []
    n = data.draw(st.integers(0, len(items) - 1))
    rel = data.draw(st.sampled_from([path for path, _ in leaf_texts(items[n])]))
    edited = {**config, "data": [*items[:n], _edited(items[n], rel), *items[n + 1:]]}
    for form in (stored, old):
        found = differences(form, edited)
        # the leaf, or (its 4 hex digits colliding with the new subtree's first leaf) the conversation whole
        assert found and (all(f.startswith(f"data[{n}]{rel}") for f in found)
                          or found == [f"data[{n}] (changed)"]), found


@given(tree)
@settings(max_examples=200, deadline=None)
def test_leaf_texts_are_the_leaves_with_their_json(value: Any) -> None:
    assert leaf_texts(value) == [(path[1:], _text(leaf)) for path, leaf in leaves(value, "x")]


def _assert_entries_are_leaf_texts_digested(items: list[Any]) -> None:
    """Each conversation's fingerprint entry is its shape's index, its whole digest and each leaf's path and JSON
    text digested (``leaf_texts``): the old two-pass way, against which the one-walk ``item_entry`` is held."""
    stored = fingerprint({"data": items})
    shapes: dict[tuple[str, ...], int] = {}
    for n, item in enumerate(items):
        found = leaf_texts(item)
        index = shapes.setdefault(tuple(rel for rel, _ in found), len(shapes))
        shorts = ",".join(_salted(stored[SALT], rel, text)[:4] for rel, text in found)
        assert stored[f"data[{n}]"] == f"{index}|{leaf_digest(stored[SALT], f'data[{n}]', item)}|{shorts}"


@given(st.lists(tree, min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_conversations_entry_is_its_leaf_texts_digested(items: list[Any]) -> None:
    """``item_entry`` digests a conversation's leaves in one walk, a text, ``null`` or boolean leaf looked up by its
    value: the same entries as each leaf's path and JSON text digested (``leaf_texts``), whatever leaves repeat."""
    _assert_entries_are_leaf_texts_digested(items)


@given(st.dictionaries(st.text("ab.", min_size=1, max_size=2), tree, min_size=1, max_size=3),
       st.lists(tree, min_size=1, max_size=4))
@settings(max_examples=150, deadline=None)
def test_a_mapping_conversations_share_is_digested_as_its_own_would_be(common: dict[str, Any], inputs: list[Any]) -> None:
    """A mapping object several conversations (and paths) share, as a turn's gates are, is walked once per path
    (``_digest_mapping``): the same entries as each conversation's leaf texts digested."""
    items = [{"turns": [{"input": text, "gates": common}, {"gates": common}], "metadata": common} for text in inputs]
    _assert_entries_are_leaf_texts_digested(items)


odd = st.recursive(
    st.one_of(scalar, st.binary(max_size=3), st.dates(), st.floats(allow_nan=True), st.just(math.inf),
              st.datetimes(max_value=datetime.datetime(2100, 1, 1))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.frozensets(st.integers(), max_size=3),
                            st.dictionaries(st.one_of(st.text(max_size=2), st.integers(), st.booleans(), st.none()),
                                            inner, max_size=3)),
    max_leaves=10)


@given(odd)
@settings(max_examples=300, deadline=None)
def test_a_conversations_content_text_is_the_same_without_the_tagged_copy(value: Any) -> None:
    """The identity and content digests of every conversation are unchanged: the text is the tagged copy's."""
    expected = json.dumps(_canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    assert canonical_json(value) == expected


def test_a_specs_fingerprint_is_made_again_when_the_secrets_known_change(monkeypatch: Any) -> None:
    spec = ScorerSpec("includes(x)", "includes", {"value": "zq-884422991-token"}, Threshold(0.5, None, 0.5))
    before = spec.fingerprint()
    assert spec.fingerprint() == before
    monkeypatch.setenv("FPONE_API_TOKEN", "zq-884422991-token")  # now a secret: the digest covers ${FPONE_API_TOKEN}
    after = spec.fingerprint()
    assert after != before and after == ScorerSpec(spec.id, spec.kind, dict(spec.args), spec.threshold)._fingerprint()
    assert "_fingerprinted" not in pickle.loads(pickle.dumps(spec)).__dict__  # a worker makes its own


def test_a_run_stored_in_the_old_form_resumes_and_names_a_changed_leaf(write: Callable[..., Path],
                                                                        cli: Callable[..., CliResult],
                                                                        workdir: Path) -> None:
    dataset = RESUMABLE
    run_id = stored_run(write, cli)
    conn = sqlite3.connect(workdir / "evalcli.db")
    options = json.loads(conn.execute("SELECT options FROM runs WHERE id = ?", [run_id]).fetchone()[0])
    tree = load_dataset(workdir / "d.yaml").resolved_configuration()
    assert fingerprint(tree, options["config"][SALT]) == options["config"]  # what the run stored, made here
    options["config"] = old_form(tree, options["config"][SALT])  # as main's code stored it
    conn.execute("UPDATE runs SET options = ? WHERE id = ?", [json.dumps(options), run_id])
    conn.commit()
    conn.close()
    write("d.yaml", dataset.replace("{input: one}", "{input: two}"))
    edited = cli("run", "d.yaml", "--resume", run_id)
    assert edited.code == 2 and "data[1].inputs[0] (changed), data[1].turns[0].input (changed)" in edited.stderr, \
        edited.stderr
    write("d.yaml", dataset)
    same = cli("run", "d.yaml", "--resume", run_id, "--json", "-")
    assert same.code == 4 and same.json["run_id"] == run_id, same.stderr


@given(st.dictionaries(st.sampled_from(["judge_model", "target_options", "scorers"]), tree, min_size=1),
       st.lists(conversation, min_size=1, max_size=3), st.data())
@settings(max_examples=100, deadline=None)
def test_two_shards_fingerprints_differ_exactly_where_their_configurations_do(
        settings_: dict[str, Any], items: list[Any], data: st.DataObject) -> None:
    """A split's shards share a salt (``shards_salt``), so ``merge`` compares what each resolved: the same
    configuration has no difference; one leaf changed outside the conversations is named by its path, one inside a
    conversation by the conversation (``stored_differences``, docs/ci.md)."""
    from evalcli.fingerprint import shards_salt, stored_differences

    salt = shards_salt("a" * 64, 3)
    config = {**settings_, "data": items}
    first = fingerprint(config, salt)
    assert stored_differences(first, fingerprint(config, salt)) == []
    paths = [path for path, _ in leaves(settings_) if path] + [f"data[{n}]" for n in range(len(items))]
    chosen = data.draw(st.sampled_from(paths))
    if chosen.startswith("data["):
        n = int(chosen[5:-1])
        edited = {**config, "data": [*items[:n], {**items[n], "form": {"changed": [items[n].get("form")]}}, *items[n + 1:]]}
    else:
        edited = _edited(config, "." + chosen)
    assert chosen in stored_differences(first, fingerprint(edited, salt))
