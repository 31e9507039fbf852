"""Deterministic event ids (ckptlog.client.ids) and the checked event bodies (ckptlog.client.bodies)."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from ckptlog.client import ids
from ckptlog.client.bodies import as_url, encode_checked, envelope, validation_body
from ckptlog.client.errors import InvalidEvent
from ckptlog.events.codec import decode_event
from ckptlog.events.event_ids import parse
from ckptlog.events.models import ValidationSpec
from ckptlog.events.rejections import Rejection


def test_sequenced_ids_are_structured_and_stable() -> None:
    """Events that come in a sequence get a structured id the processor reads back as (producer,
    sequence) of their run (contract §3 "Deduplication"); the others stay UUIDv5 of their name."""
    a = ids.report_id("run", None, 3)
    assert a == ids.report_id("run", None, 3) == ids.report_id("run", 0, 3) == "ck1:r:0:3:run"
    assert parse(a, "run") == ("r:0", 3) and parse(a, "other") is None
    made = {
        ids.attempt_report_id("run", "0f" * 16, 2, 7): ("a:" + "0f" * 16 + ":2", 7),
        ids.adopted_report_id("run", 5): ("ad", 5),
        ids.restart_id("run", 4): ("g", 4),
        ids.validation_result_id("run", "ckptlog:ckptlog.events:3:120:1"): ("v:ckptlog.events:3:1", 120),
    }
    assert {event_id: parse(event_id, "run") for event_id in made} == made
    assert uuid.UUID(ids.run_started_id("run", {})).version == 5


@pytest.mark.parametrize(
    ("made", "name"),
    [
        (ids.report_id("run", None, -1), ("report", 0, -1)),
        (ids.attempt_report_id("run", "not:a token", 0, 1), ("report", "not:a token", 0, 1)),
        (ids.validation_result_id("run", "req-1"), ("validation_result", "req-1")),
        (ids.adopted_report_id("run", 10**18), ("adopted_report", 10**18)),
    ],
)
def test_values_outside_the_grammar_keep_the_uuid_of_their_name(made: str, name: tuple[object, ...]) -> None:
    assert made == str(uuid.uuid5(ids.NAMESPACE, "\n".join(str(p) for p in ("run", *name))))


@pytest.mark.parametrize("other", [("run", 1, 3), ("run", None, 4), ("run2", None, 3)])
def test_report_ids_differ_by_run_generation_and_index(other: tuple[str, int | None, int]) -> None:
    assert ids.report_id("run", None, 3) != ids.report_id(*other)


def test_an_id_is_the_uuid5_of_its_newline_joined_name() -> None:
    """The names are on the wire already: a change of spelling would make every retry a new event."""
    named = {
        ids.report_id("r", None, -3): "r\nreport\n0\n-3",  # outside the structured grammar
        ids.finished_id("r"): "r\nrun_finished",
        ids.finished_id("r", 2): "r\nrun_finished\n2",
        ids.reopened_id("r", 1): "r\nrun_reopened\n1",
        ids.event_id("r", "run_forgotten"): "r\nrun_forgotten",  # what AsyncReporter.forget sends
    }
    assert all(made == str(uuid.uuid5(ids.NAMESPACE, name)) for made, name in named.items())


def test_kinds_never_collide() -> None:
    made = {
        ids.report_id("r", 1, 1),
        ids.restart_id("r", 1),
        ids.validation_result_id("r", "1"),
        ids.run_started_id("r", {}),
        ids.report_content_id("r", {}),
    }
    assert len(made) == 5


def test_run_started_id_hashes_the_body() -> None:
    body = {"storage_path": "/a", "checkpoint_config": {"num_to_keep": 2}}
    same = {"checkpoint_config": {"num_to_keep": 2}, "storage_path": "/a"}
    assert ids.run_started_id("r", body) == ids.run_started_id("r", same)
    assert ids.run_started_id("r", body) != ids.run_started_id("r", {**body, "storage_path": "/b"})


def test_validation_result_id_follows_the_request() -> None:
    assert ids.validation_result_id("r", "req-1") == ids.validation_result_id("r", "req-1")
    assert ids.validation_result_id("r", "req-1") != ids.validation_result_id("r", "req-2")


def _report(data: dict[str, Any], run: str = "run-1") -> dict[str, Any]:
    return envelope("report", run, data, "id-1", "test")


def test_encode_checked_round_trips_through_the_processor_codec() -> None:
    raw = encode_checked(
        _report(
            {
                "metrics": {"loss": math.nan, "acc": 1},
                "checkpoint": {"path": "/r/c1"},
                "validation": {"fn_kwargs": {"k": 1}, "timeout_s": 5},
            }
        )
    )
    event = decode_event(raw, b"run-1")
    assert not isinstance(event, Rejection) and event.type == "ckptlog.report.v1" and event.data.checkpoint is not None
    assert event.data.checkpoint.path == "/r/c1" and math.isnan(event.data.metrics["loss"])


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"metrics": {}, "checkpoint": None, "validation": False, "generaton": 1}, "remove it"),
        ({"metrics": {}, "checkpoint": None, "validation": "yes"}, "validation"),
        ({"metrics": [1], "checkpoint": None, "validation": False}, "metrics"),
        ({"metrics": {"x": object()}, "checkpoint": None, "validation": False}, "not JSON"),
        ({"metrics": {"blob": "x" * (1024 * 1024)}, "checkpoint": None, "validation": False}, "payload_too_large"),
    ],
)
def test_encode_checked_refuses_what_the_processor_would_reject(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidEvent, match=needle):
        encode_checked(_report(data))


def test_bad_run_id_is_refused_early() -> None:
    with pytest.raises(InvalidEvent, match="subject"):
        encode_checked(_report({"metrics": {}}, run="bad\nrun"))


class _Scalar:
    """Stands in for a numpy/torch scalar: `.item()` and `ndim == 0`."""

    ndim = 0

    def item(self) -> float:
        return 0.5


class _Array:
    def tolist(self) -> list[int]:
        return [1, 2]


def test_array_like_metrics_become_json() -> None:
    raw = encode_checked(_report({"metrics": {"acc": _Scalar(), "hist": _Array()}}))
    event = decode_event(raw, b"run-1")
    assert (
        not isinstance(event, Rejection)
        and event.type == "ckptlog.report.v1"
        and event.data.metrics == {"acc": 0.5, "hist": [1, 2]}
    )


def test_as_url(tmp_path: Path) -> None:
    assert as_url("s3://b/run", "x") == "s3://b/run"
    assert as_url(tmp_path / "a", "x") == str((tmp_path / "a").resolve())
    with pytest.raises(InvalidEvent, match="relative"):
        as_url("runs/a", "storage_path")


def test_validation_body() -> None:
    assert validation_body(True) is True
    assert validation_body({"timeout_s": 2}) == {"fn_kwargs": {}, "timeout_s": 2}
    assert validation_body(ValidationSpec(timeout_s=2.0)) == {"fn_kwargs": {}, "timeout_s": 2.0}
    with pytest.raises(InvalidEvent, match="validation"):
        validation_body(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidEvent, match=r"validation.timeout_s: Input should be greater than 0"):
        validation_body({"timeout_s": 0})
    with pytest.raises(InvalidEvent, match=r"validation.fn_kwarg"):
        validation_body({"fn_kwarg": {}})
