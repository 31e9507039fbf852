"""Deleter behaviour that needs a controllable backend: retries, backoff, concurrency, refusal.

`flaky://` is a memory filesystem whose `rm` can fail, be slow, and counts what it sees.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.errors import StorageError
from ckptlog.events.paths import UnsafePath, is_within, normalize, parse_url, root_problem
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.storage import deletion
from ckptlog.processor.storage.apply import delete_now
from ckptlog.processor.storage.confinement import Confinement
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy, confinement_problem
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all

LOGGER = "ckptlog.processor.storage.deletion"
ROOT = "flaky://runs/r1"


class FlakyFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """A memory filesystem of its own whose `rm` fails `failures_left` times, then works."""

    protocol = "flaky"
    store: ClassVar[dict[str, Any]]
    pseudo_dirs: ClassVar[list[str]]
    failures_left: ClassVar[int] = 0
    rm_seconds: ClassVar[float] = 0.0
    rm_is_noop: ClassVar[bool] = False
    rm_calls: ClassVar[list[float]]
    rm_paths: ClassVar[list[str]]
    fail_paths: ClassVar[dict[str, int]]  # path suffix -> failures left for that path only
    in_flight: ClassVar[int] = 0
    max_in_flight: ClassVar[int] = 0
    lock: ClassVar[threading.Lock]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        return super()._strip_protocol(str(path).removeprefix("flaky://"))

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        cls = type(self)
        with cls.lock:
            cls.rm_calls.append(time.monotonic())
            cls.rm_paths.append(str(path))
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        try:
            time.sleep(cls.rm_seconds)
            with cls.lock:
                fail, cls.failures_left = cls.failures_left > 0, max(cls.failures_left - 1, 0)
                for suffix, left in cls.fail_paths.items():
                    if str(path).endswith(suffix) and left > 0:
                        fail, cls.fail_paths[suffix] = True, left - 1
            if fail:
                raise PermissionError(f"injected failure for {path}")
            if not cls.rm_is_noop:
                super().rm(path, recursive=recursive, maxdepth=maxdepth)
        finally:
            with cls.lock:
                cls.in_flight -= 1


@pytest.fixture
def flaky() -> Iterator[type[FlakyFS]]:
    """A fresh FlakyFS class (own store, counters, instance cache) registered as flaky://."""
    cls = type(
        "FlakyFSForTest",
        (FlakyFS,),
        {
            "store": {},
            "pseudo_dirs": [""],
            "rm_calls": [],
            "rm_paths": [],
            "fail_paths": {},
            "lock": threading.Lock(),
        },
    )
    fsspec.register_implementation("flaky", cls, clobber=True)
    yield cls


def put(url: str, data: bytes = b"w") -> None:
    fs, path = fsspec.core.url_to_fs(url)
    fs.pipe_file(path, data)


def exists(url: str) -> bool:
    fs, path = fsspec.core.url_to_fs(url)
    return bool(fs.exists(path))


def test_retry_policy_doubles_from_base_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=7, base_delay=0.1, max_delay=1.0)
    assert [policy.delay(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


async def test_failed_attempts_are_retried_with_backoff(flaky: type[FlakyFS], caplog: pytest.LogCaptureFixture) -> None:
    put(f"{ROOT}/ckpt_1/model.bin")
    flaky.failures_left = 2
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=5, base_delay=0.05), on_done=done.extend)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
        assert await deleter.drain(timeout=10)
    calls = flaky.rm_calls
    assert len(calls) == 3
    assert calls[1] - calls[0] >= 0.05 - 0.01 and calls[2] - calls[1] >= 0.10 - 0.01
    assert done == [("r1", f"{ROOT}/ckpt_1")] and not exists(f"{ROOT}/ckpt_1")
    assert sum("attempt 1 of 5" in r.getMessage() for r in caplog.records) == 1


