"""One dataset shape (docs/datasets.md): the JSON Schema of ``evalcli schema`` is generated from the pydantic models
that validate datasets, so the two agree. Every dataset the repository ships (``datasets/``) or documents (complete
YAML datasets in README.md and docs/) validates against the schema; each mistake of ``INVALID`` is refused by the
schema and by ``evalcli validate`` (exit 2, on the line of the mistake)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from evalcli.dataset.files import DatasetFile, ItemFile, TurnFile
from evalcli.dataset.scaffold import dataset_schema
from tests.conftest import REPO, CliResult
from tests.doc_blocks import pages

SHIPPED = sorted(path for path in (REPO / "datasets").rglob("*.yaml") if "prompts" not in path.parts)
DOCUMENTED = [block for page in pages() for block in page.blocks
              if block.dataset is not None and not (block.kind == "validate" and block.exit)]

BASE = "target: agents:echo\nscorers: [{includes: x}]\n"
INVALID: dict[str, tuple[str, int]] = {
    "an unknown top-level key": (BASE + "scorer: [x]\ndata: [{input: q}]\n", 3),
    "concurrency 0": (BASE + "concurrency: 0\ndata: [{input: q}]\n", 3),
    "no conversation": (BASE + "data: []\n", 3),
    "an unknown item key": (BASE + "data:\n  - inptu: q\n", 4),
    "an item with no form": (BASE + "data:\n  - id: a\n", 4),
    "an item of two forms": (BASE + "data:\n  - input: q\n    turns: [{input: r}]\n", 5),
    "input not a string": (BASE + "data:\n  - input: [a, b]\n", 4),
    "input null": (BASE + "data:\n  - input:\n", 4),
    "inputs a string": (BASE + "data:\n  - inputs: hello\n", 4),
    "inputs empty": (BASE + "data:\n  - inputs: []\n", 4),
    "an input of inputs not a string": (BASE + "data:\n  - inputs: [a, [b]]\n", 4),
    "turns empty": (BASE + "data:\n  - turns: []\n", 4),
    "a turn without input": (BASE + "data:\n  - turns:\n      - gates: [x]\n", 5),
    "a tag not a string": (BASE + "data:\n  - input: q\n    tags: [[a]]\n", 5),
    "a threshold of 2": ("target: agents:echo\nscorers:\n  - scorer: {includes: a}\n    threshold: 2\n"
                         "data: [{input: q}]\n", 4),
    "a gate with a threshold": ("target: agents:echo\ngates:\n  - scorer: {includes: a}\n    threshold: 0.5\n"
                                "data: [{input: q}]\n", 4),
    "an unknown scorer kind": ("target: agents:echo\nscorers: [{includs: x}]\ndata: [{input: q}]\n", 2),
    "simulate without a goal": (BASE + "data:\n  - simulate: {persona: p}\n", 4),
    "simulate with an unknown key": (BASE + "data:\n  - simulate: {goal: g, colour: red}\n", 4),
    "max_turns 0": (BASE + "data:\n  - simulate: {goal: g, max_turns: 0}\n", 4),
    "a transcript with an unknown role": ("scorers: [{includes: x}]\ndata:\n  - transcript:\n"
                                          "      - {role: bot, content: hi}\n", 4),
    "a label above 1": ("scorers: [x]\ndata:\n  - transcript: [{role: user, content: hi}]\n    labels: {x: 2}\n", 4),
    "unmocked maybe": (BASE + "unmocked: maybe\ndata: [{input: q}]\n", 3),
    "a mock that returns and raises": (BASE + "tools:\n  get_weather: {returns: 1, raises: x}\ndata: [{input: q}]\n", 4),
    "a mock entry with an unknown key": (BASE + "tools:\n  get_weather: {returns: 1, sometimes: 2}\n"
                                         "data: [{input: q}]\n", 4),
    "tools.match without a known value": (BASE + "tools: {replay: t.jsonl, match: fuzzy}\ndata: [{input: q}]\n", 3),
    "limits of 0 turns": (BASE + "limits: {turns: 0}\ndata: [{input: q}]\n", 3),
    "on_limit wrong": (BASE + "on_limit: stop\ndata: [{input: q}]\n", 3),
    "an http target without a url": ("target: {http: {}}\nscorers: [{includes: x}]\ndata: [{input: q}]\n", 1),
}
"""Mistakes, each with the line ``evalcli validate`` reports it on."""


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = dataset_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors_of(validator: jsonschema.Draft202012Validator, data: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(data)]


def test_the_schema_is_the_models_schema(cli: Callable[..., CliResult]) -> None:
    schema = json.loads(cli("schema").stdout)
    assert schema == json.loads(json.dumps(dataset_schema()))
    defs = schema["$defs"]
    for model, name in ((DatasetFile, None), (ItemFile, "Item"), (TurnFile, "Turn")):
        described = schema if name is None else defs[name]
        assert set(described["properties"]) == set(model.model_fields), name  # every key the validator knows
        for key, field in model.model_fields.items():
            assert described["properties"][key].get("description") == field.description, (name, key)
    assert not re.search(r'"type": "null"', json.dumps(defs["Item"]["properties"]["input"]))


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_every_shipped_dataset_validates_against_the_schema(validator: jsonschema.Draft202012Validator,
                                                            path: Path) -> None:
    assert errors_of(validator, yaml.safe_load(path.read_text(encoding="utf-8"))) == []


def test_every_documented_dataset_validates_against_the_schema(validator: jsonschema.Draft202012Validator) -> None:
    assert len(DOCUMENTED) > 20
    found = {block.where: errors_of(validator, block.dataset) for block in DOCUMENTED}
    assert {where: errors for where, errors in found.items() if errors} == {}


@pytest.mark.parametrize("name", list(INVALID))
def test_each_mistake_is_refused_by_the_schema_and_the_validator(validator: jsonschema.Draft202012Validator,
                                                                 write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult], name: str) -> None:
    text, line = INVALID[name]
    assert errors_of(validator, yaml.safe_load(text)), f"the schema accepts {name}"
    write("d.yaml", text)
    done = cli("validate", "d.yaml")
    assert done.code == 2, done.stdout + done.stderr
    assert f"d.yaml:{line}:" in done.stderr and "hint:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
