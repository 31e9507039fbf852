"""ckptlog.integrations.ray without a Ray cluster: URL translation, validation bodies and the
callback's hooks against a recording Reporter (the real-Ray path is tests/integration/test_ray_train.py)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest

from ckptlog.events.event_ids import parse

ray_integration = pytest.importorskip("ckptlog.integrations.ray", reason="the ray extra is installed by make venv")
CkptlogCallback = ray_integration.CkptlogCallback
Outbox = ray_integration.Outbox
RunNotResumable = ray_integration.RunNotResumable
RaySession = pytest.importorskip("ckptlog.integrations.ray_session").RaySession
KafkaIOError = pytest.importorskip("ckptlog.kafka.errors").KafkaIOError
errors = pytest.importorskip("ckptlog.client.errors")
EventRejected, NotConfirmed = errors.EventRejected, errors.NotConfirmed


def rejected(reason: str, message: str) -> Any:
    """EventRejected as a confirming Reporter raises it (its dead letter reduced to the reason)."""
    return EventRejected(f"{reason}: {message}", SimpleNamespace(reason=reason))


class Checkpoint:
    """What the callback reads of `ray.train.Checkpoint`: hashable, as Ray's manager keys by it."""

    def __init__(self, path: str, fs: str | None) -> None:
        self.path, self.filesystem = path, SimpleNamespace(type_name=fs) if fs else None


def checkpoint(path: str, fs: str | None = "local") -> Any:
    return Checkpoint(path, fs)


@pytest.mark.parametrize(
    ("path", "fs", "url"),
    [
        ("/mnt/runs/a/checkpoint_000", "local", "/mnt/runs/a/checkpoint_000"),
        ("bucket/runs/a/checkpoint_000", "s3", "s3://bucket/runs/a/checkpoint_000"),
        ("bucket/a/ckpt", "gcs", "gs://bucket/a/ckpt"),
        ("s3://bucket/a/ckpt", None, "s3://bucket/a/ckpt"),
        ("/mnt/x", None, "/mnt/x"),
    ],
)
def test_checkpoint_url(path: str, fs: str | None, url: str) -> None:
    assert ray_integration.checkpoint_url(checkpoint(path, fs)) == url


def test_unknown_filesystem_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'weirdfs'.*local, s3"):
        ray_integration.checkpoint_url(checkpoint("x", "weirdfs"))


def test_validation_bodies() -> None:
    assert ray_integration.validation_body(None) is False
    assert ray_integration.validation_body(True) is True
    config = SimpleNamespace(fn_kwargs={"split": "val"}, timeout_s=30)
    assert ray_integration.validation_body(config) == {"fn_kwargs": {"split": "val"}, "timeout_s": 30}
    assert ray_integration.validation_body(SimpleNamespace(fn_kwargs=None, timeout_s=None)) == {
        "fn_kwargs": {},
        "timeout_s": None,
    }


class Recorder:
    """The Reporter's calls the session makes (`ckptlog.Reporter`'s signatures)."""

    run_id = "r"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.ids: list[str] = []
        self.view: Any = None  # the VIEW the processor would publish (see `running`)
        self.reopen_fails: Exception | None = None

    def run_started(self, root: str, **retention: Any) -> None:
        self.calls.append(("run_started", root, retention["num_to_keep"], retention.get("confirm")))

    def report(self, metrics: Any, path: Any, validation: Any, generation: Any, **ids: Any) -> None:
        self.calls.append(("report", metrics, path, validation, generation))
        self.ids.append(ids["event_id"])

    def worker_group_restart(self, workers: int, reason: str, *, generation: int | None = None) -> None:
        self.calls.append(("restart", workers, generation))

    def validation_result(self, path: str, status: str, metrics: dict[str, Any]) -> None:
        self.calls.append(("validation_result", path, status, metrics))

    def finish(self, keep: str | None, *, epoch: int = 0) -> None:
        self.calls.append(("finish", keep) if epoch == 0 else ("finish", keep, epoch))

    def reopen(self, *, epoch: int, confirm: bool) -> None:
        self.calls.append(("reopen", epoch, confirm))
        if self.reopen_fails is not None:
            raise self.reopen_fails
        if self.view is not None:  # the processor reopened it: its next VIEW says so
            self.view = SimpleNamespace(**{**vars(self.view), "finished": None, "reopened": epoch})

    def close(self) -> None:
        self.calls.append(("close",))


def running(callback: Any, view: Any = None) -> Recorder:
    recorder = Recorder()
    recorder.view = view
    callback._reporter = recorder
    callback._outbox = Outbox(RaySession(recorder, lambda: recorder.view), "r")  # type: ignore[arg-type]
    ray_integration._FORWARDING.append(callback._validated)
    return recorder


