"""``target_options.instrument: [openinference]`` (docs/otel.md): evalcli calls the installed OpenInference
instrumentors (the ``openinference_instrumentor`` entry points) of the frameworks the target's code imported."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

FAMILIES = ("openinference",)
"""The instrumentor families ``instrument:`` names."""

MODULES = {"openai_agents": "agents", "langchain": "langchain_core", "llama_index": "llama_index",
           "google_adk": "google.adk", "google_genai": "google.genai", "pydantic_ai": "pydantic_ai",
           "bedrock": "botocore", "autogen_agentchat": "autogen_agentchat", "vertexai": "vertexai"}
"""The module an instrumentor's framework is imported as, where it is not the entry point's own name."""

_DONE: set[str] = set()


def instrument_frameworks(families: list[str]) -> list[str]:
    """Instrument every framework the target imported that has an installed OpenInference instrumentor; returns
    the entry point names instrumented (each once per process)."""
    done: list[str] = []
    if "openinference" not in families:
        return done
    for point in entry_points(group="openinference_instrumentor"):
        module = MODULES.get(point.name, point.name)
        if point.name in _DONE or module not in sys.modules:
            continue
        instrumentor = point.load()()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
        _DONE.add(point.name)
        done.append(point.name)
    return done
