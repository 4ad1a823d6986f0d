"""The common items are read without pydantic (``evalcli/dataset/plain.py``, docs/performance.md "Start-up and
finish"): on any item, plain or not, loading gives the same items, identities, content digests and problems (message,
file:line:col) as the models' path; and a conversation's content digest is the same whether its parts of no fixed
type are looked at alone or the whole content is (``items._plain_content``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalcli.dataset import contents as contents_module
from evalcli.dataset import items as items_module
from evalcli.dataset import load as load_module
from evalcli.dataset.plain import NOT_PLAIN
from evalcli.dataset.reading import read_top
from evalcli.dataset.registry import find_registry, load_registry
from evalcli.errors import DatasetError, Problem
from evalcli.identity import canonical_json, content_digest
from evalcli.secret_references import references, secret_check

SECRET = "sk-plainpath0123456789"
"""A provider-key-shaped value of the environment: a secret wherever it is written."""
SCORERS = [{"includes": "q"}, "has-answer"]
REGISTRY = "scorers:\n  has-answer:\n    includes: a\n"

texts = st.one_of(st.sampled_from(["q", "", "  ", "Brooklyn ☂", "x" * 40, SECRET, f"ask {SECRET}",
                                   "${PLAIN_PATH_API_KEY}", "\u2028"]), st.text(max_size=8))
odd = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.just(10**25), st.floats(allow_nan=False), texts,
                st.lists(texts, max_size=2), st.dictionaries(texts, texts, max_size=2))
gate_entries = st.one_of(st.sampled_from(["has-answer", "nope-unknown", "has-answer"]),
                         st.sampled_from([{"includes": "Brooklyn"}, {"includes": 3}]), odd)


@st.composite
def turn(draw: st.DrawFn) -> Any:
    value: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        value["input"] = draw(texts if draw(st.integers(0, 9)) else odd)
    for key in ("gates", "scorers"):
        if draw(st.booleans()):
            value[key] = draw(st.lists(gate_entries, max_size=3) if draw(st.integers(0, 5)) else st.one_of(st.none(), odd))
    if not draw(st.integers(0, 7)):
        value[draw(st.sampled_from(["resume", "tools", "inptu", "extra"]))] = draw(odd)
    return value if draw(st.integers(0, 12)) else draw(odd)


@st.composite
def item(draw: st.DrawFn) -> Any:
    value: dict[str, Any] = {}
    if draw(st.integers(0, 3)):
        value["id"] = draw(st.one_of(st.integers(-5, 10**20), texts, odd))
    forms = draw(st.lists(st.sampled_from(["input", "inputs", "turns"]), min_size=0, max_size=2, unique=True)
                 if not draw(st.integers(0, 8)) else st.sampled_from([["input"], ["inputs"], ["turns"]]))
    for form in forms:
        value[form] = draw(texts if form == "input" else st.lists(texts, max_size=3) if form == "inputs" else
                           st.lists(turn(), max_size=3)) if draw(st.integers(0, 6)) else draw(odd)
    for key, values in (("tags", st.lists(texts, max_size=2)), ("metadata", st.dictionaries(texts, odd, max_size=3)),
                        ("ground_truth", odd), ("expected_outcome", st.one_of(texts, odd))):
        if not draw(st.integers(0, 3)):
            value[key] = draw(odd) if not draw(st.integers(0, 4)) else draw(values)
    if not draw(st.integers(0, 6)):
        value[draw(st.sampled_from(["labels", "gates", "target_options", "tools", "limits", "bogus", "inptus"]))] = \
            draw(odd)
    return value if draw(st.integers(0, 25)) else draw(odd)


def _load(path: Path, models_only: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What loading ``path`` gives: its items' values, identities and content digests, or its problems; and each
    item's (``load._items``, which goes on past a bad item: a dataset with one is refused whole)."""
    with monkeypatch.context() as patch:
        if models_only:
            patch.setattr(load_module, "plain_item", lambda *args: NOT_PLAIN)
            patch.setattr(items_module, "_plain_content", lambda item: None)
            patch.setattr(contents_module, "_plain_content", lambda item: None)  # every digest made at load, whole
        registry = load_registry(find_registry(path, str(path.parent / "scorers.yaml")))
        data, pos, _, listed = read_top(path)
        raws = listed if listed is not None else [(raw, pos, ("data", i)) for i, raw in enumerate(data["data"])]
        problems: list[Problem] = []
        each: Any = None
        try:
            items, _ = load_module._items(raws, registry, ["has-answer"], problems, lines=listed is None)
            each = ([(i, i.identity, i.content) for i in items], problems)
            dataset = load_module.load_dataset(path, str(path.parent / "scorers.yaml"))
        except DatasetError as exc:
            return each, [(p.where, p.message, p.hint) for p in exc.problems]
        except yaml.representer.RepresenterError as exc:  # an interpolated text in a misplaced gate's rewrite: a
            return repr(exc)  # known bug of the models' path (shapes.misplaced_assertions), the same on both
    return each, [(i, i.identity, i.content) for i in dataset.items]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(item(), min_size=1, max_size=5), st.booleans())
