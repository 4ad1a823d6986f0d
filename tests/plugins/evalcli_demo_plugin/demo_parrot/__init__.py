"""A toy agent framework, standing in for a real one in evalcli's plugin example (docs/extending.md).

A ``Parrot`` repeats what it hears and calls one of its tools when the message says ``use TOOL``. Like a real
framework it keeps no conversation itself (the caller passes what was said before), runs its tools through a hook
the caller may replace (``call_tool``), and reports the tokens it spent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Tool = Callable[[], str]


@dataclass
class Step:
    """One thing the parrot did: said ``text``, or called ``tool`` and got ``text``."""

    text: str
    tool: str | None = None


@dataclass
class Run:
    """What one call of ``Parrot.run`` did, and the tokens it spent."""

    steps: list[Step]
    input_tokens: int
    output_tokens: int


@dataclass
class Parrot:
    """An agent that repeats what it hears."""

    name: str
    tools: dict[str, Tool] = field(default_factory=dict)
    model: str = "parrot-1"

    def run(self, history: list[str], text: str, call_tool: Callable[[str, Tool], str] | None = None) -> Run:
        """Answer ``text``, after ``history`` (what the user said before, oldest first)."""
        steps = [Step(call_tool(name, tool) if call_tool else tool(), tool=name)
                 for name, tool in self.tools.items() if f"use {name}" in text]
        said = f"{self.name} heard: {text}"
        steps.append(Step(said))
        heard = sum(len(line.split()) for line in [*history, text])
        return Run(steps, input_tokens=heard, output_tokens=len(said.split()))
