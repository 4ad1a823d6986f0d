"""`record`: `dataclasses.dataclass` without compiling `__repr__`, `__eq__`, `__hash__` and frozen classes'
`__setattr__`/`__delattr__` with `exec` (docs/performance.md "Start-up and finish"; docs/development.md "Records").

`dataclasses` writes each of those methods as source text and compiles it (~1 ms a class); every evalcli record is
made at import, most before a run's first turn. `record` lets `dataclasses` make the class and its `__init__` (hot
at run time, so still generated) and gives it methods built from the field names by closures, with the generated
ones' behaviour: `__eq__` compares the compared fields of two instances of the same class as the running Python's
`dataclasses` does (their tuples up to 3.12; 3.13 `and`s the fields' `==`), `NotImplemented` otherwise, `__hash__`
hashes the tuple of the hashed fields under the same rules (eq, frozen, an explicit `__hash__`), `__repr__` names
`__qualname__` and the `repr=True` fields and writes `...` for an instance already being written in the same thread,
and a frozen class's `__setattr__`/`__delattr__` raise `dataclasses.FrozenInstanceError` with the same message.
`order=True` or `unsafe_hash=True` go to `dataclasses` as they are. `tests/test_records.py` holds records to
`@dataclass` classes of the same fields.
"""

from __future__ import annotations

import _thread
import abc
import dataclasses
import sys
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_Key = Callable[[Any], tuple[Any, ...]]
_MISSING = object()


def _key(names: tuple[str, ...]) -> _Key:
    """The tuple of an instance's `names` attributes, as `(self.a,self.b,)` in a generated method."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _named(cls: type, fn: Callable[..., Any]) -> None:
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    if sys.version_info >= (3, 13):  # dataclasses 3.13: the same instance is equal, else `self.a==other.a and ...`

        def __eq__(self: Any, other: Any) -> Any:
            if self is other:
                return True
            if other.__class__ is self.__class__:
                result: Any = True
                for name in names:
                    result = getattr(self, name) == getattr(other, name)
                    if not result:
                        break
                return result
            return NotImplemented

        return __eq__
    key = _key(names)

    def __eq__(self: Any, other: Any) -> Any:  # 3.11, 3.12: `(self.a,self.b,)==(other.a,other.b,)`
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash(key: _Key) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()  # dataclasses' guard: one set a method, (id, thread) while writing

    def __repr__(self: Any) -> str:
        key = id(self), _thread.get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            qualname: str = self.__class__.__qualname__
            return qualname + "(" + ", ".join([f"{name}={getattr(self, name)!r}" for name in names]) + ")"
        finally:
            running.discard(key)

    return __repr__


def _frozen_get_del_attr(cls: type, fields: Iterable[dataclasses.Field[Any]], globals: Any = None) -> tuple[
    Callable[[Any, str, Any], None], Callable[[Any, str], None]
]:
    """What `dataclasses._frozen_get_del_attr` compiles, as closures (it is swapped in only while a record is made)."""
    names = tuple(f.name for f in fields)
    error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return __setattr__, __delattr__


# Swapping `dataclasses._frozen_get_del_attr` while a record is made (under one lock) is done only where that
# function has the signature read here (Python 3.11 and 3.12); elsewhere a frozen record's two methods are compiled.
_STD_FROZEN = getattr(dataclasses, "_frozen_get_del_attr", None)
_SWAP_FROZEN = getattr(getattr(_STD_FROZEN, "__code__", None), "co_varnames", ())[:3] == ("cls", "fields", "globals")
_lock = _thread.RLock()  # a record made while one is being made finds the standard function or this one: both alike


def _make(cls: type, frozen: bool, options: dict[str, Any]) -> type:
    if not (frozen and _SWAP_FROZEN):
        return dataclasses.dataclass(cls, frozen=frozen, **options)
    with _lock:
        dataclasses._frozen_get_del_attr = _frozen_get_del_attr  # type: ignore[attr-defined]
        try:
            return dataclasses.dataclass(cls, frozen=True, **options)
        finally:
            dataclasses._frozen_get_del_attr = _STD_FROZEN  # type: ignore[attr-defined]


def _record(
    cls: type, init: bool, repr: bool, eq: bool, order: bool, unsafe_hash: bool, frozen: bool, match_args: bool,
    kw_only: bool, slots: bool, weakref_slot: bool,
) -> type:
    options = dict(init=init, match_args=match_args, kw_only=kw_only, slots=slots, weakref_slot=weakref_slot)
    if order or unsafe_hash:
        return _make(cls, frozen, dict(options, repr=repr, eq=eq, order=order, unsafe_hash=unsafe_hash))
    own_hash = cls.__dict__.get("__hash__", _MISSING)
    explicit_hash = not (own_hash is _MISSING or (own_hash is None and "__eq__" in cls.__dict__))
    made = _make(cls, frozen, dict(options, repr=False, eq=False))
    fields = dataclasses.fields(made)
    if repr and "__repr__" not in made.__dict__:
        made.__repr__ = _repr(tuple(f.name for f in fields if f.repr))  # type: ignore[assignment]
        _named(made, made.__repr__)
    if eq:
        if "__eq__" not in made.__dict__:
            made.__eq__ = _eq(tuple(f.name for f in fields if f.compare))  # type: ignore[assignment]
            _named(made, made.__eq__)
        if not explicit_hash:  # dataclasses' `_hash_action` for unsafe_hash=False
            if frozen:
                hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
                made.__hash__ = _hash(_key(hashed))  # type: ignore[assignment]
                _named(made, made.__hash__)
            else:
                made.__hash__ = None  # type: ignore[assignment]
    abc.update_abstractmethods(made)
    return made


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(
    *, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False, unsafe_hash: bool = False,
    frozen: bool = False, match_args: bool = True, kw_only: bool = False, slots: bool = False,
    weakref_slot: bool = False,
) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: type[T] | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False,
    unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True, kw_only: bool = False,
    slots: bool = False, weakref_slot: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """`@dataclasses.dataclass` with the same arguments and the same classes, made without `exec` but for
    `__init__` (the module's docstring)."""

    def wrap(cls: type[T]) -> type[T]:
        return _record(cls, init, repr, eq, order, unsafe_hash, frozen, match_args, kw_only, slots, weakref_slot)

    return wrap if cls is None else wrap(cls)
