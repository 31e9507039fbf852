"""The check after a restore that every kept checkpoint exists (service/checks.py): on a real
directory tree it reports exactly what one `path_exists` per path reports, in the order given,
with a bounded number of tasks and threads however many paths, and stops when cancelled."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from pathlib import Path

import pytest

from ckptlog.errors import StorageError
from ckptlog.processor.service import checks
from ckptlog.processor.service.checks import BATCH, find_missing, path_exists


def tree(tmp_path: Path, runs: int, per_run: int, seed: int = 7) -> dict[str, list[str]]:
    """`runs` runs' kept paths below tmp_path: directories, files, missing ones, a dangling link,
    a link to a directory, a hostile spelling (a storage error: counted as present)."""
    rng, kept = random.Random(seed), {}
    for n in range(runs):
        root = tmp_path / f"run-{n}"
        root.mkdir()
        urls = []
        for k in range(per_run):
            path, kind = root / f"ckpt-{k}", rng.choice(["dir", "file", "missing", "missing", "dangling", "link"])
            if kind == "dir":
                path.mkdir()
            elif kind == "file":
                path.write_bytes(b"x")
            elif kind == "dangling":
                path.symlink_to(tmp_path / "nowhere")
            elif kind == "link":
                path.symlink_to(root)
            urls.append(f"file://{path}")
        if n % 5 == 0:
            urls.append(f"file://{root}/../run-{n}/ckpt-0")  # unsafe spelling: StorageError
        kept[f"run-{n}"] = urls
    return kept


def one_by_one(kept: dict[str, list[str]]) -> dict[str, list[str]]:
    """What a plain loop over `path_exists` reports (a storage error counted as present)."""
    missing: dict[str, list[str]] = {}
    for run_id, urls in kept.items():
        for url in urls:
            try:
                exists = path_exists(url)
            except StorageError:
                exists = True
            if not exists:
                missing.setdefault(run_id, []).append(url)
    return missing


def test_it_reports_what_one_check_per_path_reports_in_order(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kept = tree(tmp_path, runs=40, per_run=9)
    want = one_by_one(kept)
    assert want and sum(map(len, want.values())) > BATCH * 2  # several batches hold missing paths
    with caplog.at_level(logging.WARNING):
        got = asyncio.run(find_missing(kept, concurrency=3))
    assert got == want and list(got) == list(want)
    failed = [r.getMessage() for r in caplog.records if "event=checkpoint_check_failed" in r.getMessage()]
    assert len(failed) == 8 and all("treated as present" in m for m in failed)  # runs 0, 5, ..., 35


def test_nothing_to_check_reports_nothing() -> None:
    assert asyncio.run(find_missing({})) == {}
    assert asyncio.run(find_missing({"a": [], "b": []})) == {}


def test_many_paths_take_a_bounded_number_of_tasks_threads_and_hand_overs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 kept paths: at most `concurrency` workers and threads, one hand-over per batch."""
    present = tmp_path / "present"
    present.mkdir()
    kept = {f"run-{n}": [f"file://{present}", f"file://{tmp_path}/gone-{n}"] for n in range(10_000)}
    handed = 0
    real = checks._missing_of

    def counted(*args: object) -> list[int]:
        nonlocal handed
        handed += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(checks, "_missing_of", counted)

    async def run() -> tuple[dict[str, list[str]], int, int]:
        most_tasks = most_threads = 0
        check = asyncio.create_task(find_missing(kept, concurrency=4))
        while not check.done():
            most_tasks = max(most_tasks, len(asyncio.all_tasks()))
            most_threads = max(most_threads, sum(t.name.startswith("ckptlog-check") for t in threading.enumerate()))
            await asyncio.sleep(0.001)
        return await check, most_tasks, most_threads

    got, most_tasks, most_threads = asyncio.run(run())
    assert got == {f"run-{n}": [f"file://{tmp_path}/gone-{n}"] for n in range(10_000)}
    assert most_tasks <= 1 + 1 + 4  # this coroutine, the check, its workers
    assert 1 <= most_threads <= 4
    assert handed == 20_000 // BATCH + (1 if 20_000 % BATCH else 0)


def test_a_cancelled_check_stops_its_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, lock = [0], threading.Lock()

    def slow(url: str, storage_options: object = None) -> bool:
        time.sleep(0.005)
        with lock:
            calls[0] += 1
        return False

    monkeypatch.setattr(checks, "path_exists", slow)
    kept = {f"run-{n}": [f"file://{tmp_path}/c-{n}"] for n in range(5_000)}

    async def run() -> None:
        check = asyncio.create_task(find_missing(kept, concurrency=4))
        await asyncio.sleep(0.2)
        check.cancel()
        with pytest.raises(asyncio.CancelledError):
            await check

    asyncio.run(run())
    at_cancel = calls[0]
    time.sleep(0.3)
    assert 0 < calls[0] <= at_cancel + 4  # each thread finished at most the path it was checking
    assert calls[0] < 1_000
    assert not any(t.name.startswith("ckptlog-check") and t.is_alive() for t in threading.enumerate())
