"""The Ray Train hook's translation, without Ray: Ray-style (metrics, checkpoint) -> Reporter calls."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from examples.ray_train_hook import ReportCall, checkpoint_url, ckptlog_callback, forward, to_report


def ray_checkpoint(path: str, fs: str | None = "local") -> Any:
    return SimpleNamespace(path=path, filesystem=SimpleNamespace(type_name=fs) if fs else None)


def test_module_does_not_import_ray() -> None:
    assert "ray" not in sys.modules


@pytest.mark.parametrize(
    ("path", "fs", "url"),
    [
        ("/mnt/runs/a/checkpoint_000", "local", "/mnt/runs/a/checkpoint_000"),
        ("bucket/runs/a/checkpoint_000", "s3", "s3://bucket/runs/a/checkpoint_000"),
        ("bucket/a/ckpt", "gcs", "gs://bucket/a/ckpt"),
        ("s3://bucket/a/ckpt", None, "s3://bucket/a/ckpt"),
    ],
)
def test_checkpoint_url(path: str, fs: str | None, url: str) -> None:
    assert checkpoint_url(ray_checkpoint(path, fs)) == url


def test_unknown_filesystem_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'weirdfs'"):
        checkpoint_url(ray_checkpoint("x", "weirdfs"))


def test_rank_zero_metrics_and_the_checkpoint_become_one_report() -> None:
    call = to_report(
        [{"loss": 0.1, "epoch": 2}, {"loss": 0.2, "epoch": 2}], ray_checkpoint("b/ckpt", "s3"), {"timeout_s": 30}
    )
    assert call == ReportCall({"loss": 0.1, "epoch": 2}, "s3://b/ckpt", {"timeout_s": 30})


def test_a_report_without_checkpoint_never_asks_for_validation() -> None:
    assert to_report({"loss": 1.0}, None, True) == ReportCall({"loss": 1.0}, None, False)
    assert to_report([], None) == ReportCall({}, None, False)


def test_forward_calls_the_reporter() -> None:
    calls: list[tuple[Any, ...]] = []
    fake = SimpleNamespace(report=lambda *args: calls.append(args))
    forward(fake, ReportCall({"a": 1}, "/r/c", True))  # type: ignore[arg-type]
    assert calls == [({"a": 1}, "/r/c", True)]


def test_building_the_callback_without_ray_says_how_to_install_it() -> None:
    if "ray" in sys.modules or _has_ray():
        pytest.skip("ray is installed")
    with pytest.raises(ImportError, match=r"ray\[train\]"):
        ckptlog_callback("run", "s3://b/run")


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None
