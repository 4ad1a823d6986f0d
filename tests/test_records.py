"""`evalcli.records.record` makes the classes `@dataclasses.dataclass` makes, without compiling their `__repr__`,
`__eq__`, `__hash__` and frozen `__setattr__`/`__delattr__` (docs/development.md "Records"): generated classes of the
same fields and options, made both ways, behave the same."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import re
from collections.abc import Callable
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from evalcli import records
from evalcli.records import record
from tests.conftest import REPO

FIELD = st.fixed_dictionaries({
    "repr": st.booleans(), "compare": st.booleans(), "hash": st.sampled_from([None, True, False]),
    "default": st.booleans()})
OPTIONS = st.fixed_dictionaries({
    "frozen": st.booleans(), "eq": st.booleans(), "repr": st.booleans(), "slots": st.booleans(),
    "kw_only": st.booleans(), "match_args": st.booleans(),
    "order": st.sampled_from([False, False, False, True]), "unsafe_hash": st.sampled_from([False, False, False, True])})
BODY = st.fixed_dictionaries({"eq": st.booleans(), "hash": st.sampled_from(["none", "own", "None"]),
                              "repr": st.booleans(), "post_init": st.booleans()})
VALUE = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none(), st.just(float("nan")),
                  st.lists(st.integers(0, 2), max_size=2), st.tuples(st.integers(0, 2)))


def outcome(call: Callable[[], Any]) -> tuple[Any, Any]:
    try:
        return "ok", call()
    except Exception as error:  # noqa: BLE001 - the same exception, with the same message, either way
        return type(error), str(error)


def namespace(specs: list[dict[str, Any]], body: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A class body: fields `{prefix}0`... (those with a default last) and the methods `body` asks for."""
    ns: dict[str, Any] = {"__module__": __name__, "__qualname__": "C", "__annotations__": {}}
    ordered = sorted(enumerate(specs), key=lambda pair: pair[1]["default"])
    for i, spec in ordered:
        name = f"{prefix}{i}"
        ns["__annotations__"][name] = "Any"
        ns[name] = dataclasses.field(repr=spec["repr"], compare=spec["compare"], hash=spec["hash"],
                                     **({"default": i} if spec["default"] else {}))
    if body["eq"]:
        ns["__eq__"] = lambda self, other: "own eq"
    if body["hash"] == "own":
        ns["__hash__"] = lambda self: 7
    elif body["hash"] == "None":
        ns["__hash__"] = None
    if body["repr"]:
        ns["__repr__"] = lambda self: "own repr"
    if body["post_init"]:
        ns["__post_init__"] = lambda self: CALLS.append(type(self).__name__)
    return ns


CALLS: list[str] = []


def make(decorator: Callable[..., Any], parent: tuple[list[dict[str, Any]], dict[str, Any]] | None,
         specs: list[dict[str, Any]], options: dict[str, Any], body: dict[str, Any]) -> Any:
    bases: tuple[type, ...] = ()
    if parent is not None:
        parent_specs, parent_options = parent
        made = decorator(**parent_options)(type("P", (), namespace(parent_specs, BODY_NONE, "p")))
        bases = (made,)
    return decorator(**options)(type("C", bases, namespace(specs, body, "f")))


BODY_NONE = {"eq": False, "hash": "none", "repr": False, "post_init": False}


def behaviour(cls: Any, values: list[Any], others: list[Any]) -> list[Any]:
    """What can be seen of a class and its instances made of `values` and `others`."""
    seen: list[Any] = [cls.__doc__, str(inspect.signature(cls)), cls.__hash__ is None, "__hash__" in cls.__dict__,
                       getattr(cls, "__match_args__", None), hasattr(cls, "__slots__"),
                       [(f.name, f.repr, f.compare, f.hash, f.default) for f in dataclasses.fields(cls)]]
    names = [f.name for f in dataclasses.fields(cls)]
    del CALLS[:]
    one = outcome(lambda: cls(**dict(zip(names, values, strict=False))))
    two = outcome(lambda: cls(**dict(zip(names, others, strict=False))))
    seen += [one[0], two[0], list(CALLS)]
    if one[0] != "ok" or two[0] != "ok":
        return seen
    a, b = one[1], two[1]
    seen += [outcome(lambda: repr(a)), outcome(lambda: a == b), outcome(lambda: a != b), outcome(lambda: a == a),
             outcome(lambda: a == copy.copy(a)), outcome(lambda: a.__eq__(object())), outcome(lambda: own_hash(a)),
             outcome(lambda: a < b), outcome(lambda: dataclasses.asdict(a)), outcome(lambda: dataclasses.astuple(a)),
             outcome(lambda: dataclasses.replace(a) == a), outcome(lambda: repr(dataclasses.replace(b)))]
    for name in [*names[:1], "other"]:
        seen += [outcome(lambda name=name: setattr(a, name, 1)), outcome(lambda name=name: delattr(a, name))]
    if names:  # an instance that holds itself: `...` where it is met again
        object.__setattr__(b, names[-1], [b, (b,)])
        seen += [outcome(lambda: repr(b)), outcome(lambda: b == copy.copy(b))]
    if not hasattr(cls, "__slots__"):  # a plain subclass: its own attributes, the record's fields
        sub = type("D", (cls,), {})(**dict(zip(names, values, strict=False)))
        seen += [outcome(lambda: setattr(sub, "other", 1)), outcome(lambda: sub.other),
                 outcome(lambda: delattr(sub, "other")), outcome(lambda: repr(sub)), outcome(lambda: sub == a)]
        if names:
            seen += [outcome(lambda: setattr(sub, names[0], 2))]
    return seen


