"""What a dataset file may hold: strict pydantic models of its YAML (unknown keys are errors), the one statement of
its shape (docs/datasets.md).

The JSON Schema of ``evalcli schema`` is generated from these models (``scaffold.dataset_schema``), and ``load``
validates every file with them. ``load`` words the mistakes of some keys itself, with their lines and a rewrite
(``WORDED``); a mistake pydantic finds there that ``load``'s words miss is still reported, in pydantic's words, so
the validator is never looser than the schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ..errors import not_blank
from ..tools import UNMOCKED
from .fields import Gate, Interpolable, MessageFile, Scorer, Target, ToolsFile
from .located import FORM_KEYS

NonEmpty = Field(min_length=1)
Absent = SkipJsonSchema[None]
"""A key that may be left out but, once written, holds its value: ``None`` is absent (the schema does not allow
``null``, and ``load`` words the mistake)."""


class TurnFile(BaseModel):
    """One turn of a ``turns`` item: what the user says (``input``), or the value that resumes the interrupt the
    previous turn ended in (``resume``)."""

    model_config = ConfigDict(extra="forbid", strict=True, title="Turn",
                              json_schema_extra={"oneOf": [{"required": ["input"]}, {"required": ["resume"]}]})
    input: str | None = Field(default=None, description="What the user says on this turn.")
    resume: Any = Field(default=None, description="Instead of input: any value, sent as Command(resume=...) to the "
                                                  "interrupt the previous turn ended in (LangGraph).",
                        json_schema_extra={"not": {"type": "null"}})
    gates: list[Gate] | None = Field(default=None, description="Gates on this turn's own output.")
    scorers: list[Scorer] | None = Field(default=None, description="Scorers on this turn's own output.")
    tools: ToolsFile | None = Field(default=None, description="Tool mocks for this turn: per tool, they replace the "
                                                              "item's (docs/hermetic.md).")


class LimitsFile(BaseModel):
    """``limits:`` (docs/reliability.md): a conversation reaching one stops there and is ``limited``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    # ``Interpolable`` around ``| None``: a variable whose value YAML reads as null leaves the key out, as ``turns:``
    turns: Annotated[Annotated[int, Field(ge=1)] | None, Interpolable] = Field(default=None, description="User messages answered "
                                                                                              "at most.")
    tokens: Annotated[Annotated[int, Field(ge=1)] | None, Interpolable] = Field(
        default=None, description="Tokens (in and out) of the conversation's LLM calls (the target's and the simulated "
                                  "user's).")
    cost: Annotated[Annotated[float, Field(gt=0)] | None, Interpolable] = Field(default=None, description="US dollars of the "
                                                                                               "conversation's LLM calls.")
    seconds: Annotated[Annotated[float, Field(gt=0)] | None, Interpolable] = Field(default=None, description="Seconds the "
                                                                                                 "conversation may take.")


OnLimit = Literal["error", "score"]
Unmocked = Literal[UNMOCKED]  # type: ignore[valid-type]
Label = Annotated[float, Field(ge=0, le=1), Interpolable] | Literal["pass", "fail"]


class SimulateFile(BaseModel):
    """A simulated user: the ``simulate:`` block of an item."""

    model_config = ConfigDict(extra="forbid", strict=True)
    goal: Annotated[str, AfterValidator(not_blank("goal must not be empty: write what the simulated user wants"))] = Field(
        description="What the simulated user wants from the conversation (required; the agent never sees it).")
    persona: str | None = Field(default=None, description="Who the user is and how they write.")
    facts: dict[str, Any] | None = Field(default=None, description="What the user knows, shared only when the agent "
                                                                   "asks (name: value).")
    opening: Annotated[str | None, AfterValidator(not_blank(
        "opening must not be empty: write the first message, or leave 'opening' out"))] = Field(
        default=None, description="A scripted first user message; it counts toward max_turns.")
    max_turns: Annotated[int, Field(ge=1, le=50), Interpolable] = Field(
        default=8, description="User messages at most, the opening included (1..50).")
    model: str | None = Field(default=None, min_length=1,
                              description="The simulator's litellm model (default: $EVALCLI_SIMULATOR_MODEL, else the "
                                          "judge default).")


