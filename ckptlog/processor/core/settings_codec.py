"""The fold settings as a snapshot (base or delta) writes them (contract §6): every field of
FoldSettings, in declaration order, its Structs as JSON data; read back checked, a field a snapshot of
an older schema lacks taking its default then. Pure."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import msgspec

from ckptlog.events.decoded import CheckpointConfig, ValidationSpec
from ckptlog.processor.core.run_codec import struct_out
from ckptlog.processor.core.state import FoldSettings

ADDED_IN: dict[str, int] = {"finished_runs_kept": 5}
"""FoldSettings fields a snapshot of an older schema lacks (their default then), with the version adding them."""

_STRUCTS: dict[str, type[msgspec.Struct]] = {"default_config": CheckpointConfig, "default_validation": ValidationSpec}
"""The FoldSettings fields that are Structs; every other field is a JSON scalar."""


def settings_out(s: FoldSettings) -> dict[str, Any]:
    """Every field of the settings, in declaration order (a new fold setting needs nothing here)."""
    out: dict[str, Any] = {}
    for f in fields(s):
        value = getattr(s, f.name)
        out[f.name] = struct_out(value) if f.name in _STRUCTS else value
    return out


def settings_in(d: dict[str, Any], version: int) -> FoldSettings:
    """The settings a snapshot of schema `version` holds (ValueError when they are not settings)."""
    values: dict[str, Any] = {}
    for f in fields(FoldSettings):
        if version < ADDED_IN.get(f.name, 0):
            continue  # an older schema's snapshot lacks it: the field's default
        value = d[f.name]
        if f.name in _STRUCTS:
            value = msgspec.convert(value, _STRUCTS[f.name])  # its constraints checked: a ValueError
        elif isinstance(value, bool) or not isinstance(value, int | str | None):
            raise ValueError(f"setting {f.name} is {value!r}")
        elif f.name in ADDED_IN and (not isinstance(value, int) or value < 0):
            raise ValueError(f"setting {f.name} is {value!r}, not an int >= 0")
        values[f.name] = value
    return FoldSettings(**values)
