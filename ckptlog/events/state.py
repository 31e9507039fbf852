"""The state topic read back (contract §4): every record decoded within limits, the heads and
page parts of each run, which head of a run is the newest, and the VIEW they assemble to. Pure;
shared by `ckptlog.AsyncReader` (ckptlog/client/view_table.py) and `ckptlog inspect`
(ckptlog/processor/service/views.py).

Any bytes may sit on the topic (a bug, a hostile or mistaken producer), so nothing here raises
on a record: what cannot be read is kept as a `Problem` (the key, where it is, why) that readers
show instead of it, and a run's VIEW is either the exact assembly of readable records or a Problem.

**Order.** Each state record carries the header `__ckptlog.input.offset`: the offset of the last
input record of the batch whose state it publishes. A run's events live on one input partition,
so of two heads the one with the higher offset publishes the later state, even where the
watermarks are equal (a restart, a status change); an at_least_once repeat of an older head is
ignored. A head without the header (an older processor) falls back to the watermark rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits, Undecodable, decode_object
from ckptlog.events.view import PAGE_KEY_SEPARATOR, RunView, ViewPage, assemble, parse_page_key

H_INPUT_OFFSET = "__ckptlog.input.offset"
"""Header of every state record: the input offset (decimal) of the last record of its batch."""

VIEW_NESTING = 1
"""How much deeper than its input event a VIEW nests a checkpoint's metrics: the input has them at
`{data: {metrics: …}}`, the VIEW at `{checkpoints: [{metrics: …}]}`."""


def state_limits(limits: DecodeLimits = DEFAULT_LIMITS) -> DecodeLimits:
    """The limits a state record stays within when the processor ran with `limits`: one entry may
    carry a report's metrics merged with a validation result's (each under max_bytes), alone in its
    page part, and metrics one level deeper than in the input (`VIEW_NESTING`)."""
    return DecodeLimits(2 * limits.max_bytes + 64 * 1024, limits.max_depth + VIEW_NESTING)


def input_offset(headers: Iterable[tuple[str, bytes | None]]) -> int | None:
    """The state record's `__ckptlog.input.offset`, None when absent or not a decimal offset."""
    for name, raw in headers:
        if name == H_INPUT_OFFSET and raw is not None and 0 < len(raw) <= 19 and raw.isdigit():
            return int(raw)
    return None


def supersedes(new: RunView, new_at: int | None, old: RunView | None, old_at: int | None) -> bool:
    """Whether a head (`new`, written at input offset `new_at`) replaces the one a reader holds."""
    if old is None:
        return True
    if new_at is not None and old_at is not None:
        return new_at >= old_at
    return new.newer_than(old)


@dataclass(frozen=True, slots=True)
class Problem:
    """A state record that cannot be read, or a run whose VIEW cannot be assembled: `key` (the
    record's key as text, undecodable bytes escaped), `at` (`topic[partition]@offset`), `reason`."""

    key: str
    at: str
    reason: str

    @property
    def run_id(self) -> str:
        """The run the record belongs to (a page key's run id, else the key)."""
        page = parse_page_key(self.key)
        return page[0] if page is not None else self.key

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "at": self.at, "value": None, "undecodable": self.reason}

    def __str__(self) -> str:
        return f"{self.at} (key {self.key!r}): {self.reason}"


@dataclass(slots=True)
class _Head:
    raw: dict[str, Any]
    view: RunView
    at: int | None  # its input offset header


