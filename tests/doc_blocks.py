"""The fenced blocks of the docs (README.md and docs/**/*.md) and what their markers ask of them.

A marker is an HTML comment on the line right before a block's opening fence (invisible in the built site):

    <!-- example: run exit=1 file=eval.yaml -->

- ``run``: a dataset run offline with ``evalcli run``, which must exit with ``exit`` (default 0), after
  ``evalcli validate`` passed. Every complete dataset (a YAML block with ``target`` and ``data``, or
  ``data_file``, or only recorded transcripts) is validated, marked or not: ``validate`` (the default) says
  so, and with ``exit=2`` expects validation to fail.
- ``sh``: a shell block run with bash in a temporary folder holding a copy of the repository's
  ``datasets/``, ``examples/`` and ``scorers.yaml``; the script must exit with ``exit`` (default 0).
- ``file=NAME``: the block is written as NAME into the folders of the examples that follow it on the same page
  (a dataset with a file name is validated under that name).
- ``needs=mastra``: the example needs a Mastra server (Node); ``MASTRA_URL`` points at one.
- ``needs=llama-index``, ``needs=crewai``, ``needs=strands``: the example runs in the venv holding that extra
  (``evalcli[llama-index]``, ``evalcli[crewai]``, ``evalcli[strands]``; tests/framework_venvs.py); a shell example's
  ``python`` is that venv's
- ``needs=google_adk``: the example needs that framework installed (an optional extra; skipped without it).
- ``needs=demo_plugin``: the example needs the example plugin of docs/extending.md installed
  (``tests/plugin_packages.demo_plugin``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

MARKER = re.compile(r"^\s*<!-- example: (?P<words>.*?) -->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
KINDS = {"run", "validate", "sh"}
KEYS = {"exit", "file", "needs"}
NEEDS = {"mastra", "demo_plugin", "llama-index", "google_adk", "strands", "crewai"}


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One fenced block: where it opens, its language, its text (dedented) and its marker's words."""

    doc: Path
    line: int
    lang: str
    text: str
    words: tuple[str, ...] = ()
    marker_line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    @cached_property
    def options(self) -> dict[str, str]:
        return dict(word.split("=", 1) for word in self.words if "=" in word)

    @property
    def kind(self) -> str | None:
        kinds = [word for word in self.words if "=" not in word]
        return kinds[0] if kinds else None

    @property
    def exit(self) -> int:
        return int(self.options.get("exit", "0"))

    @property
    def file(self) -> str | None:
        return self.options.get("file")

    @property
    def needs(self) -> set[str]:
        return set(filter(None, self.options.get("needs", "").split(",")))

    @cached_property
    def dataset(self) -> dict[str, Any] | None:
        """The block as a dataset, when it is a complete one."""
        if self.lang not in ("yaml", "yml"):
            return None
        try:
            loaded = yaml.safe_load(self.text)
        except yaml.YAMLError:
            return None
        if not isinstance(loaded, dict):
            return None
        data = loaded.get("data")
        recorded = isinstance(data, list) and bool(data) and all(
            isinstance(item, dict) and ("transcript" in item or "messages" in item) for item in data)
        complete = "data_file" in loaded or (isinstance(data, list) and ("target" in loaded or recorded))
        return loaded if complete else None

    def problems(self) -> list[str]:
        """What is wrong with the marker itself (unknown words, a kind on a block it does not fit)."""
        wrong = [f"unknown marker word {w!r}" for w in self.words
                 if ("=" in w and w.split("=", 1)[0] not in KEYS) or ("=" not in w and w not in KINDS)]
        wrong += [f"unknown need {n!r}" for n in self.needs - NEEDS]
        if "exit" in self.options and not self.options["exit"].isdigit():
            wrong.append(f"exit={self.options['exit']} is not a number")
        if self.kind == "sh" and self.lang not in ("sh", "bash"):
            wrong.append("'sh' marks a ```sh block")
        if self.kind in ("run", "validate") and self.dataset is None:
            wrong.append(f"'{self.kind}' marks a complete dataset (a YAML block with target and data)")
        if self.words and not self.kind and not self.file:
            wrong.append("a marker says what to do: run, validate, sh or file=NAME")
        return wrong


@dataclass
class Page:
    doc: Path
    blocks: list[Block] = field(default_factory=list)
    stray_markers: list[int] = field(default_factory=list)

    def files_before(self, block: Block) -> dict[str, str]:
        """The files the page declared before ``block`` (a later one of the same name wins)."""
        return {b.file: b.text for b in self.blocks if b.file and b.line < block.line}


def read_page(doc: Path) -> Page:
    lines = doc.read_text(encoding="utf-8").splitlines()
    page = Page(doc)
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        marker = MARKER.match(lines[number])
        if marker and not (number + 1 < len(lines) and FENCE.match(lines[number + 1])):
            page.stray_markers.append(number + 1)
        if not opening:
            number += 1
            continue
        indent = opening["indent"]
        end = number + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[number + 1:end]]
        before = MARKER.match(lines[number - 1]) if number else None
        page.blocks.append(Block(doc, number + 1, opening["lang"], "\n".join(body) + "\n",
                                 tuple(before["words"].split()) if before else (), number if before else None))
        number = end + 1
    return page


def pages() -> list[Page]:
    return [read_page(doc) for doc in doc_files()]
