"""Hostile and careless inputs to history / explain / --as-of (issue 22), the pure parts: what the
replay and `explain` answer must equal what the processor decided (and `ckptlog fold`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ckptlog.cli.history import parse_moment
from ckptlog.errors import ConfigError
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.explain.checkpoint import explain, paragraph
from ckptlog.processor.explain.run_replay import RunReplay
from tests import factories as f
from tests.unit.core.test_fold_properties import ROOT, SETTINGS
from tests.unit.explain.test_run_replay import Rec


def fold_of(records: list[Rec]) -> Fold:
    fold = Fold(SETTINGS)
    for rec in records:
        event = decode_event(rec.value or b"", rec.key)
        if not isinstance(event, Rejection):
            fold.apply(event)
    return fold


def records_of(lines: list[bytes]) -> list[Rec]:
    return [Rec(decode_event(raw).subject.encode(), raw, i) for i, raw in enumerate(lines)]  # type: ignore[union-attr]


def replay_of(records: list[Rec], run_id: str, snapshot_at: int | None = None) -> RunReplay:
    snapshot = None
    if snapshot_at is not None:
        snapshot = decode(encode(of_fold(fold_of(records[:snapshot_at]), "in", 0, snapshot_at)))
        records = records[snapshot_at:]
    replay = RunReplay(SETTINGS, [run_id], snapshot)
    replay.feed(records)
    return replay


FORGOTTEN = [f.started("g", f"{ROOT}/g", keep=3), f.report("g", {}, f"{ROOT}/g/c0"), f.forgotten("g")]


def test_a_forgotten_runs_path_is_not_explained_as_kept() -> None:
    """run_forgotten drops the run's state (the processor tombstones its VIEW, `ckptlog fold` has no
    run): its checkpoint is no longer kept by anything, so explain must not say "kept"."""
    records = records_of(FORGOTTEN)
    assert "g" not in fold_of(records).runs  # the reference: the fold has no state for it
    replay = replay_of(records, "g")
    doc = explain("g", f"{ROOT}/g/c0", replay.steps["g"], replay.state("g"))
    assert doc["state"] == "unknown", doc
    assert doc["reported"] is not None and doc["kept_because"] is None
    assert "forgotten" in paragraph(doc)


def test_a_forgotten_run_has_no_state_as_of_after_the_forget() -> None:
    replay = replay_of(records_of(FORGOTTEN), "g")
    assert replay.state("g") is None


def test_a_path_reported_before_the_snapshot_the_replay_starts_from_is_still_kept() -> None:
    """Retention deleted the log below a snapshot: the report is not replayed, but the snapshot
    holds the path as kept; explain must say kept (as the processor's VIEW does), not unknown."""
    lines = [f.started("a", f"{ROOT}/a", keep=2), f.report("a", {}, f"{ROOT}/a/c0"), f.report("a", {}, f"{ROOT}/a/c1")]
    records = records_of(lines)
    replay = replay_of(records, "a", snapshot_at=2)
    assert f"{ROOT}/a/c0" in fold_of(records).runs["a"].by_key
    doc = explain("a", f"{ROOT}/a/c0", replay.steps["a"], replay.state("a"))
    assert doc["state"] == "kept", doc
    assert doc["reported"]["report_index"] == 0 and doc["reported"]["offset"] is None
    assert "before" in paragraph(doc)


def test_a_path_evicted_before_the_snapshot_with_its_deletion_owed_is_evicted() -> None:
    lines = [f.started("a", f"{ROOT}/a", keep=1), f.report("a", {}, f"{ROOT}/a/c0"), f.report("a", {}, f"{ROOT}/a/c1")]
    records = records_of(lines)
    replay = replay_of(records, "a", snapshot_at=3)
    assert f"{ROOT}/a/c0" in fold_of(records).runs["a"].outstanding
    doc = explain("a", f"{ROOT}/a/c0", replay.steps["a"], replay.state("a"))
    assert doc["state"] == "evicted", doc
    paragraph(doc)  # no KeyError on what the snapshot does not know


@pytest.mark.parametrize("text", ["²", "١٢", "৩"])
def test_a_unicode_digit_is_a_config_error_not_a_traceback(text: str) -> None:
    with pytest.raises(ConfigError, match="--as-of"):
        parse_moment(text, "--as-of")


def test_an_ascii_offset_still_parses() -> None:
    assert parse_moment(" 12 ", "--to") == 12
    assert parse_moment("2026-12-02T10:00:00Z", "--to") == datetime(2026, 12, 2, 10, tzinfo=UTC)


def test_history_lines_do_not_pass_terminal_control_sequences() -> None:
    """An event id is any string the decoder accepts, control characters included: a hostile
    producer must not be able to clear the screen or retitle the terminal of whoever reads history."""
    from ckptlog.cli.history import step_line
    from ckptlog.processor.explain.story import Step

    hostile = "\x1b[2J\x1b]0;pwned\x07\u009b31m"
    effects = [{"kind": "rejected", "reason": "x", "message": f"id {hostile}", "stage": "fold"}]
    line = step_line(Step(3, hostile, "ckptlog.report.v1", hostile, effects))
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line), repr(line)
    assert "\\x1b[2J" in line and line.startswith("@3 ")


def test_a_rejected_report_of_the_path_is_explained_as_rejected_not_never_reported() -> None:
    """The run reported the path and the processor refused the report (here: a path outside the
    run's root): explain must not say "the run never reported it"."""
    outside = "file:///elsewhere/c0"
    lines = [f.started("a", f"{ROOT}/a"), f.report("a", {}, outside)]
    replay = replay_of(records_of(lines), "a")
    doc = explain("a", outside, replay.steps["a"], replay.state("a"))
    assert doc["state"] == "unknown" and doc["reported"] is None
    assert [h["kind"] for h in doc["history"]] == ["rejected"] and doc["history"][0]["offset"] == 1
    text = paragraph(doc)
    assert "rejected" in text and "never reported" not in text, text
