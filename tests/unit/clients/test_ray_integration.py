"""ckptlog.integrations.ray without a Ray cluster: URL translation, validation bodies and the
callback's hooks against a recording Reporter (the real-Ray path is tests/integration/test_ray_train.py)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest

ray_integration = pytest.importorskip("ckptlog.integrations.ray", reason="the ray extra is installed by make venv")
CkptlogCallback = ray_integration.CkptlogCallback
Outbox = ray_integration.Outbox


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
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def report(self, *args: Any) -> None:
        self.calls.append(("report", *args))

    def worker_group_restart(self, workers: int, reason: str) -> None:
        self.calls.append(("restart", workers))

    def validation_result(self, path: str, status: str, metrics: dict[str, Any]) -> None:
        self.calls.append(("validation_result", path, status, metrics))

    def finish(self, keep: str | None) -> None:
        self.calls.append(("finish", keep))

    def close(self) -> None:
        self.calls.append(("close",))


def running(callback: Any) -> Recorder:
    recorder = Recorder()
    callback._reporter = recorder
    callback._outbox = Outbox(recorder, "r")
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
        ("restart", 3),
        ("report", {"loss": 0.5}, None, False, 1),  # no checkpoint: never a validation request
        ("finish", None),  # the controller finished without an error: the run is over
        ("close",),
    ]
    assert callback._validated not in ray_integration._FORWARDING


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