def group(workers: int) -> Any:
    return SimpleNamespace(get_workers=lambda: [object()] * workers)


def test_reports_carry_the_generation_after_a_restart() -> None:
    callback = CkptlogCallback("r", num_to_keep=2)
    recorder = running(callback)
    report = SimpleNamespace(metrics={"loss": 1.0}, checkpoint=checkpoint("/r/c0"), validation=True)
    callback.after_worker_group_start(group(2))
    callback.after_report(report, [{"loss": 1.0}])
    callback.after_worker_group_start(group(3))
    callback.after_report(SimpleNamespace(metrics={"loss": 0.5}, checkpoint=None, validation=True), [])
    callback.after_controller_finish()
    assert recorder.calls == [
        ("report", {"loss": 1.0}, "/r/c0", True, None),
        ("restart", 3, 1),
        ("report", {"loss": 0.5}, None, False, 1),  # no checkpoint: never a validation request
        ("finish", None),  # the controller finished without an error: the run is over
        ("close",),
    ]
    assert callback._validated not in ray_integration._FORWARDING


def resumed_view(generation: int, committed: int, finished: bool | None = None, reopened: int | None = None) -> Any:
    return SimpleNamespace(generation=generation, committed=committed, finished=finished, reopened=reopened)


def test_a_resumed_run_goes_on_as_a_new_worker_group_with_ids_of_its_own() -> None:
    """Issue 21 item 3: a second controller under the same run name continues after the VIEW."""
    first, second = CkptlogCallback("r"), CkptlogCallback("r")
    calls = []
    for callback, view in ((first, None), (second, resumed_view(generation=2, committed=3))):
        recorder = running(callback, view)
        callback._outbox.send("start", "/r", dict(callback.retention))
        callback.after_worker_group_start(group(1))
        for step in range(2):
            callback.after_report(SimpleNamespace(metrics={"step": step}, checkpoint=None, validation=False), [])
        calls.append((recorder.calls, list(recorder.ids)))
    (first_calls, first_ids), (second_calls, second_ids) = calls
    assert first_calls[0] == ("run_started", "/r", None, True)  # confirmed, so the VIEW after it is current
    assert [c[-1] for c in first_calls[1:]] == [None, None]  # a fresh run: generation 0, untagged
    assert second_calls[1] == ("restart", 1, 3)  # the VIEW's generation + 1
    assert [c[-1] for c in second_calls[2:]] == [3, 3]
    assert len(set(first_ids + second_ids)) == 4, "no report id of the second job repeats one of the first's"
    # structured (contract §3 "Deduplication"): producer a:{attempt}:{generation}, numbered by index
    parsed = [[parse(event_id, "r") for event_id in job] for job in (first_ids, second_ids)]
    assert all(key is not None for job in parsed for key in job)
    (one, two), (three, four) = parsed
    assert one[0] == two[0] != three[0] == four[0] and [one[1], two[1], three[1], four[1]] == [0, 1, 0, 1]
    assert one[0].startswith("a:") and one[0].endswith(":0") and three[0].endswith(":3")


def test_a_finished_run_is_reopened_first_and_goes_on_finishing_in_its_new_epoch() -> None:
    """Issue 38 item 6: Ray resumes a run after its first job succeeded (and finished it)."""
    callback = CkptlogCallback("r")
    recorder = running(callback, resumed_view(generation=0, committed=3, finished=True, reopened=1))
    callback._outbox.send("start", "/r", dict(callback.retention))
    callback.after_worker_group_start(group(2))
    callback.after_report(SimpleNamespace(metrics={"step": 3}, checkpoint=None, validation=False), [])
    callback.after_controller_finish()
    assert recorder.calls == [
        ("reopen", 2, True),  # confirmed, before the start: the VIEW's reopened + 1
        ("run_started", "/r", None, True),
        ("restart", 2, 1),  # a new worker group after the VIEW's generation
        ("report", {"step": 3}, None, False, 1),
        ("finish", None, 2),  # named by the epoch: not the earlier finishes' id
        ("close",),
    ]


@pytest.mark.parametrize(
    "failure, words",
    [
        (rejected("unknown_run", "run 'r' cannot be reopened: its record expired"), "expired"),
        (rejected("not_reopenable", "run 'r' cannot be reopened: forgotten"), "forgotten"),
        (NotConfirmed("the processor did not answer within 30 s"), "not confirmed"),
    ],
)
def test_a_finished_run_that_cannot_be_reopened_is_refused_before_it_trains(failure: Exception, words: str) -> None:
    callback = CkptlogCallback("r")
    recorder = running(callback, resumed_view(generation=0, committed=3, finished=True))
    recorder.reopen_fails = failure
    with pytest.raises(RunNotResumable, match=f"has finished.*{words}") as refused:
        callback._outbox.send("start", "/r", dict(callback.retention))
    assert recorder.calls == [("reopen", 1, True)]  # nothing else sent: no run_started, no report
    assert "RunConfig.name" in str(refused.value) or "start this job again" in str(refused.value)


