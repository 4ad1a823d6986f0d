"""``evalcli schema`` (a JSON Schema of the dataset format) and ``evalcli init`` (a starter project)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..scorers import all_kinds
from .files import DatasetFile, ItemFile, SimulateFile, TurnFile

REF = {"$ref": "#/$defs/ScorerRef"}
GATE_REF = {"$ref": "#/$defs/GateRef"}


def _definitions() -> list[dict[str, Any]]:
    """The inline form ``{kind: ARG}`` of every scorer kind, from the kinds' own declarations."""
    return [kind.schema() for kind in all_kinds()]


def dataset_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a dataset file, for editors to validate and complete YAML."""
    schema = DatasetFile.model_json_schema()
    defs = schema.setdefault("$defs", {})
    item = ItemFile.model_json_schema()
    turn = TurnFile.model_json_schema()
    for model in (item, turn):
        model.pop("title", None)
    inline = _definitions()
    threshold = {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1},
                           {"type": "object", "properties": {"min": {"type": "number", "minimum": 0, "maximum": 1},
                                                             "max": {"type": "number", "minimum": 0, "maximum": 1}},
                            "additionalProperties": False, "minProperties": 1}]}
    plain = [{"type": "string", "description": "A scorer registered in scorers.yaml, or a check without arguments."},
             *inline]
    defs["Threshold"] = threshold
    defs["ScorerRef"] = {"anyOf": [*plain, {"type": "object", "properties": {
        "scorer": {"anyOf": plain}, "threshold": {"$ref": "#/$defs/Threshold"}, "id": {"type": "string"}},
        "required": ["scorer"], "additionalProperties": False}]}
    defs["GateRef"] = {"anyOf": [*plain, {"type": "object", "properties": {
        "scorer": {"anyOf": plain}, "id": {"type": "string"}}, "required": ["scorer"], "additionalProperties": False}]}
    turn["properties"]["gates"] = {"type": "array", "items": GATE_REF}
    turn["properties"]["scorers"] = {"type": "array", "items": REF}
    turn["properties"]["input"] = {"type": "string", "description": "What the user says on this turn."}
    turn["properties"]["resume"] = {"description": "Instead of input: any value, sent as Command(resume=...) to the "
                                                   "interrupt the previous turn ended in (LangGraph).",
                                    "not": {"type": "null"}}
    turn["oneOf"] = [{"required": ["input"]}, {"required": ["resume"]}]
    item["properties"]["input"] = {"type": "string", "description": "A single-turn question."}
    item["properties"]["inputs"] = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    item["properties"]["turns"] = {"type": "array", "items": {"$ref": "#/$defs/Turn"}, "minItems": 1}
    message = {"type": "object", "required": ["role"], "description": "An OpenAI-format message.",
               "properties": {"role": {"enum": ["user", "assistant", "tool", "system", "developer"]},
                              "tool_call_id": {"type": "string"}}}
    recorded = {"type": "array", "items": message, "minItems": 1,
                "description": "A recorded conversation, scored as it is (no target is called)."}
    item["properties"]["transcript"] = recorded
    item["properties"]["messages"] = {**recorded, "description": "The same as 'transcript'."}
    item["properties"]["labels"] = {"type": "object", "minProperties": 1, "additionalProperties": {"anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1}, {"enum": ["pass", "fail"]}]},
        "description": "What a person decided each scorer (by id) should give this conversation."}
    item["oneOf"] = [{"required": ["input"]}, {"required": ["inputs"]}, {"required": ["turns"]},
                     {"required": ["simulate"]}, {"required": ["transcript"]}, {"required": ["messages"]}]
    simulation: dict[str, Any] = SimulateFile.model_json_schema()
    simulation.pop("title", None)
    item["properties"]["simulate"] = simulation
    defs["Turn"] = turn
    defs["Item"] = item
    props = schema["properties"]
    props["gates"] = {"type": "array", "items": GATE_REF}
    props["scorers"] = {"type": "array", "items": REF}
    props["data"] = {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1}
    props["target"] = _target_schema(defs)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalcli dataset"
    return schema


def _target_schema(defs: dict[str, Any]) -> dict[str, Any]:
    """An import path, or one of the mapping forms (SPEC §17), each from its adapter's settings model."""
    from ..targets import form_class, form_names

    forms: list[dict[str, Any]] = [{"type": "string", "description": "Import path 'module:attribute' of the agent."}]
    for name in form_names():
        cls = form_class(name)
        settings = cls.config_model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(settings.pop("$defs", {}))
        settings.pop("title", None)
        forms.append({"type": "object", "properties": {name: settings}, "required": [name],
                      "additionalProperties": False} if cls.nested else settings)
    return {"description": "The agent under test (SPEC §2, §12, §17).", "anyOf": forms}


STARTER_AGENT = '''"""A tiny agent to start from: replace generate() with a call to your own agent."""

from __future__ import annotations

from typing import Any


class Threads:
    """Message history per (resource, thread): what lets a turn recall the earlier ones."""

    def __init__(self) -> None:
        self.history: dict[tuple[str, str], list[str]] = {}

    def of(self, memory: dict[str, Any] | None) -> list[str]:
        if not memory or not memory.get("thread"):
            return []  # no thread: nothing is remembered
        return self.history.setdefault((str(memory.get("resource")), str(memory["thread"])), [])


class EchoAgent:
    """Says what it heard and counts the messages of its conversation."""

    def __init__(self) -> None:
        self.memory = Threads()

    def generate(self, input: str, *, memory: dict[str, Any] | None = None, **options: Any) -> str:
        history = self.memory.of(memory)
        history.append(input)
        return f"You said: {input} (message {len(history) or 1} of this conversation)"


agent = EchoAgent()
'''

STARTER_DATASET = '''# yaml-language-server: $schema=evalcli.schema.json
# Run it: evalcli run eval.yaml
target: agent:agent
gates:                            # each must pass on every conversation
  - echoed                        # registered in scorers.yaml (as every scorer here)
scorers:
  - scorer: said-hello
    threshold: 1                  # its average over conversations must be >= 1
  - close-to-hello                # tracked only: no threshold
data:
  - id: hello
    input: hello
  - id: two-turns
    turns:
      - input: hello
      - input: how are you?
        gates: [second-message]
'''

STARTER_SCORERS = '''# Registered scorers: their scores are stored per item and per turn under these ids,
# comparable across runs. Any inline reference ({includes: ...}) works too, but is not stored.
scorers:
  echoed:
    includes: "You said"
  said-hello:
    includes: hello
  close-to-hello:
    similarity: "You said: hello"
  second-message:
    includes: "message 2"
'''


def init_project(folder: Path, force: bool = False) -> tuple[list[Path], list[Path]]:
    """Write the starter files that are missing (all of them with ``force``); returns (written, kept)."""
    files = {"eval.yaml": STARTER_DATASET, "scorers.yaml": STARTER_SCORERS, "agent.py": STARTER_AGENT,
             "evalcli.schema.json": json.dumps(dataset_schema(), indent=2) + "\n"}
    written, kept = [], []
    for name, text in files.items():
        path = folder / name
        if path.exists() and not force:
            kept.append(path)
            continue
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written, kept
