"""The scorer library's deterministic checks (docs/reference/scorers.md): ``tool_args``, ``trajectory``, ``tool_f1``,
``json_output``.

Each is declared once as a ``Kind`` and returns a score with a reason saying what matched and what
did not (the expected call that found no partner, the keys that differed, the schema error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SerializerFunctionWrapHandler, model_serializer

from ...messages import assistant_texts, excerpt
from ...results import Outcome
from ..base import ScorerRun
from ..kinds import BuildContext
from ..naming import id_text, id_value, shortened
from .basic import NO_CALLS, CheckArgs, CheckScorer, check
from .matching import ArgsMode, Call, arguments_match, calls_of, maximum_matching, valid_patterns, values_match

TrajectoryMode = Literal["strict", "in_order", "unordered", "superset", "subset"]


def valid_schema(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ``schema`` argument checked against its metaschema (a mistake raises ``ValueError`` saying where)."""
    if value is not None:
        import jsonschema  # only for datasets that use a schema: it costs 50 ms to import

        cls = jsonschema.validators.validator_for(value, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(map(str, exc.path))
            raise ValueError(f"not a valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")) from None
        nowhere = _unresolved_refs(cls(value), value)
        if nowhere:
            raise ValueError("not a JSON Schema evalcli can use: " + "; ".join(
                f"its $ref {ref!r} points nowhere" for ref in nowhere) + " (evalcli never fetches a schema: put "
                "what it refers to under the schema's $defs)")
    return value


def _unresolved_refs(validator: Any, schema: dict[str, Any]) -> list[str]:
    """The ``$ref`` of a schema that resolve to nothing (another file, a URL, a ``$defs`` entry that is not there):
    each would be the scorer's error on every conversation, so it is the dataset's, at its line (docs/checks.md).
    A schema with a nested ``$id`` (refs relative to another base) is left to the validator."""
    refs: list[str] = []
    nested_id = False

    def walk(node: Any, root: bool) -> None:
        nonlocal nested_id
        if isinstance(node, dict):
            if not root and any(isinstance(node.get(key), str) for key in ("$id", "id")):
                nested_id = True
            for key, item in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(item, str):
                    refs.append(item)
                else:
                    walk(item, False)
        elif isinstance(node, list):
            for item in node:
                walk(item, False)

    walk(schema, True)
    resolver = getattr(validator, "_resolver", None)  # jsonschema >= 4.18 (``referencing``); older ones: unchecked
    if nested_id or resolver is None:
        return []
    nowhere = []
    for ref in dict.fromkeys(refs):
        try:
            resolver.lookup(ref)
        except Exception:  # noqa: BLE001 - referencing's Unresolvable and its kin: nothing there
            nowhere.append(ref)
    return nowhere


PatternedArgs = Annotated[dict[str, Any], AfterValidator(valid_patterns)]
"""Arguments a call's must match (``"/.../"`` strings are regular expressions: docs/checks.md), checked to compile."""
JsonSchemaArg = Annotated[dict[str, Any] | None, AfterValidator(valid_schema)]
"""A ``schema`` argument (``json_schema`` by its Python name), checked against its metaschema."""


class ToolArgsArgs(CheckArgs):
    name: str = Field(min_length=1, description="The tool's name.")
    args: PatternedArgs = Field(default_factory=dict, description="The arguments some call must have (a mapping; "
                                                                  "a string \"/.../\" is a regular expression).")
    mode: Literal["partial", "exact"] = Field(
        default="partial", description="partial: every key given, with a matching value; exact: equal as a whole.")