async def test_exhausted_deletion_stays_outstanding_until_retried(
    flaky: type[FlakyFS], caplog: pytest.LogCaptureFixture
) -> None:
    put(f"{ROOT}/ckpt_1/model.bin")
    flaky.failures_left = 1000
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=3, base_delay=0.001), on_done=done.extend)
    key = ("r1", f"{ROOT}/ckpt_1")
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        deleter.submit(*key, ROOT)
        assert not await deleter.drain(timeout=10)
    assert len(flaky.rm_calls) == 3 and deleter.outstanding == set(deleter.failed) == {key}
    assert "injected failure" in deleter.failed[key]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "r1" in errors[0] and key[1] in errors[0]
    assert exists(f"{ROOT}/ckpt_1/model.bin") and done == []

    flaky.failures_left = 0
    assert deleter.retry_failed() == 1
    assert await deleter.drain(timeout=10)
    assert done == [key] and deleter.outstanding == frozenset() and deleter.failed == {}


async def test_resubmitting_a_failed_deletion_retries_it(flaky: type[FlakyFS]) -> None:
    put(f"{ROOT}/ckpt_1/model.bin")
    flaky.failures_left = 2
    deleter = Deleter(retry=RetryPolicy(max_attempts=2, base_delay=0.001))
    deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
    assert not await deleter.drain(timeout=10)
    assert deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
    assert await deleter.drain(timeout=10)
    assert len(flaky.rm_calls) == 3 and not exists(f"{ROOT}/ckpt_1")


async def test_deletion_counts_only_once_confirmed_gone(flaky: type[FlakyFS]) -> None:
    """A backend that reports success but keeps the data must not complete the deletion."""
    flaky.rm_is_noop = True
    put(f"{ROOT}/ckpt_1/model.bin")
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=2, base_delay=0.001), on_done=done.extend)
    deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
    assert not await deleter.drain(timeout=10)
    assert done == [] and "still exists after deleting" in deleter.failed[("r1", f"{ROOT}/ckpt_1")]


async def test_concurrency_is_bounded(flaky: type[FlakyFS]) -> None:
    flaky.rm_seconds = 0.05
    paths = [f"{ROOT}/ckpt_{i}" for i in range(10)]
    for path in paths:
        put(f"{path}/model.bin")
    deleter = Deleter(concurrency=3)
    for path in paths:
        deleter.submit("r1", path, ROOT)
    assert await deleter.drain(timeout=10)
    assert flaky.max_in_flight == 3 and len(flaky.rm_calls) == 10
    assert not any(exists(p) for p in paths)


async def test_submit_returns_at_once_and_reports_outstanding(flaky: type[FlakyFS]) -> None:
    flaky.rm_seconds = 0.3
    put(f"{ROOT}/ckpt_1/model.bin")
    deleter = Deleter()
    started = time.monotonic()
    deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
    deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)  # already in flight: not queued twice
    assert time.monotonic() - started < 0.1
    assert deleter.outstanding == {("r1", f"{ROOT}/ckpt_1")}
    assert not await deleter.drain(timeout=0.05)  # still running
    assert await deleter.drain(timeout=10)
    assert len(flaky.rm_calls) == 1 and deleter.outstanding == frozenset()


async def test_close_keeps_interrupted_work_outstanding(flaky: type[FlakyFS]) -> None:
    flaky.failures_left = 1000
    put(f"{ROOT}/ckpt_1/model.bin")
    deleter = Deleter(retry=RetryPolicy(max_attempts=50, base_delay=10.0))
    deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
    await asyncio.sleep(0.05)  # first attempt fails, then it waits 10 s
    await deleter.close()
    assert deleter.outstanding == {("r1", f"{ROOT}/ckpt_1")} and exists(f"{ROOT}/ckpt_1")
    with pytest.raises(StorageError, match="closed"):
        deleter.submit("r1", f"{ROOT}/ckpt_2", ROOT)


async def test_failing_on_done_is_logged_and_does_not_stop_others(
    flaky: type[FlakyFS], caplog: pytest.LogCaptureFixture
) -> None:
    for i in (1, 2):
        put(f"{ROOT}/ckpt_{i}/model.bin")

    def on_done(done: Sequence[tuple[str, str]]) -> None:
        raise RuntimeError("recorder is down")

    deleter = Deleter(on_done=on_done, concurrency=1)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        deleter.submit("r1", f"{ROOT}/ckpt_1", ROOT)
        assert await deleter.drain(timeout=10)
        deleter.submit("r1", f"{ROOT}/ckpt_2", ROOT)
        assert await deleter.drain(timeout=10)
    assert sum("on_done callback failed" in r.getMessage() for r in caplog.records) == 2
    assert deleter.outstanding == frozenset()
    assert not exists(f"{ROOT}/ckpt_1") and not exists(f"{ROOT}/ckpt_2")


