"""Targets as sessions (docs/targets/index.md): one small protocol over every kind of agent.

A conversation opens a ``Session`` on the target's ``Adapter``, sends each user message with ``send`` (which
returns only this turn's response messages, in OpenAI format) and closes it. ``session`` holds the protocol;
``registry`` the adapters as the ``evalcli.adapters`` entry points declare them (``AdapterDeclaration``: evalcli's
own in ``builtin``, and those of installed packages, docs/extending.md) and how an agent object is recognised;
``calls`` runs user code under the turn timeout; ``setup`` calls a conversation's setup function
(docs/targets/frameworks.md); each adapter lives in a module of its own (``callable``, ``pydantic_ai``,
``openai_agents``, ``langgraph``) and imports its framework only inside itself. Targets written as a mapping
(docs/targets/index.md) are adapters too (``forms``): ``http`` and ``mastra`` (sharing ``remote``: one aiohttp pool
per run, errors and redaction; ``templates``: the request body's jinja2 templates) and ``model`` (a chat completion
per turn through ``evalcli.llm``).
"""

from __future__ import annotations

from .callable import BadReply
from .calls import TargetCalls, TargetThreads
from .forms import FormAdapter, FormContext, cli_target, make_form_adapter
from .registry import (
    AdapterDeclaration,
    Declared,
    adapter_class,
    declared,
    extra_hint,
    form_class,
    form_names,
    form_of,
    make_adapter,
    recognise,
    settings_of,
)
from .session import (
    DATASET_ONLY_OPTIONS,
    RESERVED_OPTIONS,
    Adapter,
    Calls,
    ConfigProblem,
    ConversationOptions,
    ItemInfo,
    Reply,
    Session,
    Thread,
    TurnFailed,
    TurnRejected,
    TurnTimedOut,
    fresh_thread,
    merge_options,
    options_hint,
)
from .setup import ConversationInfo, Setup, SetupFailed
from .usage import record_target_call

__all__ = [
    "DATASET_ONLY_OPTIONS",
    "RESERVED_OPTIONS",
    "Adapter",
    "AdapterDeclaration",
    "BadReply",
    "Calls",
    "ConfigProblem",
    "ConversationInfo",
    "ConversationOptions",
    "Declared",
    "FormAdapter",
    "FormContext",
    "ItemInfo",
    "Reply",
    "Session",
    "Setup",
    "SetupFailed",
    "TargetCalls",
    "TargetThreads",
    "Thread",
    "TurnFailed",
    "TurnRejected",
    "TurnTimedOut",
    "adapter_class",
    "cli_target",
    "declared",
    "extra_hint",
    "form_class",
    "form_names",
    "form_of",
    "fresh_thread",
    "make_adapter",
    "make_form_adapter",
    "merge_options",
    "options_hint",
    "recognise",
    "record_target_call",
    "settings_of",
]
