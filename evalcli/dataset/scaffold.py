"""``evalcli schema`` (a JSON Schema of the dataset format) and ``evalcli init`` (a starter project)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from .models import WHOLE_INTERPOLATION, DatasetFile, with_definitions  # built without pydantic's plugins


class _Names(GenerateJsonSchema):
    """Definitions named as the YAML calls them: ``Item``, ``Turn``, ``Simulate`` (not ``ItemFile``...)."""

    def normalize_name(self, name: str) -> str:
        return re.sub(r"File\b", "", super().normalize_name(name))


def dataset_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a dataset file, for editors to validate and complete YAML: generated from the
    models that validate datasets (``files``), the scorer kinds' and target forms' declarations included."""
    schema = with_definitions(DatasetFile.model_json_schema(schema_generator=_Names))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "evalcli dataset"}


KEY_TABLES = (("The top level", None), ("An item (`data:`)", "Item"), ("A turn (`turns:`)", "Turn"),
              ("A simulated user (`simulate:`)", "Simulate"), ("`limits:`", "Limits"),
              ("A recorded message (`transcript:`)", "Message"), ("A mock (`tools: {NAME: ...}`)", "Mock"))
"""The key reference's tables (docs/datasets.md, "Every key"): a title and the schema definition it describes."""


def key_reference() -> str:
    """Every key of a dataset file, per part, from the same schema (and so the same models) that validate it:
    its type and what it does. ``docs/gen_reference.py`` writes it into docs/datasets.md."""
    schema = dataset_schema()
    out: list[str] = []
    for title, name in KEY_TABLES:
        part = schema if name is None else schema["$defs"][name]
        required = set(part.get("required", []))
        out += [f"**{title}**", "", "| key | holds | what it does |", "|---|---|---|"]
        for key, prop in part["properties"].items():
            holds = _holds(prop) + (" (required)" if key in required else "")
            description = " ".join(str(prop.get("description", "")).replace("|", "\\|").split())
            out.append(f"| `{key}` | {holds} | {description} |")
        out.append("")
    return "\n".join(out)


def _holds(prop: dict[str, Any]) -> str:
    """A property's type in a few words."""
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "enum" in prop:
        return " or ".join(f"`{value}`" for value in prop["enum"])
    if "anyOf" in prop:
        options = [option for option in prop["anyOf"] if option.get("type") != "null"]
        kinds = [_holds(option) for option in options if option.get("pattern") != WHOLE_INTERPOLATION]
        whole = len(kinds) < len(options)  # also wholly one ${VAR} (docs/datasets.md, "Environment variables")
        return " or ".join(dict.fromkeys(kinds)) + (" (or `${VAR}`)" if whole else "")
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_holds(prop.get('items', {}))}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"mapping of {_holds(extra)}" if isinstance(extra, dict) and extra else "mapping"
    names = {"string": "text", "integer": "integer", "number": "number", "boolean": "true/false"}
    return names.get(str(kind), "any value")


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