@example([{"id": "a", "input": "q", "tags": ["t", " "]}, {"id": " ", "input": "q"}, {"id": True, "input": "q"},
          {"id": 10**30, "inputs": ["q"]}, {"id": None, "input": "q"}, {"input": "q", "metadata": {}},
          {"turns": [{"input": "q", "gates": ["has-answer", "has-answer"]}]}], True)
@example([{"input": "q", "tags": [""]}, {"inputs": []}, {"turns": []}, {"input": "q", "expected_outcome": 1},
          {"turns": [{"input": "q", "scorers": None, "gates": ["nope-unknown"]}]}], False)
def test_plain_items_load_as_the_models_load_them(workdir: Path, monkeypatch: pytest.MonkeyPatch, raws: list[Any],
                                                 jsonl: bool) -> None:
    monkeypatch.setenv("PLAIN_PATH_API_KEY", SECRET)
    (workdir / "scorers.yaml").write_text(REGISTRY)
    head = {"target": "agents:echo", "scorers": SCORERS}
    if jsonl:
        path = workdir / "d.jsonl"
        path.write_text("\n".join(json.dumps(value, ensure_ascii=bool(len(raws) % 2)) for value in [head, *raws]) + "\n")
    else:
        path = workdir / "d.yaml"
        path.write_text(yaml.safe_dump({**head, "data": raws}, allow_unicode=True, sort_keys=False))
    assert _load(path, False, monkeypatch) == _load(path, True, monkeypatch)


def test_the_common_shapes_take_the_plain_path(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's shapes are read without the models (else this whole path would be untested)."""
    taken: list[bool] = []
    plain_item = load_module.plain_item

    def spy(*args: Any) -> Any:
        made = plain_item(*args)
        taken.append(made is not NOT_PLAIN)
        return made

    monkeypatch.setattr(load_module, "plain_item", spy)
    (workdir / "scorers.yaml").write_text(REGISTRY)
    lines = [{"target": "agents:echo", "scorers": SCORERS}, {"id": "a", "input": "q"}, {"id": 7, "inputs": ["q", "r"]},
             {"id": "c", "tags": ["t"], "metadata": {"k": [1]}, "ground_truth": {"a": 1}, "expected_outcome": "ok",
              "turns": [{"input": "q", "gates": ["has-answer"]}, {"input": "r", "scorers": [{"includes": "r"}]}]},
             {"id": "d", "input": "q", "labels": {"has-answer": 1}}]
    (workdir / "d.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert len(load_module.load_dataset(workdir / "d.jsonl", str(workdir / "scorers.yaml")).items) == 4
    assert taken == [True, True, True, False]


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(), inner, max_size=3),
                                            st.tuples(inner, inner)), max_leaves=12))
