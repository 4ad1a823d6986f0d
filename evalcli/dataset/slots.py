"""A slot read through a descriptor that makes its value at the first read (``Item.content``: docs/identity.md)."""

from __future__ import annotations

from typing import Any


class MadeOnRead:
    """``Item.content`` read through its slot: a digest loading left to be made (``dataset/contents.py``: ``Later``) is
    made at the first read and kept in the slot, so whoever reads it (evalcli, a library caller, ``pickle``, ``copy``,
    ``asdict``, ``replace``) gets its text, the value loading would have made."""

    __slots__ = ("slot",)

    def __init__(self, slot: Any) -> None:
        self.slot = slot

    def __get__(self, item: Any, owner: type | None = None) -> Any:
        if item is None:
            return self
        value = self.slot.__get__(item, owner)
        if type(value) is not str:
            value = value.value()
            self.slot.__set__(item, value)  # two threads reading at once set the same text
        return value

    def __set__(self, item: Any, value: Any) -> None:
        self.slot.__set__(item, value)

    def __delete__(self, item: Any) -> None:
        self.slot.__delete__(item)