class ItemFile(BaseModel):
    """One conversation: exactly one of ``input``, ``inputs``, ``turns``, ``simulate`` or ``transcript``. A form's key,
    once written, holds its form (``input: null`` is a mistake, not an absent key)."""

    model_config = ConfigDict(extra="forbid", strict=True, title="Item",
                              json_schema_extra={"oneOf": [{"required": [key]} for key in FORM_KEYS]})
    id: Annotated[str | int | None, AfterValidator(not_blank(
        "id must not be empty: name the conversation, or leave 'id' out (its position is then its id)"))] = Field(
        default=None, description="Unique id; defaults to the item's position.")
    tags: list[Annotated[str, AfterValidator(not_blank("a tag must not be empty: write a word, or remove it"))]] = Field(
        default_factory=list, description="Labels for --filter and reports.")
    input: str | Absent = Field(default=None, description="A single-turn question.")
    inputs: Annotated[list[str], NonEmpty] | Absent = Field(default=None, description="Several turns on one thread, scored as "
                                                                             "a whole.")
    turns: Annotated[list[TurnFile], NonEmpty] | Absent = Field(default=None, description="Several turns, each with its own "
                                                                                 "gates and scorers.")
    simulate: SimulateFile | Absent = Field(default=None, description="An LLM plays the user toward a goal "
                                                             "(docs/simulated-users.md).")
    transcript: Annotated[list[MessageFile], NonEmpty] | Absent = Field(
        default=None, description="A recorded conversation (OpenAI-format messages: user, assistant, tool), scored as "
                                  "it is: no target is called (docs/recorded.md).")
    messages: Annotated[list[MessageFile], NonEmpty] | Absent = Field(
        default=None, description='The same as \'transcript\' (the key of JSONL exports: {"id": ..., "messages": [...]}).')
    labels: Annotated[dict[str, Label], Field(min_length=1)] | Absent = Field(
        default=None, description="What a person decided each scorer should give this conversation: {SCORER_ID: a "
                                  "number from 0 to 1, or pass/fail}; read by 'evalcli calibrate'.")
    ground_truth: Any = Field(default=None, description="Passed to scorers unchanged.")
    expected_outcome: str | None = Field(default=None, description="What should have happened; read by "
                                                                   "goal_achieved.")
    target_options: dict[str, Any] | None = Field(default=None, description="This conversation's options, merged over "
                                                                            "the dataset's key by key (docs/datasets.md).")
    metadata: dict[str, Any] | None = Field(default=None, description="Free data about the conversation, passed to "
                                                                      "setup, read by an http target's templates and "
                                                                      "shown by 'show'.")
    tools: ToolsFile | None = Field(default=None, description="Tool mocks for this conversation, over the dataset's "
                                                              "per tool (docs/hermetic.md).")
    unmocked: Unmocked | None = Field(default=None, description="live (default) or error: what a tool call no mock "
                                                                "answers does in this conversation.")
    limits: LimitsFile | None = Field(default=None, description="This conversation's limits, key by key over the "
                                                                "dataset's (docs/reliability.md).")
    on_limit: OnLimit | None = Field(default=None, description="'error' (default): a limited conversation counts as "
                                                               "errored; 'score': what was played is scored.")


class DatasetFile(BaseModel):
    """The top level of a dataset file."""

    model_config = ConfigDict(extra="forbid", strict=True)
    target: Target | None = Field(
        default=None, description="The agent under test: an import path 'module:attribute', or a mapping with 'http', "
                                  "'mastra', 'model' or 'a2a' (docs/targets); not needed when every item is a recorded transcript.")
    target_options: dict[str, Any] = Field(default_factory=dict, description="Options for the agent's call "
                                                                              "(and memory, adapter, keep_checkpointer, "
                                                                              "setup).")
    target_has_memory: Annotated[bool | None, Interpolable] = Field(default=None, description="Whether the target keeps "
                                                                                              "its own history per "
                                                                      "thread (default: it does when it has a "
                                                                      "'memory' attribute); true silences the memory "
                                                                      "warning.")
    concurrency: Annotated[int, Field(ge=1, le=10_000), Interpolable] = Field(
        default=4, description="Conversations run in parallel.")
    gates: list[Gate] | None = Field(default=None, description="Each must average exactly >= 1.0 over items.")
    scorers: list[Scorer] | None = Field(default=None, description="Tracked scorers, optionally with a threshold.")
    data: Annotated[list[ItemFile], NonEmpty] | None = Field(default=None, description="The conversations.")
    data_file: str | None = Field(default=None, description="A JSONL file of items (one a line), relative to this file.")
    description: str | None = Field(default=None, description="Free text, for people.")
    tools: ToolsFile | None = Field(default=None, description="Tool mocks (returns, raises, sequence, when, delay) by "
                                                              "tool name, and a tape to replay (replay, match), for "
                                                              "every conversation (docs/hermetic.md).")
    unmocked: Unmocked | None = Field(default=None, description="live (default): a tool call no mock answers runs the "
                                                                "real tool; error: it is the conversation's error.")
    limits: LimitsFile | None = Field(default=None, description="Every conversation's limits: turns, tokens, cost, "
                                                                "seconds (docs/reliability.md).")
    on_limit: OnLimit | None = Field(default=None, description="'error' (default): a limited conversation counts as "
                                                               "errored; 'score': what was played is scored.")
    secrets: list[str] | None = Field(default=None, description="Environment variables whose values are secrets "
                                                                "whatever their names (never stored or shown).")
