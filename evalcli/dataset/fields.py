"""The typed parts of a dataset file whose shape is declared elsewhere in evalcli: a gate or scorer reference (its
forms come from the scorer kinds' declarations), a target (from the mapping forms' settings models), a recorded
message and a ``tools:`` block (docs/datasets.md, "Every key"; docs/yaml.md).

``files``' models use them as field types, so the JSON Schema of ``evalcli schema`` is generated from the models
that validate datasets. A reference or a target is validated by ``references`` and ``target`` (which word each
mistake with its line); its type here only says, in the schema, what it may be.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, JsonValue
from pydantic.json_schema import JsonSchemaValue, SkipJsonSchema
from pydantic_core import CoreSchema, core_schema

from ..tools import MATCHES
from .written import as_written as as_written
from .yamlvalues import typed

WHOLE_INTERPOLATION = r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}$"
"""In the JSON Schema, the text a key that wants a number or true/false also accepts: one ``${NAME}`` or
``${NAME:-default}`` and nothing else (its value is known only when the dataset is loaded)."""


class Interpolable:
    """A number or true/false (``Annotated[int, Field(ge=1), Interpolable]``) that may also be written wholly as one
    interpolation: its value, read as YAML reads it written in its place (``yamlvalues.typed``), must then be of the type
    (``${CONC:-4}`` is 4; ``${CONC:-four}`` is text, refused). In the schema: the type, or ``WHOLE_INTERPOLATION``.

    Every key of a dataset model that wants a number or true/false is declared so (tests/test_schema_agreement.py
    checks it); a key that wants text takes an interpolation's text as it is."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(typed, handler(source))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return interpolable(handler(schema))


def interpolable(schema: JsonSchemaValue) -> JsonSchemaValue:
    """A JSON Schema of a number or true/false that also accepts text wholly one interpolation."""
    return {"anyOf": [schema, {"type": "string", "pattern": WHOLE_INTERPOLATION}]}


TYPED = frozenset({"integer", "number", "boolean"})


def _options(schema: Any) -> list[Any]:
    if isinstance(schema, dict) and "anyOf" in schema:
        return [o for option in schema["anyOf"] for o in _options(option)]
    return [schema]


def interpolable_keys(schema: Any) -> Any:
    """A model's JSON Schema not declared with ``Interpolable`` (a scorer kind's arguments, a target form's settings),
    with every key that wants a number or true/false, and no text, also taking a whole interpolation, as
    ``as_written`` reads it."""
    if isinstance(schema, list):
        return [interpolable_keys(value) for value in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: interpolable_keys(value) for key, value in schema.items()}
    for key, prop in list(result.get("properties", {}).items()):
        types = {o.get("type") for o in _options(prop) if isinstance(o, dict)}
        if types & TYPED and "string" not in types:
            result["properties"][key] = interpolable(prop)
    return result


SCORER_REF = "ScorerRef"
GATE_REF = "GateRef"
TARGET = "Target"
DEFS = "#/$defs/"
DECLARED = "x-evalcli-declared"


class _Declared:
    """A value validated elsewhere (anything passes here); in the schema, a reference to the definition
    ``with_definitions`` adds under ``name``."""

    name = ""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return handler(source)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {DECLARED: cls.name}  # pydantic resolves a "$ref" itself: ``with_definitions`` writes it


class ScorerRef(_Declared):
    """A scorer: a name (registered, or a check without arguments), an inline ``{kind: ARG}``, or the wrapper
    ``{scorer: ..., threshold: ..., id: ...}``."""

    name = SCORER_REF


class GateRef(_Declared):
    """A gate: as a scorer, without a threshold (a gate must average 1.0)."""

    name = GATE_REF


class TargetRef(_Declared):
    """The agent under test: an import path, or one of the mapping forms."""

    name = TARGET


Scorer = Annotated[Any, ScorerRef]
Gate = Annotated[Any, GateRef]
Target = Annotated[str | dict[str, Any], TargetRef]