def own_hash(value: Any) -> Any:
    """`hash(value)`, or "object's" where it is `object.__hash__` (an address)."""
    return "object's" if type(value).__hash__ is object.__hash__ else hash(value)


def same(left: Any, right: Any) -> bool:
    """Equal, `nan` counted equal to itself (a value drawn once is compared by identity inside tuples) and objects'
    default reprs' addresses left out."""
    return ADDRESS.sub("", repr(left)) == ADDRESS.sub("", repr(right))


ADDRESS = re.compile(r" at 0x[0-9a-f]+")


@settings(max_examples=400)
@given(st.lists(FIELD, max_size=4), OPTIONS, BODY,
       st.none() | st.tuples(st.lists(FIELD, max_size=2), OPTIONS.map(lambda o: dict(o, order=False))),
       st.lists(VALUE, min_size=6, max_size=6), st.lists(VALUE, min_size=6, max_size=6), st.booleans(), st.booleans())
def test_records_behave_as_dataclasses(specs: list[dict[str, Any]], options: dict[str, Any], body: dict[str, Any],
                                       parent: Any, values: list[Any], others: list[Any], same_values: bool,
                                       alike: bool) -> None:
    if same_values:
        others = list(values)
    if parent is not None and parent[1]["frozen"] != options["frozen"] and alike:
        parent = parent[0], dict(parent[1], frozen=options["frozen"])  # mostly one that can be subclassed
    made = outcome(lambda: make(dataclasses.dataclass, parent, specs, options, body))
    ours = outcome(lambda: make(record, parent, specs, options, body))
    assert made[0] == ours[0] and (made[0] == "ok" or made == ours), (made, ours)
    event("made" if made[0] == "ok" else "refused")
    if made[0] != "ok":
        return
    assert same(behaviour(made[1], values, others), behaviour(ours[1], values, others))


@record(frozen=True)
class Frozen:
    name: str
    sizes: tuple[int, ...] = ()
    note: str = dataclasses.field(default="", repr=False, compare=False)


@record(frozen=True, slots=True)
class Slotted:
    name: str
    size: int = 0


@record
class Plain:
    name: str
    items: list[int] = dataclasses.field(default_factory=list)


def test_records_pickle_copy_and_match() -> None:
    for value in (Frozen("a", (1, 2), "n"), Slotted("b", 3), Plain("c", [4])):
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value and copy.copy(value) == value
        match value:
            case Frozen(name, sizes):
                assert (name, sizes) == ("a", (1, 2))
            case Slotted(name, size):
                assert (name, size) == ("b", 3)
            case Plain(name, items):
                assert (name, items) == ("c", [4])
    assert {Frozen("a"), Frozen("a", note="x")} == {Frozen("a")}
    assert repr(Frozen("a", (1,), "n")) == "Frozen(name='a', sizes=(1,))"
    assert dataclasses.is_dataclass(Slotted) and Slotted.__slots__ == ("name", "size")


def test_records_compile_nothing_but_init() -> None:
    """Their methods are records.py's own functions, and `dataclasses` is left as it was."""
    standard = dataclasses._frozen_get_del_attr  # type: ignore[attr-defined]
    for cls in (Frozen, Slotted, Plain):
        for name in ("__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
            method = cls.__dict__.get(name)
            if callable(method):
                assert method.__code__.co_filename == records.__file__, (cls, name)
                assert method.__qualname__ == f"{cls.__qualname__}.{name}"
        assert cls.__init__.__code__.co_filename == "<string>"  # generated by dataclasses, as before
    assert dataclasses._frozen_get_del_attr is standard  # type: ignore[attr-defined]
    assert standard.__module__ == "dataclasses"


def test_evalcli_makes_its_dataclasses_with_record() -> None:
    """docs/development.md "Records": evalcli's own dataclasses are made by `record`."""
    written = re.compile(r"^\s*@(dataclasses\.)?dataclass\b|^\s*from dataclasses import .*\bdataclass\b", re.M)
    found = [str(path.relative_to(REPO)) for path in sorted((REPO / "evalcli").rglob("*.py"))
             if written.search(path.read_text(encoding="utf-8"))]
    assert not found, found
