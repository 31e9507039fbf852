"""ckptlog.integrations.kept without Kafka: when the framework's view of the kept set reads the VIEW,
waits for this job's reports, and answers from the last one read (a recording reader stands in for the
state topic; the real one is tests/integration/test_trainers.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from ckptlog.client.view_table import WaitResult
from ckptlog.client.views import RunView
from ckptlog.integrations.kept import Kept, retention_note, score
from ckptlog.kafka.errors import KafkaIOError


def view(committed: int, *scores: float, latest: int | None = None) -> RunView:
    """A VIEW keeping one checkpoint per score (report i at /r/c-i), best last by `acc`."""
    ranked = sorted(range(len(scores)), key=lambda i: scores[i])
    checkpoints = [
        {"path": f"/r/c-{i}", "metrics": {"val": {"acc": scores[i]}}, "status": "COMMITTED", "report_index": i}
        for i in ranked
    ]
    last = latest if latest is not None else len(scores) - 1
    best = checkpoints[-1]["path"] if checkpoints else None
    return RunView.model_validate(
        {
            "checkpoints": checkpoints,
            "latest": f"/r/c-{last}",
            "best": best,
            "committed": committed,
            "validated": committed,
            "generation": 0,
            "index_in_generation": committed,
        }
    )


@dataclass
class Session:
    committed_before: int = 0
    reports: int = 0


@dataclass
class Run:
    """What Kept reads of a TrainerRun."""

    session: Session | None = None
    undelivered: int = 0
    run_id: str = "run-1"
    framework: str = "lightning"
    resume_timeout_s: float = 5.0
    retry_interval_s: float = 30.0


@dataclass
class Reader:
    """The state topic: `views` is what it holds; `reached` whether a wait finds its count."""

    views: list[RunView] = field(default_factory=list)
    reached: bool = True
    down: bool = False
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def view(self, run_id: str) -> RunView | None:
        self.calls.append(("view", run_id))
        return self._now()

    def wait_for(self, run_id: str, index: int, consistency: str, timeout_s: float) -> WaitResult:
        self.calls.append(("wait_for", run_id, index, consistency, timeout_s))
        return WaitResult(self._now(), self.reached)

    def _now(self) -> RunView | None:
        if self.down:
            raise KafkaIOError("Kafka at kafka:9092 is down")
        return self.views[-1] if self.views else None

    def close(self) -> None:
        self.calls.append(("close",))


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def kept(run: Run, reader: Reader, clock: Clock | None = None) -> Kept:
    return Kept(run, clock or Clock(), lambda: reader)  # type: ignore[arg-type]


def test_the_reporting_process_waits_for_every_report_it_sent_then_reads_nothing_new() -> None:
    run, reader = Run(Session(committed_before=3, reports=2)), Reader([view(5, 0.1, 0.9)])
    answers = kept(run, reader)
    assert answers.best_path() == "/r/c-1" and answers.latest_path() == "/r/c-1"
    assert reader.calls == [("wait_for", "run-1", 5, "committed", 5.0)]  # the VIEW counts all 5 reports
    assert answers.current() and answers.paths() == ["/r/c-0", "/r/c-1"]
    assert len(reader.calls) == 1  # nothing new reported: no read
    run.session.reports = 3  # type: ignore[union-attr]
    reader.views.append(view(6, 0.1, 0.9, 0.5))
    assert [c.path for c in answers.top(2)] == ["/r/c-1", "/r/c-2"] and answers.latest_path() == "/r/c-2"
    assert reader.calls[-1] == ("wait_for", "run-1", 6, "committed", 5.0)


def test_reports_held_back_by_an_outage_are_never_waited_for_and_the_view_is_not_current() -> None:
    run, reader = Run(Session(reports=1)), Reader([view(1, 0.5)])
    answers = kept(run, reader)
    assert answers.current()
    run.undelivered = 2  # two reports wait in the outbox (Kafka is away)
    assert not answers.current() and answers.best_path() == "/r/c-0"  # the last VIEW read, no wait
    assert len(reader.calls) == 1
    run.undelivered, run.session.reports = 0, 3  # type: ignore[union-attr]
    reader.views.append(view(3, 0.5, 0.7, 0.6))
    assert answers.current() and answers.best_path() == "/r/c-1"


def test_a_wait_that_times_out_warns_and_does_not_wait_for_the_same_reports_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run, reader = Run(Session(reports=2)), Reader([view(1, 0.5)], reached=False)  # the processor refused one
    answers = kept(run, reader)
    with caplog.at_level(logging.WARNING):
        assert answers.best_path() == "/r/c-0"
    assert "event=lightning_view_behind" in caplog.text and "ckptlog rejections RUN" in caplog.text
    answers.view()
    assert len(reader.calls) == 1


def test_a_failed_read_answers_from_the_last_view_and_retries_only_after_the_retry_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, run, reader = Clock(), Run(Session(reports=1)), Reader([view(1, 0.5)])
    answers = kept(run, reader, clock)
    assert answers.best_path() == "/r/c-0"
    run.session.reports, reader.down = 2, True  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING):
        assert answers.best_path() == "/r/c-0" and answers.best_path() == "/r/c-0"
    assert caplog.text.count("event=lightning_view_unread") == 1
    assert [c[0] for c in reader.calls] == ["wait_for", "wait_for", "close"]  # one try, then none until later
    clock.now, reader.down = 31.0, False
    reader.views.append(view(2, 0.5, 0.8))
    assert answers.best_path() == "/r/c-1"


def test_a_process_that_does_not_report_reads_at_most_once_a_second_and_a_pin_stops_reading() -> None:
    clock, reader = Clock(), Reader([view(2, 0.3, 0.2)])
    answers = kept(Run(), reader, clock)
    assert answers.best_path() == "/r/c-0" and answers.latest_path() == "/r/c-1"
    assert reader.calls == [("view", "run-1")]
    clock.now = 1.0
    answers.view()
    assert len(reader.calls) == 2
    answers.pin(view(3, 0.3, 0.2, 0.9))
    clock.now = 10.0
    assert answers.best_path() == "/r/c-2" and len(reader.calls) == 2
    answers.unpin()
    assert answers.best_path() == "/r/c-0" and len(reader.calls) == 3


def test_no_view_yet_answers_nothing() -> None:
    answers = kept(Run(), Reader())
    assert answers.best_path() is None and answers.latest_path() is None and answers.paths() == []
    assert answers.top(3) == [] and not answers.current()


@pytest.mark.parametrize(
    ("metrics", "attribute", "expected"),
    [
        ({"val": {"acc": 0.5}}, "val/acc", 0.5),
        ({"val/acc": 2}, "val/acc", 2.0),
        ({"acc": True}, "acc", None),
        ({"acc": "high"}, "acc", None),
        ({"loss": 1.0}, "acc", None),
        ({"acc": 1.0}, None, None),
    ],
)
def test_score_reads_the_metric_as_the_fold_does(metrics: dict[str, Any], attribute: str | None, expected: Any) -> None:
    checkpoint = view(1, 0.1).checkpoints[0].model_copy(update={"metrics": metrics})
    assert score(checkpoint, attribute) == expected


def test_the_retention_note_says_where_ckptlog_keeps_more(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ckptlog.integrations.kept"):
        retention_note(Run(), "Lightning's save_top_k=2", 2, "val_loss")  # type: ignore[arg-type]
        retention_note(Run(framework="orbax"), "Orbax's max_to_keep=None", None, None)  # type: ignore[arg-type]
    first, second = (r.getMessage() for r in caplog.records)
    assert "event=lightning_retention" in first and "the 2 best by 'val_loss'" in first
    assert (
        "Lightning's save_top_k=2" in first
        and "always the latest" in first
        and "later checkpoint ranks better" in first
    )
    assert "event=orbax_retention" in second and "every checkpoint" in second
