"""What loading and planning look at once per spec, per batch or per line (docs/performance.md, "Before the first
turn") gives what looking at every reference, every text and every line alone gave: the walks over every turn's
specs deduplicated by identity (``Dataset.distinct_specs``, ``turn_specs``), the conversations' content digests
searched for secrets together (``identity.text_digests``, ``items._content_digests``) and a JSONL line scanned at
once (``reading._loads``). Each is held equal to the full walk, written out here as it was, on generated datasets
with shared and unshared specs, secrets and malformed lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalcli.dataset import Dataset, load_dataset, reading
from evalcli.dataset import items as items_module
from evalcli.dataset.references import registration_conflicts
from evalcli.dataset.warnings import model_routes, model_uses, unregistered
from evalcli.errors import DatasetError
from evalcli.identity import content_digest, text_digest, text_digests
from evalcli.run import notices
from evalcli.run.trust import _judges
from evalcli.scorers import ScorerSpec, find
from evalcli.secret_references import references, secret_check

SECRET = "sk-loadwalks0123456789abcdef"
REGISTRY = """scorers:
  has-answer:
    includes: a
  strict-judge:
    judge: {criterion: It answers., model: openai/judge-a}
"""
entries = st.sampled_from([
    "has-answer", "strict-judge", {"includes": "Brooklyn"}, {"includes": "Queens"},
    {"judge": {"criterion": "It is kind.", "model": "openai/judge-b"}},
    {"scorer": {"judge": {"criterion": "It is kind.", "model": "openai/judge-c", "api_base": "http://127.0.0.1:9"}},
     "id": "kind"},
    {"scorer": "has-answer", "id": "renamed"}, {"scorer": {"includes": "x"}, "id": "has-answer"},
])
spec_lists = st.lists(entries, max_size=3, unique_by=lambda entry: json.dumps(entry, sort_keys=True))


@st.composite
def conversation(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"inputs": draw(st.lists(st.sampled_from(["q", "r", f"say {SECRET}"]), min_size=1, max_size=3))}
    turns = []
    for text in draw(st.lists(st.sampled_from(["q", "r", f"say {SECRET}"]), min_size=1, max_size=3)):
        turn: dict[str, Any] = {"input": text}
        for key in ("gates", "scorers"):
            if draw(st.booleans()):
                turn[key] = draw(spec_lists)
        turns.append(turn)
    return {"turns": turns}


def _by_identity(specs: Iterator[ScorerSpec] | list[ScorerSpec]) -> list[ScorerSpec]:
    return list({id(spec): spec for spec in specs}.values())


def _judges_walked(dataset: Dataset) -> list[tuple[ScorerSpec, str]]:
    """``trust._judges`` as it was: every reference of every turn looked at."""
    seen: set[tuple[str, str]] = set()
    found = [*((g, "gate") for g in dataset.gates), *((s, "scorer") for s in dataset.scorers),
             *((g, "turn gate") for i in dataset.items for t in i.turns or () for g in t.gates),
             *((s, "turn scorer") for i in dataset.items for t in i.turns or () for s in t.scorers)]
    out = []
    for spec, role in found:
        kind = find(spec.kind)
        if kind is None or kind.group != "judge" or (spec.id, role) in seen:
            continue
        seen.add((spec.id, role))
        out.append((spec, role))
    return out


def _unregistered_walked(dataset: Dataset) -> list[ScorerSpec]:
    specs: dict[str, ScorerSpec] = {}
    for spec in dataset.all_specs():
        if not spec.registered:
            specs.setdefault(spec.id, spec)
    return list(specs.values())


def _memory_warning_walked(dataset: Dataset) -> str | None:
    """``notices.memory_warning``'s decision as it was: every conversation counted first."""
    count = sum(1 for i in dataset.items if notices._recalls(i))
    if not count or dataset.target is None or dataset.remembers:
        return None
    return f"{count}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec_lists, spec_lists, st.lists(conversation(), min_size=1, max_size=6), st.sampled_from([None, True, False]))
@example(["strict-judge"], ["has-answer"], [{"turns": [{"input": "q", "gates": ["strict-judge"]}]}] * 3, None)
def test_walks_over_each_spec_once_find_what_walks_over_every_reference_found(
        workdir: Path, monkeypatch: pytest.MonkeyPatch, gates: list[Any], scorers: list[Any],
        conversations: list[dict[str, Any]], memory: bool | None) -> None:
    monkeypatch.setenv("LOAD_WALKS_API_KEY", SECRET)
    (workdir / "scorers.yaml").write_text(REGISTRY)
    head: dict[str, Any] = {"target": "agents:echo", "gates": gates, "scorers": scorers or ["has-answer"]}
    if memory is not None:
        head["target_has_memory"] = memory
    path = workdir / "d.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [head, *conversations]) + "\n")
    try:
        dataset = load_dataset(path, str(workdir / "scorers.yaml"))
    except DatasetError:  # e.g. a conflicting id: the distinct list reports what the full one did
        every = _every_reference(path, workdir)
        assert registration_conflicts(every) == registration_conflicts(_by_identity(every))
        return
    every = list(dataset.all_specs())
    assert dataset.distinct_specs() == _by_identity(every)
    assert [id(s) for s in dataset.distinct_specs()] == [id(s) for s in _by_identity(every)]
    assert [(id(s), r) for s, r in _judges(dataset)] == [(id(s), r) for s, r in _judges_walked(dataset)]
    assert [id(s) for s in unregistered(dataset)] == [id(s) for s in _unregistered_walked(dataset)]
    assert list(model_uses(dataset)) == [use for use in _model_uses_walked(dataset)]
    assert list(model_routes(dataset)) == [(model, base) for model, base in _model_routes_walked(dataset)]
    assert registration_conflicts(every) == registration_conflicts(dataset.distinct_specs())
    warned = notices.memory_warning(dataset, dataset.items)
    assert (warned is None) == (_memory_warning_walked(dataset) is None)
    if warned is not None:
        assert f" {_memory_warning_walked(dataset)} multi-turn conversation" in warned