async def test_missing_local_path_counts_as_deleted(tmp_path: Path) -> None:
    done: list[tuple[str, str]] = []
    deleter = Deleter(on_done=done.extend)
    assert deleter.submit("r1", f"{tmp_path}/runs/r1/never_written", f"{tmp_path}/runs/r1")
    assert await deleter.drain(timeout=10)
    assert done == [("r1", f"{tmp_path}/runs/r1/never_written")]


# --- batches ----------------------------------------------------------------------------


async def test_one_failing_path_in_a_batch_is_retried_alone(flaky: type[FlakyFS]) -> None:
    paths = [f"{ROOT}/ckpt_{i}" for i in range(5)]
    for path in paths:
        put(f"{path}/model.bin")
    flaky.fail_paths = {"/r1/ckpt_2": 2}
    calls: list[list[tuple[str, str]]] = []
    deleter = Deleter(
        concurrency=1, retry=RetryPolicy(max_attempts=5, base_delay=0.01), on_done=lambda keys: calls.append(list(keys))
    )
    assert deleter.submit_many([Deletion("r1", path, ROOT, 0) for path in paths]) == 5
    assert await deleter.drain(timeout=10)
    tried = [p.rsplit("/", 1)[1] for p in flaky.rm_paths]
    assert sorted(tried) == sorted([f"ckpt_{i}" for i in range(5)] + ["ckpt_2", "ckpt_2"])
    assert calls[0] == [("r1", p) for p in paths if not p.endswith("ckpt_2")]  # the batch, reported at once
    assert calls[1:] == [[("r1", paths[2])]]  # the failed path, after its own retries
    assert not any(exists(p) for p in paths) and deleter.outstanding == frozenset()


async def test_confinement_is_checked_per_path_in_a_batch(tmp_path: Path) -> None:
    for sub in ("runs/r1/ok_1", "runs/r1/ok_2", "runs/r2/ckpt", "elsewhere/r3/ckpt"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "model.bin").write_bytes(b"precious")
    root = f"{tmp_path}/runs/r1"
    done: list[tuple[str, str]] = []
    deleter = Deleter(outer_root=f"file://{tmp_path}/runs", on_done=done.extend)
    requests = [
        Deletion("r1", f"{root}/ok_1", root, 0),
        Deletion("r1", f"{tmp_path}/runs/r2/ckpt", root, 0),
        Deletion("r1", f"{root}/../r2/ckpt", root, 0),
        Deletion("r1", f"file://{root}/ok_2", root, 0),
        Deletion("r3", f"{tmp_path}/elsewhere/r3/ckpt", f"{tmp_path}/elsewhere/r3", 0),
        Deletion("r1", f"{root}/ok_*", root, 0),
    ]
    assert deleter.submit_many(requests) == 2
    assert await deleter.drain(timeout=10)
    assert sorted(done) == [("r1", f"{root}/ok_1"), ("r1", f"file://{root}/ok_2")]
    assert set(deleter.refused) == {(r.run_id, r.path) for r in requests} - set(done)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("model.bin")) == [
        "elsewhere/r3/ckpt/model.bin",
        "runs/r2/ckpt/model.bin",
    ]