def with_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON Schema with each declared part (``ScorerRef``, ``GateRef``, ``TargetRef``) a ``$ref`` to its
    definition, and the definitions added."""
    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if DECLARED in node:
                return {"$ref": DEFS + node[DECLARED]}
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    resolved.setdefault("$defs", {}).update(definitions())
    return resolved


def definitions() -> dict[str, Any]:
    """The definitions ``ScorerRef``, ``GateRef`` and ``TargetRef`` point at, from the kinds' and forms' own
    declarations (and the definitions those need)."""
    from ..scorers import all_kinds

    plain = [{"type": "string", "description": "A scorer registered in scorers.yaml, or a check without arguments."},
             *(interpolable_keys(kind.schema()) for kind in all_kinds())]
    unit = interpolable({"type": "number", "minimum": 0, "maximum": 1})
    threshold = {"anyOf": [unit, {"type": "object", "properties": {"min": unit, "max": unit},
                                  "additionalProperties": False, "minProperties": 1}]}
    bar = {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
        "min_kappa": interpolable({"type": "number", "minimum": -1, "maximum": 1}),
        "min_labels": interpolable({"type": "integer", "minimum": 1}),
        "min_accuracy": unit}, "description": "What the judge's latest calibration must show before a run gates on "
                                              "it (docs/judges.md#calibrated-gates)."}
    defs: dict[str, Any] = {"Threshold": threshold, "Calibrated": bar}
    defs[SCORER_REF] = {"anyOf": [*plain, {"type": "object", "properties": {
        "scorer": {"anyOf": plain}, "threshold": {"$ref": DEFS + "Threshold"}, "id": {"type": "string"}},
        "required": ["scorer"], "additionalProperties": False}]}
    defs[GATE_REF] = {"anyOf": [*plain, {"type": "object", "properties": {
        "scorer": {"anyOf": plain}, "id": {"type": "string"}, "calibrated": {"$ref": DEFS + "Calibrated"}},
        "required": ["scorer"], "additionalProperties": False}]}
    defs[TARGET] = _target(defs)
    return defs


def _target(defs: dict[str, Any]) -> dict[str, Any]:
    """An import path, or one of the mapping forms (docs/targets), each from its adapter's settings model."""
    from ..targets import form_class, form_names

    forms: list[dict[str, Any]] = [{"type": "string", "description": "Import path 'module:attribute' of the agent."}]
    for name in form_names():  # evalcli's own, then those of installed packages (docs/extending.md)
        cls = form_class(name)
        settings = interpolable_keys(cls.config_model.model_json_schema(ref_template=DEFS + "{model}"))
        defs.update(settings.pop("$defs", {}))
        settings.pop("title", None)
        forms.append({"type": "object", "properties": {name: settings}, "required": [name],
                      "additionalProperties": False} if cls.nested else settings)
    return {"description": "The agent under test: an import path, or a mapping with 'a2a', 'http', 'mastra' or 'model'.",
            "anyOf": forms}


class MessageFile(BaseModel):
    """An OpenAI-format message of a recorded conversation (its other keys are kept as they are)."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["user", "assistant", "tool", "system", "developer"] = Field(
        description="user, assistant and tool messages make the turns; system and developer ones are skipped.")
    content: Any = Field(default=None, description="The message's text (or content parts).")
    tool_call_id: str | None = Field(default=None, description="The tool call a tool message answers.")


Seconds = Annotated[float, Field(ge=0), Interpolable]


class AnswerFile(BaseModel):
    """One answer of a mock's ``sequence``: a value, or an error."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"oneOf": [{"required": ["returns"]},
                                                                           {"required": ["raises"]}]})
    returns: Any = Field(default=None, description="What the tool returns.")
    raises: Annotated[str, Field(min_length=1)] | SkipJsonSchema[None] = Field(default=None, description="The error's message.")
    delay: Seconds = Field(default=0, description="Seconds before it answers.")


class LatencyFile(BaseModel):
    """An injected latency: a log-normal with this median and 99th percentile."""

    model_config = ConfigDict(extra="forbid", strict=True)
    p50: Seconds = Field(description="The median latency, seconds.")
    p99: Seconds | SkipJsonSchema[None] = Field(default=None, description="The 99th percentile, seconds (>= p50).")


Rate = Annotated[float, Field(ge=0, le=1), Interpolable]


class FaultsFile(BaseModel):
    """Seeded faults on a tool's calls (docs/hermetic.md, "Faults")."""

    model_config = ConfigDict(extra="forbid", strict=True)
    error_rate: Rate = Field(default=0, description="The share of calls that fail.")
    malformed_rate: Rate = Field(default=0, description="The share of calls whose result arrives cut off.")
    latency: LatencyFile | SkipJsonSchema[None] = Field(default=None, description="The latency every call gets.")
    timeout: Annotated[float, Field(gt=0), Interpolable] | SkipJsonSchema[None] = Field(
        default=None, description="Seconds after which a call fails as timed out.")
    seed: Annotated[int, Interpolable] = Field(default=0, description="The seed: the same seed, the same faults.")


_ANSWERED: list[JsonValue] = [{"required": ["returns"]}, {"required": ["raises"]}, {"required": ["sequence"]}]


class MockFile(AnswerFile):
    """A mock of one tool: an answer (or a ``sequence`` of them, one per call), for the calls ``when`` matches; or
    only the ``faults`` its calls meet."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"oneOf": [
        *_ANSWERED, {"required": ["faults"], "not": {"anyOf": _ANSWERED}}]})
    faults: FaultsFile | SkipJsonSchema[None] = Field(default=None, description="Seeded faults on the tool's calls.")
    when: dict[str, Any] | None = Field(default=None, description="Argument names to values ('/.../' is a regular "
                                                                  "expression): the calls this entry answers.")
    sequence: Annotated[list[AnswerFile], Field(min_length=1)] | SkipJsonSchema[None] = Field(
        default=None, description="An answer per call, in order.")


class ToolsFile(BaseModel):
    """``tools:``: mocks by tool name (one entry, or a list of ``when`` entries), and a tape to replay
    (docs/hermetic.md)."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, MockFile | Annotated[list[MockFile], Field(min_length=1)]]
    replay: Annotated[str, Field(min_length=1)] | SkipJsonSchema[None] = Field(
        default=None, description="A tape recorded with --record-tools, relative to the dataset file.")
    match: Literal[MATCHES] | SkipJsonSchema[None] = Field(  # type: ignore[valid-type]
        default=None, description="How a replayed call finds its answer: exact (same tool and arguments) or name "
                                  "(same tool, in order).")