def test_the_made_once_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert canonical_json(value) == json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                               default=repr)


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), texts),
                           lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
                           max_leaves=8)
any_values = st.one_of(json_values, st.dictionaries(st.integers(), texts, max_size=2), st.sets(st.integers(), max_size=2),
                       st.dates(), st.binary(max_size=3), st.tuples(texts, st.integers()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(texts, min_size=1, max_size=3), st.lists(st.tuples(texts, any_values), max_size=3), any_values,
       st.one_of(st.none(), st.dictionaries(texts, any_values, max_size=2)), any_values, st.one_of(st.none(), texts))
def test_a_conversations_text_written_directly_is_its_contents(monkeypatch: pytest.MonkeyPatch, inputs: list[str],
                                                              turns: list[tuple[str, Any]], metadata: Any,
                                                              options: Any, truth: Any, outcome: str | None) -> None:
    """The content digest of ``with_identities`` (the text written part by part for a plain conversation) is
    ``content_digest(item_content(...))``, secrets and values JSON does not hold as they are included."""
    monkeypatch.setenv("PLAIN_PATH_API_KEY", SECRET)
    spec = items_module.ScorerSpec("has-answer", "includes", {"text": SECRET})
    made = [items_module.Turn(text, [spec], [], resume=resume) for text, resume in turns]
    item = items_module.Item(0, "0", [], "turns" if made else "inputs", [t.input for t in made] or inputs,
                             made or None, truth, outcome, target_options=options,
                             metadata=metadata if isinstance(metadata, dict) and metadata else items_module.NO_ENTRIES)
    refs, bears = references(), secret_check()
    assert items_module._content_digest(item, refs, bears) == content_digest(items_module.item_content(item, refs), bears)


def test_a_plain_item_and_its_turns_have_every_field_their_constructors_set() -> None:
    """``plain_item`` fills an ``Item`` and its ``Turn``s slot by slot (``plain._Item``, ``_Turn``), not through the
    frozen ``__init__``: every field, defaults included, is what ``Item(...)``/``Turn(...)`` sets, and a field added to
    either class is one the filling must set (docs/performance.md, "Less work per loaded item")."""
    from dataclasses import fields

    from evalcli.dataset import plain
    from evalcli.dataset.items import NO_ENTRIES, Item, Turn
    from evalcli.dataset.yamlsrc import Positions
    from evalcli.scorers import Registry

    assert plain._Item.__slots__ == Item.__slots__ and plain._Turn.__slots__ == Turn.__slots__
    registry, pos = Registry(), Positions("d.jsonl", values={(): (2, 1)})
    raw = {"id": 7, "tags": ["t"], "metadata": {"k": [1]}, "ground_truth": {"a": 1}, "expected_outcome": "ok",
           "turns": [{"input": "q"}, {"input": "r", "gates": None}]}
    made = plain.plain_item(raw, 3, (), pos, registry, [], 2)
    turns = [Turn("q", [], []), Turn("r", [], [])]
    expected = Item(3, "7", ["t"], "turns", ["q", "r"], turns, {"a": 1}, "ok", metadata={"k": [1]}, line=2,
                    id_given=True)
    assert type(made) is Item and all(type(turn) is Turn for turn in made.turns)
    for field in fields(Item):
        assert getattr(made, field.name) == getattr(expected, field.name), field.name
    for turn, want in zip(made.turns, turns, strict=True):
        for field in fields(Turn):
            assert getattr(turn, field.name) == getattr(want, field.name), field.name
    plain_input = plain.plain_item({"input": "q"}, 0, (), pos, registry, [], None)
    assert plain_input == Item(0, "0", [], "input", ["q"], None, None) and plain_input.labels is NO_ENTRIES
    with pytest.raises(AttributeError):  # still frozen
        made.id = "8"
