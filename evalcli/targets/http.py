"""The ``http`` target (docs/targets/http.md): an agent behind an HTTP endpoint, in any language.

Each turn is one request (``POST`` by default) to ``url`` with the JSON ``body``, whose strings are
jinja2 templates (``templates``) over this turn's ``input``, the conversation's ``thread``, ``resource``,
``history`` and the item's ``item_id``, ``turn`` and ``metadata``; ``url`` may use them too. The JSON
reply is read with JMESPath (``response.text`` or ``response.messages``, optionally ``response.usage``),
or handed to ``response.transform`` (``module:function``). Every request of a run shares one aiohttp
connection pool. Header values and URL credentials are never stored or shown.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import EvalcliError, describe
from ..messages import Message
from ..records import record
from ..secrets import Redactor, redact_url
from ..tools import CURRENT
from .callable import BadReply, normalise
from .forms import FormContext
from .remote import (
    Answer,
    Pool,
    RemoteAdapter,
    ReplyFailed,
    check_headers,
    parsed,
    quote,
    record_usage,
    target_redactor,
    tokens,
)
from .replies import History, TurnReplies
from .session import Calls, ConfigProblem, ConversationOptions, ItemInfo, Thread, TurnSession, fresh_thread
from .templates import MEMORY_NAMES, Body, compile_string, to_json

DEFAULT_BODY = {"input": "{{ input }}"}


class ResponseConfig(BaseModel):
    """How the reply is read: JMESPath expressions over its JSON, or a function of yours."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(default=None, description="JMESPath to the assistant's text (e.g. 'reply').")
    messages: str | None = Field(default=None, description="JMESPath to OpenAI-format response messages.")
    usage: str | dict[str, str] | None = Field(
        default=None, description="JMESPath to {prompt_tokens, completion_tokens}, or a mapping of the two to JMESPaths.")
    transform: str | None = Field(default=None, description="module:function turning the parsed reply (JSON, or text "
                                                            "when it is not JSON) into a string or messages.")
    history: History = Field(default="detect", description="full: every reply holds the whole conversation; turn: only "
                                                           "this turn's messages; detect (default): told by the reply.")

    @model_validator(mode="after")
    def one_reader(self) -> ResponseConfig:
        given = [name for name in ("text", "messages", "transform") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of 'text', 'messages' or 'transform', not {' and '.join(given)}")
        if not given and "history" in self.model_fields_set:
            self.text = "text"
        elif not given:
            raise ValueError("say how to read the reply: 'text: PATH', 'messages: PATH' (JMESPath) or "
                             "'transform: module:function'")
        if self.usage is not None and self.transform is not None:
            raise ValueError("'usage' reads the JSON reply beside 'text' or 'messages'; a transform returns "
                             "{'messages': [...], 'usage': {...}} instead")
        return self


class HttpConfig(BaseModel):
    """``target: {http: {...}}``."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, description="The endpoint (templates allowed, e.g. /sessions/{{ thread }}).")
    method: Literal["POST", "PUT", "PATCH", "GET"] = Field(default="POST", description="HTTP method (default POST).")
    headers: dict[str, str | int | float] = Field(default_factory=dict, description="Request headers (never stored or "
                                                                                     "shown).")
    body: Any = Field(default_factory=lambda: dict(DEFAULT_BODY), description="JSON body; its strings are jinja2 "
                                                                              "templates.")
    response: ResponseConfig = Field(default_factory=lambda: ResponseConfig(text="text"),
                                     description="How to read the reply (default: {text: text}).")
    timeout: float = Field(default=60, gt=0, description="Seconds per request (default 60).")

    @field_validator("method", mode="before")
    @classmethod
    def upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("url")
    @classmethod
    def http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"'{redact_url(value)}' is not an http:// or https:// URL")
        return value


@record(frozen=True)
class Reader:
    """The compiled response mapping."""

    text: Any = None
    messages: Any = None
    usage: Any = None
    transform: Callable[[Any], Any] | None = None
    source: str = ""
    """How it reads, for error messages (``text: reply``)."""


@record(frozen=True)
class HttpTarget:
    """An ``http`` target, built: compiled templates and response mapping, its secrets."""

    config: HttpConfig
    url: Any
    body: Body
    headers: dict[str, str]
    reader: Reader
    secrets: Redactor


def _jmespath(expression: str, at: tuple[str | int, ...]) -> Any:
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        first = str(exc).strip().splitlines()[0].rstrip(":") if str(exc).strip() else type(exc).__name__
        raise ConfigProblem(at, f"'{expression}' is not a JMESPath expression: {first}",
                            "write a JMESPath such as 'reply', 'data.messages' or 'choices[0].message.content'") from None


class HttpAdapter(RemoteAdapter):
    """``target: {http: {...}}``: one request per turn."""

    name = "http"
    run_call = "the http target"
    memory_hint = "send the conversation's thread or history, e.g. body: {session_id: '{{ thread }}'}"
    config_model = HttpConfig
    tools_hint = ("remove 'tools:', or send the plan to a service that honours it: write '{{ tools }}' in the "
                  "target's body (e.g. body: {input: '{{ input }}', tools: '{{ tools }}'})")

    @classmethod
    def build(cls, config: Any, context: FormContext) -> HttpTarget:
        assert isinstance(config, HttpConfig)
        if config.method == "GET" and "body" in config.model_fields_set:
            raise ConfigProblem(("body",), "a GET request has no body",
                                "put what the agent needs in the URL (templates allowed), or use POST")
        check_headers(config)
        response = config.response
        if response.transform is not None:
            try:
                function = context.resolve(response.transform, "response transform")
            except EvalcliError as exc:
                raise ConfigProblem(("response", "transform"), exc.message, exc.hint) from None
            if not callable(function):
                raise ConfigProblem(("response", "transform"), f"'{response.transform}' is not callable",
                                    "point at a function taking the parsed reply")
            reader = Reader(transform=function, source=f"transform: {response.transform}")
        else:
            usage: Any = None
            if isinstance(response.usage, str):
                usage = _jmespath(response.usage, ("response", "usage"))
            elif isinstance(response.usage, dict):
                unknown = [k for k in response.usage if k not in ("prompt_tokens", "completion_tokens")]
                if unknown:
                    raise ConfigProblem(("response", "usage", unknown[0]), f"unknown key '{unknown[0]}' in usage",
                                        "usage maps prompt_tokens and completion_tokens to JMESPaths")
                usage = {k: _jmespath(v, ("response", "usage", k)) for k, v in response.usage.items()}
            if response.text is not None:
                reader = Reader(text=_jmespath(response.text, ("response", "text")), usage=usage,
                                source=f"text: {response.text}")
            else:
                assert response.messages is not None
                reader = Reader(messages=_jmespath(response.messages, ("response", "messages")), usage=usage,
                                source=f"messages: {response.messages}")
        headers = {name: str(value) for name, value in config.headers.items()}
        if config.method != "GET":
            headers.setdefault("Content-Type", "application/json")
        return HttpTarget(config, compile_string(config.url, ("url",)), Body.compile(config.body, ("body",)), headers,
                          reader, target_redactor(config))

    @classmethod
    def describe(cls, config: Any) -> str:
        assert isinstance(config, HttpConfig)
        return f"http:{redact_url(config.url)}"

    def prepare(self) -> None:
        target: HttpTarget = self.obj
        self.target = target
        self.pool = Pool()
        names = set(target.body.names)
        if not isinstance(target.url, str):
            names |= target.url.names
        self.remembers = bool(names & MEMORY_NAMES)
        self.keeps_history = "history" in names
        """Only templates that read ``history`` need it kept."""
        self.tools_mockable = self.plan_sent = "tools" in names
        """A body that sends the conversation's tool plan (``{{ tools }}``) lets ``tools:`` reach the service."""
        self.shown_url = redact_url(target.config.url)
        self.missing_usage = 0
        """Replies whose ``usage`` path found no usage (said once, after the run)."""
        self.static_url = parsed(target.url) if isinstance(target.url, str) else None

    @property
    def has_memory(self) -> bool:
        """Only a request that carries the thread, the resource or the history can tell conversations apart."""
        return self.remembers

    @property
    def outside_hint(self) -> str:
        if self.plan_sent:
            return ("the service was sent the plan ({{ tools }}): a tool message it answered from the plan says "
                    "\"source\": \"mock\" (or \"replay\")")
        return ("its tools run in the service: send it the plan with '{{ tools }}' in the body and have it answer "
                "from it")

    @property
    def reports_tool_calls(self) -> bool | None:
        """A reply read as text (``response.text``) never shows a tool call; a transform's may."""
        reader = self.target.reader
        return True if reader.messages is not None else None if reader.transform is not None else False

    def uncontrolled(self) -> str | None:
        if self.plan_sent or self.reports_tool_calls is not False:
            return None
        return (f"the http target's tools run in the service, which is not sent the plan ({{{{ tools }}}} is not in "
                f"its body), and its replies are read as text ({self.target.reader.source}), so a tool it runs live "
                "cannot be seen: send it the plan, or read the reply's messages (response: {messages: PATH})")

    def usage_missing(self) -> None:
        self.missing_usage += 1

    def run_warnings(self) -> list[str]:
        """The ``usage`` path that found nothing in some replies: their usage is missing (one line per run)."""
        if not self.missing_usage:
            return []
        count, self.missing_usage = self.missing_usage, 0
        return [f"target {self.spec}: response.usage found no usage in {count} repl{'y' if count == 1 else 'ies'}; "
                "their tokens are not counted (fix the usage path, or remove it)"]

    def run_counts(self) -> dict[str, int]:
        count, self.missing_usage = self.missing_usage, 0
        return {"missing_usage": count} if count else {}

    def add_run_counts(self, counts: Mapping[str, int]) -> None:
        self.missing_usage += counts.get("missing_usage", 0)

    def thread(self, options: Mapping[str, Any], *, multi_turn: bool) -> Thread:
        """A fresh thread for every conversation, single-turn ones included (docs/targets/index.md): a service that keys its
        history by ``{{ thread }}`` never gives one item another's messages."""
        return fresh_thread(options)

    def open(self, *, multi_turn: bool, calls: Calls, conversation: ConversationOptions | None = None,
             item: ItemInfo | None = None) -> HttpSession:
        thread = conversation.thread if conversation is not None else self.thread(self.options, multi_turn=multi_turn)
        return HttpSession(self, thread, item or ItemInfo("", {}), calls)



class HttpSession(TurnSession["HttpAdapter"]):
    """One conversation: its history, sent to the templates each turn."""

    def __init__(self, adapter: HttpAdapter, thread: Thread, item: ItemInfo, calls: Calls) -> None:
        super().__init__(adapter, thread, calls)
        self.item = item
        self.history: list[Message] = []
        self.replies = TurnReplies(adapter.target.config.response.history)
        """What the earlier turns recorded (a reply that repeats them has them dropped; docs/targets/http.md)."""
        self.turn = 0

    async def _turn(self, text: str) -> list[Message]:
        adapter, target = self.adapter, self.adapter.target
        turn, self.turn = self.turn, self.turn + 1
        context = {"input": text, "thread": self.thread_id, "resource": self.resource_id, "item_id": self.item.id,
                   "turn": turn, "metadata": self.item.metadata, "history": list(self.history)}
        if adapter.tools_mockable:
            plan = CURRENT.get()
            context["tools"] = plan.as_json() if plan is not None else None
        if isinstance(target.url, str):
            url, shown = adapter.static_url, adapter.shown_url
        else:
            url = str(target.url.render(context))
            shown = redact_url(url)
        body = None if target.config.method == "GET" else to_json(target.body.render(context))
        started = time.perf_counter()
        answer = await adapter.pool.request(target.config.method, url, shown, headers=target.headers, body=body,
                                            timeout=target.config.timeout, secrets=target.secrets)
        messages, usage = await _read(target, answer, f"{target.config.method} {shown}", adapter.usage_missing)
        sent, messages = self.replies.take(messages)
        if usage is not None:
            record_usage(adapter.spec, usage[0], usage[1], started, turn)
        if adapter.keeps_history:  # the service's own messages, as it sent them (a reply echoing them is history)
            self.history = [*self.history, {"role": "user", "content": text}, *sent]
        return messages

    async def close(self) -> None:
        self.history = []


async def _read(target: HttpTarget, answer: Answer, where: str,
                missing_usage: Callable[[], None] | None = None) -> tuple[list[Message], tuple[int, int] | None]:
    """The reply's response messages and (prompt, completion) tokens, as the target's mapping reads them."""
    reader = target.reader

    def unreadable(why: str) -> ReplyFailed:
        return ReplyFailed(f"the reply of {where} cannot be read ({reader.source}): {why}: "
                           f"{quote(answer.text, target.secrets)}")

    why = "it is not JSON"
    try:
        data: Any = answer.json()
        is_json = True
    except RecursionError:  # JSON, nesting deeper than Python reads (about 1,000 levels)
        data, is_json, why = answer.text, False, "its JSON nests arrays and objects too deeply to be read"
    except ValueError as exc:  # not JSON, or JSON Python will not read (an integer past its digit limit)
        data, is_json = answer.text, False
        if not isinstance(exc, json.JSONDecodeError):
            why = f"its JSON cannot be read ({describe(exc)})"
    if reader.transform is not None:
        value = reader.transform(data)
        if inspect.isawaitable(value):
            value = await value
        usage = _usage(value.get("usage")) if isinstance(value, dict) and "usage" in value else None
        try:
            return normalise(value), usage
        except BadReply as exc:
            raise unreadable(f"the transform returned something else ({exc})") from None
    if not is_json:
        raise unreadable(why)
    usage = None
    if reader.usage is not None:
        try:
            found = ({k: _search(e, data) for k, e in reader.usage.items()} if isinstance(reader.usage, dict)
                     else _search(reader.usage, data))
        except Unreadable:
            found = None
        usage = _usage(found)
        if usage is None and missing_usage is not None:
            missing_usage()
    try:
        if reader.text is not None:
            value = _search(reader.text, data)
        else:
            value = _search(reader.messages, data)
    except Unreadable as exc:
        raise ReplyFailed(f"the reply cannot be read at `{exc.expression}`: {exc.why} ({where} answered: "
                          f"{quote(answer.text, target.secrets)})") from None
    if reader.text is not None:
        if value is None:
            raise unreadable("nothing is there")
        if isinstance(value, (dict, list, bool)):
            kind = "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) else \
                f"a boolean ({json.dumps(value)})"
            raise unreadable(f"it is {kind}, not text")
        return [{"role": "assistant", "content": value if isinstance(value, str) else json.dumps(value)}], usage
    if not isinstance(value, list):
        raise unreadable("nothing is there" if value is None else f"it is {type(value).__name__}, not a list of messages")
    try:
        return normalise(value), usage
    except BadReply as exc:
        raise unreadable(str(exc)) from None


class Unreadable(Exception):
    """A JMESPath expression that fails on the reply (a function given the wrong type, ...)."""

    def __init__(self, expression: str, why: str) -> None:
        super().__init__(why)
        self.expression = expression
        self.why = why


def _search(compiled: Any, data: Any) -> Any:
    """``compiled.search(data)``; its failure an ``Unreadable`` naming the expression and what went wrong."""
    from jmespath.exceptions import JMESPathError

    try:
        return compiled.search(data)
    except JMESPathError as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise Unreadable(str(getattr(compiled, "expression", "")), why) from None


def _usage(value: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens from ``{prompt_tokens, completion_tokens}`` (or ``input_tokens``/``output_tokens``,
    ``inputTokens``/``outputTokens``)."""
    if not isinstance(value, dict):
        return None
    prompt = completion = None
    for key in ("prompt_tokens", "input_tokens", "inputTokens"):
        if value.get(key) is not None:
            prompt = value[key]
            break
    for key in ("completion_tokens", "output_tokens", "outputTokens"):
        if value.get(key) is not None:
            completion = value[key]
            break
    if prompt is None and completion is None:
        return None
    return tokens(prompt), tokens(completion)
