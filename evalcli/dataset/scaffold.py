"""``evalcli schema`` (a JSON Schema of the dataset format) and ``evalcli init`` (a starter project)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from .fields import with_definitions
from .files import DatasetFile


class _Names(GenerateJsonSchema):
    """Definitions named as the YAML calls them: ``Item``, ``Turn``, ``Simulate`` (not ``ItemFile``...)."""

    def normalize_name(self, name: str) -> str:
        return re.sub(r"File\b", "", super().normalize_name(name))


def dataset_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a dataset file, for editors to validate and complete YAML: generated from the
    models that validate datasets (``files``), the scorer kinds' and target forms' declarations included."""
    schema = with_definitions(DatasetFile.model_json_schema(schema_generator=_Names))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "evalcli dataset"}


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