def test_a_run_finished_after_its_view_was_read_is_reopened_when_the_start_is_refused() -> None:
    callback = CkptlogCallback("r")
    recorder = running(callback, resumed_view(generation=0, committed=3))
    started = recorder.run_started

    def refused_once(root: str, **retention: Any) -> None:
        started(root, **retention)
        if len(recorder.calls) == 1:  # the processor folded a finish the VIEW did not show yet
            recorder.view = resumed_view(generation=0, committed=3, finished=True)
            raise rejected("run_finished", "run 'r' has finished")

    recorder.run_started = refused_once  # type: ignore[method-assign]
    callback._outbox.send("start", "/r", dict(callback.retention))
    assert [c[0] for c in recorder.calls] == ["run_started", "reopen", "run_started"]


def test_a_retry_after_a_kafka_blip_repeats_the_report_id() -> None:
    recorder = Recorder()
    session = RaySession(recorder, lambda: None)  # type: ignore[arg-type]
    failing = {"left": 1}
    original = recorder.report

    def flaky(*args: Any, **kwargs: Any) -> None:
        recorder.ids.append(kwargs["event_id"])
        if failing["left"]:
            failing["left"] -= 1
            raise KafkaIOError("broker away")
        original(*args, **kwargs)

    recorder.report = flaky  # type: ignore[method-assign]
    outbox = Outbox(session, "r", retry_interval_s=0.0)
    outbox.send("report", 0, {"loss": 1.0}, None, False)
    assert outbox.pending and outbox.flush()
    assert recorder.ids[0] == recorder.ids[1] == recorder.ids[2]  # tried, retried, recorded: one id


def test_a_failed_run_is_not_finished_and_finish_can_be_turned_off() -> None:
    failed = CkptlogCallback("r")
    recorder = running(failed)
    failed.after_controller_finish(SimpleNamespace(error=RuntimeError("worker died")))
    assert recorder.calls == [("close",)]  # restoring it under the same name goes on with the same run
    off = CkptlogCallback("r", finish=False)
    recorder = running(off)
    off.after_controller_finish(SimpleNamespace(error=None))
    assert recorder.calls == [("close",)]
    best = CkptlogCallback("r", finish_keep="best")
    recorder = running(best)
    best.after_controller_finish(SimpleNamespace(error=None))
    assert recorder.calls == [("finish", "best"), ("close",)]


def test_ray_validation_results_are_forwarded_through_the_wrapped_manager() -> None:
    callback = CkptlogCallback("r")
    recorder = running(callback)
    manager_cls = ray_integration.CheckpointManager
    assert getattr(manager_cls.update_checkpoints_with_validation_result, "_ckptlog", False)
    status = {name: SimpleNamespace(name=name) for name in ("VALIDATED", "VALIDATION_FAILED", "PENDING")}
    try:
        callback._validated(
            None,
            {
                checkpoint("b/c1", "s3"): ({"acc": 0.9}, status["VALIDATED"]),
                checkpoint("/r/c2"): ({"acc": 0.1}, status["VALIDATION_FAILED"]),
                checkpoint("/r/c3"): ({}, status["PENDING"]),
            },
        )
    finally:
        callback.after_controller_finish()
    assert recorder.calls[:2] == [
        ("validation_result", "s3://b/c1", "VALIDATED", {"acc": 0.9}),
        ("validation_result", "/r/c2", "VALIDATION_FAILED", {}),  # metrics only with VALIDATED
    ]


def test_the_callback_pickles_without_its_producer() -> None:
    callback = CkptlogCallback("r", keep_every_n_steps=5, step_attribute="step")
    callback._reporter = Recorder()
    copy = pickle.loads(pickle.dumps(callback))
    assert copy._reporter is None
    assert copy.retention["keep_every_n_steps"] == 5 and copy.run_id == "r"


def test_hooks_before_the_controller_starts_do_nothing() -> None:
    callback = CkptlogCallback("r")
    callback.after_report(SimpleNamespace(metrics={}, checkpoint=checkpoint("/r/c"), validation=False), [])
    callback._validated(None, {checkpoint("/r/c"): ({}, SimpleNamespace(name="VALIDATED"))})
    assert callback._reporter is None