class ExpectedCall(CheckArgs):
    """One expected call of a trajectory written as a mapping."""

    name: str = Field(min_length=1, description="The tool's name.")
    args: PatternedArgs | None = Field(default=None, description="Its arguments, compared under the `args` mode (a "
                                                                  "string \"/.../\" is a regular expression).")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A call without arguments dumps as its bare name, the way it is written (and read back)."""
        return self.name if self.args is None else handler(self)


def _named(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


ExpectedEntry = Annotated[ExpectedCall, BeforeValidator(_named, json_schema_input_type=str | ExpectedCall)]
"""A bare tool name is a call of that name with any arguments."""


class TrajectoryArgs(CheckArgs):
    expected: list[ExpectedEntry] = Field(description="The expected calls: tool names or {name, args} mappings.")
    mode: TrajectoryMode = Field(default="in_order", description="strict, in_order, unordered, superset or subset.")
    args: ArgsMode = Field(default="ignore", description="How {name, args} entries compare arguments: ignore, "
                                                         "partial or exact.")


class ToolF1Args(CheckArgs):
    names: list[str] = Field(description="The tool names that should be called.")


class JsonOutputArgs(CheckArgs):
    json_schema: JsonSchemaArg = Field(default=None, alias="schema", description="A JSON Schema the JSON must be valid "
                                                                                 "against.")


def schema_validator(schema: dict[str, Any] | None) -> Any:
    """A validator for a checked ``schema`` (``None`` without one)."""
    if schema is None:
        return None
    import jsonschema

    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def schema_error(validator: Any, value: Any) -> str | None:
    """Why ``value`` is not valid against the schema (the best match, with its JSON path), or ``None``."""
    import jsonschema  # imported by the scorer's build already

    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    return None if error is None else f"{error.message} (at {error.json_path})"


def _calls_text(calls: list[Call]) -> str:
    return ", ".join(c.describe() for c in calls) if calls else NO_CALLS


def _entry_text(entry: ExpectedCall) -> str:
    return id_text(entry.name) if entry.args is None else f"{id_text(entry.name)} {id_value(entry.args)}"


def tool_args(run: ScorerRun, a: ToolArgsArgs) -> Outcome:
    calls = calls_of(run.output)
    named = [c for c in calls if c.name == a.name]
    wanted = f"{id_value(a.args)} ({a.mode})"
    for call in named:
        if call.arguments is not None and values_match(a.args, call.arguments, a.mode):
            return Outcome(score=1.0, reason=f"{call.describe()} matches {wanted}")
    if not named:
        return Outcome(score=0.0, reason=f"{a.name} was not called; calls: {_calls_text(calls)}")
    return Outcome(score=0.0, reason=f"no call to {a.name} matches {wanted}; calls to {a.name}: {_calls_text(named)}")


def _strict(expected: list[ExpectedCall], calls: list[Call], fits: Callable[[int, int], bool]) -> str | None:
    if len(expected) != len(calls):
        return f"expected {len(expected)} call{'s' if len(expected) != 1 else ''}, got {len(calls)}"
    for i in range(len(expected)):
        if not fits(i, i):
            return f"call {i + 1} is {calls[i].describe()}, expected {_entry_text(expected[i])}"
    return None


def _in_order(expected: list[ExpectedCall], calls: list[Call], fits: Callable[[int, int], bool]) -> str | None:
    # the earliest fitting call for each expected one: if any embedding exists, this one does
    position = 0
    for i, entry in enumerate(expected):
        while position < len(calls) and not fits(i, position):
            position += 1
        if position == len(calls):
            return f"matched {i} of {len(expected)} in order; no call for {_entry_text(entry)} after those"
        position += 1
    return None


def _matched(expected: list[ExpectedCall], calls: list[Call], mode: TrajectoryMode,
             fits: Callable[[int, int], bool]) -> str | None:
    pairs = maximum_matching(len(expected), len(calls), fits)
    lonely_expected = [_entry_text(e) for i, e in enumerate(expected) if i not in pairs]
    paired = set(pairs.values())
    lonely_calls = [c.describe() for j, c in enumerate(calls) if j not in paired]
    missing = {"unordered": lonely_expected or lonely_calls, "superset": lonely_expected, "subset": lonely_calls}[mode]
    if not missing:
        return None
    parts = [f"matched {len(pairs)} pair{'s' if len(pairs) != 1 else ''}"]
    if lonely_expected:
        parts.append(f"expected with no partner: {', '.join(lonely_expected)}")
    if lonely_calls:
        parts.append(f"calls with no partner: {', '.join(lonely_calls)}")
    return "; ".join(parts)


def trajectory(run: ScorerRun, a: TrajectoryArgs) -> Outcome:
    expected = a.expected
    calls = calls_of(run.output)

    def fits(i: int, j: int) -> bool:
        entry, call = expected[i], calls[j]
        return entry.name == call.name and (entry.args is None or arguments_match(entry.args, call, a.args))

    if a.mode == "strict":
        problem = _strict(expected, calls, fits)
    elif a.mode == "in_order":
        problem = _in_order(expected, calls, fits)
    else:
        problem = _matched(expected, calls, a.mode, fits)
    seen = f"expected [{', '.join(map(_entry_text, expected))}] (args {a.args}); calls: {_calls_text(calls)}"
    verdict = f"{a.mode}: fits" if problem is None else f"{a.mode}: does not fit ({problem})"
    return Outcome(score=float(problem is None), reason=f"{verdict}; {seen}")


def tool_f1(run: ScorerRun, a: ToolF1Args) -> Outcome:
    called = set(c.name for c in calls_of(run.output))
    wanted = set(a.names)
    shared = called & wanted
    value = 1.0 if not called and not wanted else 2 * len(shared) / (len(called) + len(wanted))

    def names(found: set[str]) -> str:
        return ", ".join(sorted(found)) or "none"

    return Outcome(score=value, reason=f"F1 {value:.3f} (precision {len(shared)}/{len(called)}, recall "
                                       f"{len(shared)}/{len(wanted)}): matched {names(shared)}; missing "
                                       f"{names(wanted - called)}; extra {names(called - wanted)}"
                                       + ("" if called else f"; calls: {NO_CALLS}"))


_FENCE = re.compile(r"\A```([A-Za-z]*)[ \t]*\r?\n(.*)\r?\n[ \t]*```\Z", re.DOTALL)
"""One fenced block, its lines ended by \\n or \\r\\n (docs/checks.md)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_of(text: str) -> tuple[Any, str] | None:
    """The JSON value of the trimmed text, or of the one fenced block it is (```json or ```), and which."""
    try:
        return json.loads(text, parse_constant=_reject_constant), "the text"
    except ValueError:
        pass
    fenced = _FENCE.match(text)
    if fenced is None or fenced.group(1).lower() not in ("", "json") or "```" in fenced.group(2):
        return None
    try:
        return json.loads(fenced.group(2), parse_constant=_reject_constant), "the fenced block"
    except ValueError:
        return None


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean or null."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def json_output(run: ScorerRun, a: JsonOutputArgs, validator: Any = None) -> Outcome:
    texts = assistant_texts(run.output, strip=True)
    if not texts:
        return Outcome(score=0.0, reason="no assistant text")
    found = json_of(texts[-1])
    if found is None:
        return Outcome(score=0.0, reason=f"the last assistant text is not JSON (nor one ```json block): "
                                         f"{excerpt(texts[-1])}")
    value, where = found
    if validator is None:
        return Outcome(score=1.0, reason=f"{where} is JSON ({json_type(value)})")
    error = schema_error(validator, value)
    if error is None:
        return Outcome(score=1.0, reason=f"{where} is JSON and valid against the schema")
    return Outcome(score=0.0, reason=f"{where} is JSON but not valid against the schema: {error}")


