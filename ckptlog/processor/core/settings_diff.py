"""Which processor defaults differ between a snapshot and this run, compared in canonical form.

A snapshot stores the `FoldSettings` it was folded with (they change what a log folds to), and a
restore refuses one made with other settings. Roots are compared by their canonical spelling
(`ckptlog.events.paths.normalize`): `/tmp/x/runs`, `file:///tmp/x/runs` and `/tmp/x//runs/` are
one directory, so restarting with another spelling of the same `--storage-root` is no change.
"""

from __future__ import annotations

from dataclasses import fields
from typing import NamedTuple

from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.processor.core.state import FoldSettings


class Difference(NamedTuple):
    """One setting that differs: the flag (or name) that sets it, the snapshot's value, this run's."""

    setting: str
    snapshot: object
    current: object


def canonical_root(root: str | None) -> str | None:
    """The canonical spelling of a root (unchanged when it cannot be parsed: then it is compared as is)."""
    if root is None:
        return None
    try:
        return normalize(root)
    except UnsafePath:
        return root


def _fields(s: FoldSettings) -> dict[str, object]:
    """The settings a snapshot is compared on, by the flag (or name) that sets each: every field of
    FoldSettings (its metadata names it), the default config field by field."""
    config = s.default_config
    found: dict[str, object] = {
        "--default-num-to-keep": config.num_to_keep,
        "--score-attribute": config.checkpoint_score_attribute,
        "--score-order": config.checkpoint_score_order,
    }
    for f in fields(s):
        if f.name == "default_config":
            continue
        value = getattr(s, f.name)
        found[f.metadata.get("flag", f.name)] = canonical_root(value) if f.metadata.get("root") else value
    return found


def differences(snapshot: FoldSettings, current: FoldSettings) -> list[Difference]:
    """The settings whose canonical values differ ([] when the two fold alike). The outer bound
    is listed apart only when it differs otherwise than the default root (they are one flag)."""
    mine, theirs = _fields(current), _fields(snapshot)
    found = [Difference(name, theirs[name], mine[name]) for name in mine if mine[name] != theirs[name]]
    names = {d.setting for d in found}
    if "--storage-root" in names and _same_root_change(snapshot, current):
        found = [d for d in found if d.setting != "--storage-root (outer bound of deletions)"]
    return found


def _same_root_change(snapshot: FoldSettings, current: FoldSettings) -> bool:
    return (snapshot.default_root, current.default_root) == (snapshot.outer_root, current.outer_root)


def describe(found: list[Difference]) -> str:
    """`--score-order 'max' (snapshot) vs 'min' (now)`, joined with `; `."""
    return "; ".join(f"{d.setting} {d.snapshot!r} in the snapshot, {d.current!r} now" for d in found)
