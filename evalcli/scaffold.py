"""``evalcli schema`` (a JSON Schema of the dataset format) and ``evalcli init`` (a starter project)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .dataset import DatasetFile, ItemFile, TurnFile
from .errors import UsageError
from .scorers.checks import CHECKS

REF = {"$ref": "#/$defs/ScorerRef"}
GATE_REF = {"$ref": "#/$defs/GateRef"}


def _definitions() -> list[dict[str, Any]]:
    from .scorers.judge import JudgeArgs

    kinds: list[dict[str, Any]] = []
    for name, check in CHECKS.items():
        args = check.args.model_json_schema()
        args.pop("title", None)
        options: list[dict[str, Any]] = [args]
        if check.main is None:
            options += [{"type": "null"}]
        else:
            options.append({k: v for k, v in args["properties"][check.main].items() if k != "description"})
        kinds.append({"type": "object", "description": check.summary,
                      "properties": {name: {"anyOf": options}}, "required": [name], "additionalProperties": False})
    judge = JudgeArgs.model_json_schema()
    judge.pop("title", None)
    for key in ("judge", "multi_turn_judge"):
        kinds.append({"type": "object", "description": "An LLM judge of the whole conversation against one criterion.",
                      "properties": {key: {"anyOf": [judge, {"type": "string"}]}}, "required": [key],
                      "additionalProperties": False})
    kinds.append({"type": "object", "description": "A custom Python scorer: 'module:attribute'.",
                  "properties": {"python": {"type": "string", "pattern": "^[^:]+:.+$"}}, "required": ["python"],
                  "additionalProperties": False})
    return kinds


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
    item["properties"]["input"] = {"type": "string", "description": "A single-turn question."}
    item["properties"]["inputs"] = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    item["properties"]["turns"] = {"type": "array", "items": {"$ref": "#/$defs/Turn"}, "minItems": 1}
    item["oneOf"] = [{"required": ["input"]}, {"required": ["inputs"]}, {"required": ["turns"]}]
    defs["Turn"] = turn
    defs["Item"] = item
    props = schema["properties"]
    props["gates"] = {"type": "array", "items": GATE_REF}
    props["scorers"] = {"type": "array", "items": REF}
    props["data"] = {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalcli dataset"
    return schema


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
gates:
  - includes: "You said"
scorers:
  - scorer: said-hello            # registered in scorers.yaml
    threshold: 1                  # its average over conversations must be >= 1
  - similarity: "You said: hello" # tracked only
data:
  - id: hello
    input: hello
  - id: two-turns
    turns:
      - input: hello
      - input: how are you?
        gates: [{includes: "message 2"}]
'''

STARTER_SCORERS = '''# Registered scorers: their scores are stored per item and per turn, comparable across runs.
scorers:
  said-hello:
    includes: hello
'''


def init_project(folder: Path, force: bool = False) -> list[Path]:
    """Write a starter dataset, registry, agent and schema; never overwrite without ``force``."""
    files = {"eval.yaml": STARTER_DATASET, "scorers.yaml": STARTER_SCORERS, "agent.py": STARTER_AGENT,
             "evalcli.schema.json": json.dumps(dataset_schema(), indent=2) + "\n"}
    existing = [name for name in files if (folder / name).exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {folder}",
                         "run 'evalcli init' in an empty folder, or pass --force to overwrite")
    written = []
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written