@dataclass(slots=True)
class StateTable:
    """Latest head per run and latest value per page part, fed record by record in topic order."""

    limits: DecodeLimits = field(default_factory=state_limits)
    heads: dict[str, _Head] = field(default_factory=dict)
    parts: dict[str, dict[tuple[int, int], dict[str, Any] | Problem]] = field(default_factory=dict)
    problems: dict[str, Problem] = field(default_factory=dict)  # key -> the newest unreadable record
    fresh: list[Problem] = field(default_factory=list)  # problems since the caller last cleared it (to log)

    def take(
        self,
        where: str,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> str | None:
        """Apply one record (`where`: its `topic[partition]@offset`); the run id whose head it
        replaced or removed, else None (a page part, an older head, a record that cannot be read)."""
        if key is None:
            return None
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError as err:
            self._problem(key.decode("utf-8", "backslashreplace"), where, f"key is not UTF-8 (byte {err.start})")
            return None
        page = parse_page_key(name)
        if page is not None:
            self._page(name, where, page, value)
            return None
        if PAGE_KEY_SEPARATOR in name:
            self._problem(name, where, "key is neither a run id nor a page key")
            return None
        return self._head(name, where, value, input_offset(headers))

    def _problem(self, name: str, where: str, reason: str) -> None:
        self.problems[name] = problem = Problem(name, where, reason)
        self.fresh.append(problem)

    def _page(self, name: str, where: str, page: tuple[str, int, int], value: bytes | None) -> None:
        run_id, number, part = page
        parts = self.parts.setdefault(run_id, {})
        self.problems.pop(name, None)
        if value is None:
            parts.pop((number, part), None)
            return
        body = decode_object(value, self.limits)
        if not isinstance(body, Undecodable):
            try:
                ViewPage.model_validate(body)
            except ValidationError as exc:
                body = Undecodable(f"not a view page ({_first_error(exc)})", "invalid_data")
        if isinstance(body, Undecodable):
            self._problem(name, where, str(body))
            parts[(number, part)] = self.problems[name]
        else:
            parts[(number, part)] = body

    def _head(self, run_id: str, where: str, value: bytes | None, at: int | None) -> str | None:
        if value is None:  # a tombstone: the run was removed
            self.problems.pop(run_id, None)
            self.parts.pop(run_id, None)
            return run_id if self.heads.pop(run_id, None) is not None else None
        read = self._read_head(value)
        if isinstance(read, Undecodable):
            self._problem(run_id, where, str(read))
            return None
        body, view = read
        self.problems.pop(run_id, None)
        held = self.heads.get(run_id)
        if not supersedes(view, at, held.view if held else None, held.at if held else None):
            return None
        self.heads[run_id] = _Head(body, view, at)
        return run_id

    def _read_head(self, value: bytes) -> tuple[dict[str, Any], RunView] | Undecodable:
        body = decode_object(value, self.limits)
        if isinstance(body, Undecodable):
            return body
        try:
            return body, RunView.model_validate(body)
        except ValidationError as exc:
            return Undecodable(f"not a VIEW ({_first_error(exc)})", "invalid_data")

    def view(self, run_id: str) -> tuple[dict[str, Any], RunView] | Problem | None:
        """The run's VIEW (as JSON, and as a model) from its newest head and its page parts; a Problem
        when a part it needs cannot be read; None for a run without a head."""
        head = self.heads.get(run_id)
        if head is None:
            return None
        if head.view.pages is None:
            return head.raw, head.view
        parts = self.parts.get(run_id, {})
        bad = _blocking(parts, head.view.pages.span, head.view.committed)
        if bad is not None:
            return Problem(bad.key, bad.at, f"run {run_id!r}: a page its VIEW needs cannot be read: {bad.reason}")
        good = {k: v for k, v in parts.items() if isinstance(v, dict)}
        raw = assemble(head.raw, good)
        try:
            return raw, RunView.model_validate(raw)
        except ValidationError as exc:  # pragma: no cover - pages and head were each validated
            return Problem(run_id, "assembled", f"not a VIEW ({_first_error(exc)})")


def _blocking(parts: dict[tuple[int, int], dict[str, Any] | Problem], span: int, committed: int) -> Problem | None:
    """The first unreadable part the head would merge: of a page it covers, part 0, or a part below
    the count a readable part 0 names."""
    for (page, part), value in sorted(parts.items()):
        if not isinstance(value, Problem) or page * span >= committed:
            continue
        first = parts.get((page, 0))
        if part == 0 or (isinstance(first, dict) and part < int(first.get("parts", 1))):
            return value
    return None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    return f"{where}: {first['msg']}"[:200]
