"""A dataset's secrets (docs/secrets.md): the values of the variables its ``secrets:`` names, each secret a variable
held, and problems worded without any of them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from ..errors import Problem
from ..secret_references import references
from ..secrets import Redactor
from .yamlsrc import Interpolated


def declared_secrets(names: list[str], used: Interpolated) -> set[str]:
    """The values of the variables a dataset's ``secrets:`` names: as the environment holds them, and as they were
    interpolated (a default included)."""
    found: set[str] = set()
    for name in names:
        found |= used.values.get(name, set())
        value = os.environ.get(name)
        if value:
            found.add(value)
    return {v for v in found if v}


def secret_variables(declared: list[str], used: Interpolated, secret_values: set[str]) -> list[tuple[str, str]]:
    """(name, value) of every secret a variable held: as interpolated, and as the environment holds a declared one (the
    response cache and stored digests write it as ``${NAME}``: evalcli.secret_references)."""
    found = [(name, value) for name, values in used.values.items() for value in values if value in secret_values]
    return found + [(name, os.environ[name]) for name in declared if os.environ.get(name)]


def redacted(problems: list[Problem], secrets: Iterable[str] = ()) -> list[Problem]:
    """The problems with every secret value (of the environment, and ``secrets``) replaced: a message quotes what the
    dataset says, e.g. an id made of an interpolated argument. A secret known by its variable reads ``${NAME}``, as
    the dataset writes it, so a hint that rewrites an entry can be copied back (docs/secrets.md); any other is
    ``[redacted]``."""
    redact, refs = Redactor(extra=secrets), references()

    def hidden(text: str) -> str:
        return redact(refs.write(text, escape=False))

    return [replace(p, message=hidden(p.message), hint=hidden(p.hint)) for p in problems]