async def test_back_to_back_submissions_share_thread_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker-thread call deletes a whole batch; batches are bounded in size and in number at once."""
    calls: list[int] = []
    running, most = [0], [0]
    original = deletion.remove_all

    def counting(urls: Sequence[str], options: Any, outer: str | None) -> list[str | None]:
        calls.append(len(urls))
        running[0] += 1
        most[0] = max(most[0], running[0])
        time.sleep(0.02)
        running[0] -= 1
        return original(urls, options, outer)

    monkeypatch.setattr(deletion, "remove_all", counting)
    root = f"{tmp_path}/runs/r1"
    deleter = Deleter(concurrency=2, batch_size=10)
    for i in range(35):
        assert deleter.submit("r1", f"{root}/ckpt_{i}", root)
    assert await deleter.drain(timeout=10)
    assert sum(calls) == 35 and max(calls) <= 10 and len(calls) <= 5 and most[0] <= 2


async def test_resubmitting_while_queued_or_backing_off_deletes_once(flaky: type[FlakyFS]) -> None:
    """A key lives in one place (queue, job, backoff, failed): resubmitting it meanwhile adds no work."""
    put(f"{ROOT}/ckpt_1/model.bin")
    put(f"{ROOT}/ckpt_2/model.bin")
    flaky.fail_paths = {"/r1/ckpt_1": 1}
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=3, base_delay=0.2), on_done=done.extend)
    requests = [Deletion("r1", f"{ROOT}/ckpt_1", ROOT, 0), Deletion("r1", f"{ROOT}/ckpt_2", ROOT, 0)]
    assert deleter.submit_many(requests + requests) == 4  # the second copies are already queued
    await asyncio.sleep(0.1)  # ckpt_2 gone, ckpt_1 failed once and is backing off
    assert deleter.submit_many(requests[:1]) == 1
    assert await deleter.drain(timeout=10)
    assert sorted(p.rsplit("/", 1)[1] for p in flaky.rm_paths) == ["ckpt_1", "ckpt_1", "ckpt_2"]
    assert sorted(done) == [("r1", f"{ROOT}/ckpt_1"), ("r1", f"{ROOT}/ckpt_2")]
    assert deleter.outstanding == frozenset()


def test_local_removal_reports_unexpected_errors_per_path(tmp_path: Path) -> None:
    (tmp_path / "gone.bin").write_bytes(b"1")
    root = f"file://{tmp_path}"
    outcomes = remove_all([(f"{root}/bad\x00name", root, "r"), (f"{root}/gone.bin", root, "r")], {})
    assert isinstance(outcomes[0], str) and "null" in outcomes[0] and outcomes[1] is None
    assert not (tmp_path / "gone.bin").exists()


def test_local_removal_unlinks_links_removes_trees_and_reports_per_path(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.bin").write_bytes(b"keep")
    root = tmp_path / "runs/r1"
    (root / "tree/sub").mkdir(parents=True)
    (root / "tree/sub/opt.bin").write_bytes(b"1")
    (root / "file.bin").write_bytes(b"1")
    (root / "link").symlink_to(outside, target_is_directory=True)
    urls = [f"file://{root}/{name}" for name in ("file.bin/below", "link", "tree", "file.bin", "missing")]
    outcomes = remove_all([(url, f"file://{root}", "r1") for url in urls], {})
    assert isinstance(outcomes[0], Refused) and "'file.bin'" in outcomes[0].reason and urls[0] in outcomes[0].reason
    assert outcomes[1:] == [None, None, None, None]  # one refusal fails nothing else
    assert (outside / "keep.bin").read_bytes() == b"keep"  # the link was removed, not followed
    assert sorted(p.name for p in root.iterdir()) == []


# --- confinement ------------------------------------------------------------------------


def refusal_cases(base: str) -> dict[str, tuple[str, str]]:
    """(path, root) pairs that must be refused; `base/runs/r1/ckpt` is the real directory."""
    root = f"{base}/runs/r1"
    return {
        "other run": (f"{base}/runs/r2/ckpt", root),
        "dot-dot": (f"{root}/../r2/ckpt", root),
        "dot-dot to itself": (f"{root}/ckpt/../ckpt", root),
        "the root itself": (root, root),
        "other protocol": (f"memory://{base}/runs/r1/ckpt", root),
        "outside outer root": (f"{base}/elsewhere/r1/ckpt", f"{base}/elsewhere/r1"),
        "glob": (f"{root}/ck*", root),
        "relative path": (f"{base.lstrip('/')}/runs/r1/ckpt", root),
        "empty": ("", root),
    }


@pytest.mark.parametrize("case", list(refusal_cases("/b")))
async def test_refused_paths_are_never_touched(case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for sub in ("runs/r1/ckpt", "runs/r2/ckpt", "elsewhere/r1/ckpt"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "model.bin").write_bytes(b"precious")
    path, root = refusal_cases(str(tmp_path))[case]
    deleter = Deleter(outer_root=f"file://{tmp_path}/runs")
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert deleter.submit("r1", path, root) is False
    assert await deleter.drain(timeout=5)
    assert set(deleter.refused) == {("r1", path)} and deleter.outstanding == frozenset()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("model.bin")) == [
        "elsewhere/r1/ckpt/model.bin",
        "runs/r1/ckpt/model.bin",
        "runs/r2/ckpt/model.bin",
    ]
    assert all(p.read_bytes() == b"precious" for p in tmp_path.rglob("model.bin"))
    assert any(
        "refusing to delete" in r.getMessage() and "r1" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.ERROR
    )


async def test_confined_path_is_accepted_and_deleted(tmp_path: Path) -> None:
    """The positive control for the refusal cases: same layout, a legitimate path."""
    (tmp_path / "runs/r1/ckpt").mkdir(parents=True)
    (tmp_path / "runs/r1/ckpt/model.bin").write_bytes(b"evicted")
    deleter = Deleter(outer_root=f"file://{tmp_path}/runs")
    assert deleter.submit("r1", f"file://{tmp_path}/runs/r1/ckpt", f"{tmp_path}/runs/r1")
    assert await deleter.drain(timeout=10)
    assert not (tmp_path / "runs/r1/ckpt").exists() and (tmp_path / "runs/r1").is_dir()


@pytest.mark.parametrize(
    ("path", "root", "outer", "reason"),
    [
        ("s3://b/runs/r1/c", "s3://b/runs/r1", None, None),
        ("s3://b/runs/r1/c", "s3://b/runs/r1", "s3://b/runs", None),
        ("s3://b/runs/r1/c", "s3://b/runs/r1", "s3://other", "storage bound"),
        ("s3://b/runs/r1/c", "gs://b/runs/r1", None, "storage root"),
        ("s3://b/runs/r1/c?", "s3://b/runs/r1", None, "query mark"),
        ("s3://b/runs/r1/::memory", "s3://b/runs/r1", None, "URL chaining"),
        ("s3://b/runs/r1/c", "s3://b", None, "bucket"),
        ("/abs/r1/c", "/", None, "filesystem root"),
        ("/abs/r1/c", "abs/r1", None, "relative"),
        ("/abs/r1/c", "/abs/r1", "rel", "relative"),
    ],
)
def test_confinement_problem(path: str, root: str, outer: str | None, reason: str | None) -> None:
    problem = confinement_problem(path, root, outer)
    assert problem is None if reason is None else reason in (problem or "")


def reference_problem(path: str, root: str, outer_root: str | None) -> str | None:
    """The definition Confinement must agree with: every URL parsed in full, is_within per bound."""
    try:
        parse_url(path)
    except UnsafePath as exc:
        return str(exc)
    if root_problem(root):
        return f"the run's storage root is unsafe: {root_problem(root)}"
    if outer_root is not None and root_problem(outer_root):
        return f"the processor's storage bound is unsafe: {root_problem(outer_root)}"
    if not is_within(root, path):
        return f"it is not strictly under the run's storage root {root}"
    if outer_root is not None and not is_within(outer_root, path):
        return f"it is not strictly under the processor's storage bound {outer_root}"
    return None


PROTOCOL = st.sampled_from(["", "file://", "s3://", "S3://", "memory://", "local://"])
SEGMENTS = st.lists(st.sampled_from(["a", "b", "", ".", "..", "c*", "x y"]), max_size=4)


def spell(protocol: str, segments: list[str], lead: bool) -> str:
    return protocol + ("/" if lead else "") + "/".join(segments)


@settings(max_examples=400, deadline=None)
@given(PROTOCOL, SEGMENTS, st.booleans(), PROTOCOL, SEGMENTS, st.booleans(), st.lists(SEGMENTS, max_size=1))
def test_confinement_agrees_with_the_full_parse(
    proto: str,
    segs: list[str],
    lead: bool,
    root_proto: str,
    root_segs: list[str],
    root_lead: bool,
    outer: list[list[str]],
) -> None:
    root = spell(root_proto, root_segs, root_lead)
    path = spell(proto, root_segs + segs, lead) if segs and segs[0] == "a" else spell(proto, segs, lead)
    outer_root = spell(root_proto, outer[0], root_lead) if outer else None
    confinement = Confinement(outer_root)
    for _ in range(2):  # the second answer comes from the root cache
        problem, url, _root = confinement.check(path, root)
        assert problem == reference_problem(path, root, outer_root), (path, root, outer_root)
        if problem is None:
            assert url == normalize(path)


# --- delete_now: the one-shot form used by `ckptlog fold --apply` ------------------------


def test_delete_now_deletes_and_reports_refusals_and_failures(flaky: type[FlakyFS], tmp_path: Path) -> None:
    (tmp_path / "runs/r1/ckpt_1").mkdir(parents=True)
    (tmp_path / "runs/r2/ckpt_1").mkdir(parents=True)
    put(f"{ROOT}/ckpt_9/model.bin")
    flaky.failures_left = 1000
    messages = delete_now(
        [
            Deletion("r1", f"{tmp_path}/runs/r1/ckpt_1", f"{tmp_path}/runs/r1", 0),
            Deletion("r1", f"{tmp_path}/runs/r2/ckpt_1", f"{tmp_path}/runs/r1", 0),
            Deletion("r1", f"{ROOT}/ckpt_9", ROOT, 0),
        ],
        retry=RetryPolicy(max_attempts=2, base_delay=0.001),
    )
    assert not (tmp_path / "runs/r1/ckpt_1").exists()
    assert (tmp_path / "runs/r2/ckpt_1").is_dir() and exists(f"{ROOT}/ckpt_9/model.bin")
    assert len(messages) == 2
    assert messages[0].startswith(f"refused to delete {tmp_path}/runs/r2/ckpt_1 for run r1")
    assert messages[1].startswith(f"could not delete {ROOT}/ckpt_9 for run r1")


@pytest.mark.parametrize(
    "path, root, outer, reason",
    [
        ("file:///data/r/ck1", "file:///data/r", None, None),  # canonical and below: the one-regex path
        ("file:///data/r/ck1", "file:///data/r", "file:///data", None),
        (
            "file:///data/r/ck1",
            "file:///data/r",
            "file:///other",
            "storage bound",
        ),  # canonical, outside the outer bound
        ("file:///data/r/ck1", "file:///data/r", "", "empty path"),  # a broken outer bound refuses everything
        ("file:///data/r*/ck1", "file:///data/r*", None, "glob character"),  # a glob in the root itself
        ("file:///data/r/ck[1]", "file:///data/r", None, "glob character"),
        ("file:///data/r/.hidden/x", "file:///data/r", None, None),  # not canonical-fast, but still allowed
        ("file:///data/r/../x", "file:///data/r", None, ".."),
    ],
)
def test_canonical_fast_path_keeps_every_bound(path: str, root: str, outer: str | None, reason: str | None) -> None:
    confinement = Confinement(outer)
    for _ in range(2):  # the second answer comes from the root cache
        problem, _url, _root = confinement.check(path, root)
        assert problem == reference_problem(path, root, outer)
        assert problem is None if reason is None else reason in (problem or "")


@pytest.mark.parametrize(
    ("root", "outer", "inside"),
    [
        ("file:///b/runs/r1", "file:///b/runs", True),
        ("file:///b/runs", "file:///b/runs", True),
        ("file:///b/runsx/r1", "file:///b/runs", False),
        ("file:///b/r1", None, True),
        ("file:///b/../r1", "file:///b", False),
        ("file:///b/runs/r1", "file:///b/../runs", False),
    ],
)
def test_a_root_is_checked_against_the_outer_bound_once(root: str, outer: str | None, inside: bool) -> None:
    """The per-path fast check relies on the root lying within the outer bound; the verdict per path
    stays what the full checks say."""
    confinement = Confinement(outer)
    problem, _, _ = confinement.check(f"{root}/ckpt", root)
    assert (problem is None) is inside and confinement._roots[root].inside is inside
