"""Targets written as a mapping instead of an import path (docs/targets/index.md): ``http``, ``mastra``, ``model`` and those of
installed packages (an ``AdapterDeclaration`` with ``mapping``, docs/extending.md).

``target: {http: {...}}``, ``target: {mastra: {...}}`` and ``target: {model: NAME, system: ..., ...}`` each
name a ``FormAdapter``: a session adapter like the framework ones, whose "agent object" is built from
its validated settings (``config_model``) rather than imported. ``--target TARGET`` on the command line
is parsed here into the same import path or mapping (``cli_target``), so both reach the one resolution
in ``dataset.load``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from ..errors import TargetError, UsageError
from ..records import record
from ..secrets import remember, url_secrets
from .session import Adapter


@record(frozen=True)
class FormContext:
    """What building a target from its settings may need from the dataset."""

    folder: Path
    """The dataset's folder (relative files such as ``system_file`` are read from it)."""
    resolve: Callable[[str, str], Any]
    """Imports ``module:attribute`` (``resolve(path, what)``) in the dataset's import scope."""


class FormAdapter(Adapter):
    """An adapter whose target is a mapping of settings. ``obj`` is what ``build`` made of them."""

    config_model: ClassVar[type[BaseModel]]
    """The strict model of its settings."""
    nested: ClassVar[bool] = True
    """Settings sit under the form's key (``http: {...}``); ``False``: the mapping itself holds them (``model``)."""

    @classmethod
    def fits(cls, obj: Any) -> bool:
        return False  # never recognised from an object: only named by a mapping

    @classmethod
    def build(cls, config: Any, context: FormContext) -> Any:
        """The target made from validated settings; a mistake raises ``ConfigProblem`` (where, inside them)."""
        return config

    @classmethod
    def describe(cls, config: Any) -> str:
        """The target as runs, tables and reports name it, in ``--target`` syntax, with no secret in it."""
        raise NotImplementedError

    @classmethod
    def secrets(cls, config: Any) -> set[str]:
        """Values of its settings that must never be stored or shown (header values, URL credentials)."""
        return set()

    @classmethod
    def resolved(cls, config: Any, built: Any) -> dict[str, Any]:
        """The settings as the run uses them (after interpolation, with every file they name read), for the
        resolved-configuration fingerprint of ``--resume`` (docs/identity.md; only digests of it are ever stored)."""
        return dict(config.model_dump(mode="json"))


def cli_target(text: str) -> str | dict[str, Any]:
    """``--target TARGET``: an import path, ``model:NAME``, ``mastra:URL#AGENT`` or ``http:URL`` (also ``https://...``),
    as the dataset's ``target`` would be written. Its credentials are secrets from now on, even in a mistyped spec."""
    remember(url_secrets(text))
    spec = text.strip()
    if spec.startswith("model:"):
        name = spec[len("model:"):]
        if not name:
            raise UsageError(f"--target {text}: name the model", "write e.g. --target model:openai/gpt-4o-mini")
        return {"model": name}
    if spec.startswith("mastra:"):
        url, sep, agent = spec[len("mastra:"):].rpartition("#")
        if not sep or not url or not agent:
            raise UsageError(f"--target {text}: a Mastra target is mastra:URL#AGENT",
                             "write e.g. --target mastra:http://127.0.0.1:4111#weatherAgent")
        return {"mastra": {"url": url, "agent": agent}}
    if spec.startswith("http:") and not spec.startswith("http://"):
        spec = spec[len("http:"):]
        if not spec.startswith(("http://", "https://")):  # never read as an import path (http:ftp://x is no module)
            raise UsageError(f"--target {text}: http:URL takes an http:// or https:// URL",
                             "write e.g. --target http:http://127.0.0.1:8000/chat")
    if spec.startswith(("http://", "https://")):
        return {"http": {"url": spec}}
    if ":" not in spec:
        raise UsageError(f"--target {text} is not a target",
                         "give an import path module:attribute, model:NAME, mastra:URL#AGENT or http:URL")
    return spec


def make_form_adapter(cls: type[FormAdapter], spec: str, obj: Any, options: dict[str, Any]) -> FormAdapter:
    """The adapter of a built mapping target, its ``target_options`` checked as for any adapter."""
    if "adapter" in options:
        raise TargetError(f"target_options.adapter does not apply to the {cls.name} target",
                          "remove it: 'adapter' picks how an imported agent object is run")
    problems = cls.option_problems(obj, options)
    if problems:
        raise TargetError(f"target_options for {spec}: {'; '.join(problems)}", "remove the options the target does not take")
    return cls(spec, obj, options)