def _build_json_output(args: JsonOutputArgs, context: BuildContext) -> CheckScorer:
    return CheckScorer(partial(json_output, validator=schema_validator(args.json_schema)), args)


def _trajectory_id(values: dict[str, Any]) -> str:
    args = TrajectoryArgs.model_validate(values)
    listed = ", ".join(map(_entry_text, args.expected)) or "[]"
    extra = "" if args.args == "ignore" else f"; args={args.args}"
    return f"trajectory({args.mode}: {listed}{extra})"


def _tool_args_id(values: dict[str, Any]) -> str:
    parts = [id_text(values["name"])]
    if values["args"]:
        parts.append(id_value(values["args"]))
    if values["mode"] != "partial":
        parts.append(f"mode={values['mode']}")
    return f"tool_args({', '.join(parts)})"


def _json_output_id(values: dict[str, Any]) -> str:
    schema = values.get("schema")
    return "json_output" if schema is None else f"json_output(schema: {shortened(id_value(schema))})"


KINDS = (
    check("tool_args", ToolArgsArgs, "name", tool_args,
          "1 if some call to `name` has arguments matching `args` (partial or exact); unparseable arguments never match",
          "tool_args: {name: get_weather, args: {city: Paris}}", default_id=_tool_args_id),
    check("trajectory", TrajectoryArgs, "expected", trajectory,
          "1 if the tool calls fit `expected` (strict, in_order, unordered, superset or subset; maximum matching)",
          "trajectory: {expected: [search, book], mode: strict}", default_id=_trajectory_id),
    check("tool_f1", ToolF1Args, "names", tool_f1, "F1 of the set of called tool names against `names` (both empty: 1)",
          "tool_f1: [search, book]", default_id=lambda values: f"tool_f1({id_value(values['names'])})"),
    check("json_output", JsonOutputArgs, None, json_output,
          "1 if the last assistant text is JSON (or one ```json block) and valid against `schema` if given",
          "json_output: {schema: {type: object, required: [city]}}", default_id=_json_output_id, build=_build_json_output),
)
"""The checks of this module, in the order ``evalcli scorers`` lists them."""