def _every_reference(path: Path, workdir: Path) -> list[ScorerSpec]:
    """Every spec of a dataset that loading refused (its ids conflict), parsed as loading parses them."""
    from evalcli.dataset.load import _items
    from evalcli.dataset.reading import read_top
    from evalcli.dataset.references import parse_list
    from evalcli.dataset.registry import find_registry, load_registry

    registry = load_registry(find_registry(path, str(workdir / "scorers.yaml")))
    data, pos, _, listed = read_top(path)
    problems: list[Any] = []
    gates = parse_list(data.get("gates"), ("gates",), pos, registry, problems, gate=True)
    scorers = parse_list(data.get("scorers"), ("scorers",), pos, registry, problems, gate=False)
    assert listed is not None
    items, _ = _items(listed, registry, [], problems, lines=True)
    return [*gates, *scorers, *(s for i in items for t in i.turns or () for s in (*t.gates, *t.scorers))]


def _model_uses_walked(dataset: Dataset) -> Iterator[tuple[str, str, str]]:
    seen: set[int] = set()
    for spec in dataset.all_specs():
        if id(spec) in seen:
            continue
        seen.add(id(spec))
        kind = find(spec.kind)
        if kind is None or not kind.needs_model:
            continue
        for model in spec.args.get("models") or [spec.args.get("model")]:
            if isinstance(model, str):
                yield model, "judge", f"scorer {spec.id}"
    model = dataset.target.target_model if dataset.target is not None else None
    if model is not None:
        yield model, "target", f"the target {dataset.target_spec}"


def _model_routes_walked(dataset: Dataset) -> Iterator[tuple[str, str | None]]:
    seen: set[int] = set()
    for spec in dataset.all_specs():
        if id(spec) in seen:
            continue
        seen.add(id(spec))
        kind = find(spec.kind)
        if kind is None or not kind.needs_model:
            continue
        base = spec.args.get("api_base")
        for model in spec.args.get("models") or [spec.args.get("model")]:
            if isinstance(model, str):
                yield model, base if isinstance(base, str) else None


texts = st.one_of(st.sampled_from(["q", "", SECRET, f"ask {SECRET}", "https://u:pw@example.com/x", "?token=abc",
                                   "${LOAD_WALKS_API_KEY}", "\u2028", "İ"]), st.text(max_size=8))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(texts, min_size=1, max_size=3), st.booleans(), st.booleans(),
                          st.one_of(st.none(), st.dictionaries(texts, texts, max_size=2))), min_size=1, max_size=12),
       st.integers(1, 4))
def test_conversations_digested_together_are_digested_as_each_alone(
        monkeypatch: pytest.MonkeyPatch, made: list[tuple[list[str], bool, bool, dict[str, str] | None]],
        at_once: int) -> None:
    """The content digests of ``with_identities`` (texts searched for a secret ``CHECKED_AT_ONCE`` at a time, each
    turn's gates written once per list of specs) are ``content_digest(item_content(...))`` of each conversation."""
    monkeypatch.setenv("LOAD_WALKS_API_KEY", SECRET)
    monkeypatch.setattr(items_module, "CHECKED_AT_ONCE", at_once)
    shared = items_module.ScorerSpec("has-answer", "includes", {"text": "a"})
    secret = items_module.ScorerSpec("leaky", "includes", {"text": SECRET})
    items = []
    for n, (inputs, as_turns, leaky, metadata) in enumerate(made):
        turns = [items_module.Turn(text, [shared], [secret] if leaky else []) for text in inputs] if as_turns else None
        items.append(items_module.Item(n, str(n), [], "turns" if as_turns else "inputs", list(inputs), turns, None,
                                       metadata=metadata or items_module.NO_ENTRIES))
    refs, bears = references(), secret_check()
    assert items_module._content_digests(items, refs, bears) == [
        content_digest(items_module.item_content(item, refs), bears) for item in items]


@given(st.lists(texts, max_size=6))
def test_texts_digested_together_are_digested_as_each_alone(found: list[str]) -> None:
    texts_json = [json.dumps(text, ensure_ascii=False) for text in found]
    bears = secret_check()
    assert text_digests(texts_json, lambda n: found[n], bears) == [
        text_digest(text, lambda n=n: found[n], bears) for n, text in enumerate(texts_json)]


lines = st.one_of(
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3)),
                 max_leaves=6).map(json.dumps),
    st.text(alphabet='{}[]":,0123456789aeflnrstu \t\ufeff\\', max_size=12))


@settings(max_examples=300)
@given(st.sampled_from(["", " ", "\ufeff", "\t"]), lines, st.sampled_from(["\n", "\r\n", " \n", "x\n", "", "\t"]))
@example("", '{"a": 1}', "\n")
@example("", '{"a": 1} {"b": 2}', "\n")
def test_a_line_scanned_at_once_reads_as_json_loads_reads_it(before: str, value: str, after: str) -> None:
    line = before + value + after
    try:
        expected: Any = ("value", json.loads(line))
    except ValueError as exc:
        expected = ("error", str(exc), getattr(exc, "colno", None))
    try:
        got: Any = ("value", reading._loads(line))
    except ValueError as exc:
        got = ("error", str(exc), getattr(exc, "colno", None))
    assert repr(got) == repr(expected)
