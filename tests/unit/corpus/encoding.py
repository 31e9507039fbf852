"""How corpus lines are spelled: raw JSON text, so a line can hold what json.dumps never writes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ROOT = "file:///r"
ABSENT = object()  # a field left out of the object


class Raw(str):
    """JSON text written verbatim: a number spelling, a literal, an escaped string."""


@dataclass(frozen=True)
class Obj:
    """A JSON object as ordered pairs, so a key may repeat (every parser here keeps the last)."""

    pairs: tuple[tuple[str, Any], ...]

    @staticmethod
    def of(*pairs: tuple[str, Any]) -> Obj:
        return Obj(tuple((k, v) for k, v in pairs if v is not ABSENT))

    def keys(self) -> list[str]:
        return [k for k, _ in self.pairs]

    def get(self, key: str, default: Any = None) -> Any:
        found = default
        for k, v in self.pairs:
            if k == key:
                found = v
        return found

    def put(self, key: str, value: Any) -> Obj:
        """Replace every `key` (in place) or append it; ABSENT removes it."""
        if value is ABSENT:
            return self.drop(key)
        if key in self.keys():
            return Obj(tuple((k, value if k == key else v) for k, v in self.pairs))
        return Obj((*self.pairs, (key, value)))

    def drop(self, key: str) -> Obj:
        return Obj(tuple((k, v) for k, v in self.pairs if k != key))

    def append(self, key: str, value: Any) -> Obj:
        return Obj((*self.pairs, (key, value)))


@dataclass(frozen=True)
class Style:
    """How one line is spelled: separators (JSON whitespace around them) and escaping."""

    comma: str = ","
    colon: str = ":"
    ascii: bool = False


def encode(value: Any, style: Style = Style()) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Obj):
        items = value.pairs
    elif isinstance(value, dict):
        items = tuple(value.items())
    else:
        items = None
    if items is not None:
        return "{" + style.comma.join(f"{encode(k, style)}{style.colon}{encode(v, style)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + style.comma.join(encode(v, style) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=style.ascii)
    return json.dumps(value)  # None, bools, ints, floats (nan -> NaN, inf -> Infinity)


def to_bytes(text: str) -> bytes:
    """UTF-8; a lone surrogate in `text` becomes its (invalid) 3-byte form on purpose."""
    return text.encode("utf-8", "surrogatepass")
