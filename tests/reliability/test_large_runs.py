"""No run's size stops the processor (contract §7, issue 13 case 5): a keep-all run with 300,000 kept
checkpoints is served, every state-topic record stays far below the broker's limit, and a AsyncReader
gets every kept checkpoint back, best last.

Before bounded views a keep-all run of ~100k checkpoints made a view record larger than the
broker accepts; every transaction carrying it failed and, after 5 rebuilds, `TooManyRebuilds`
stopped the processor for every run on that partition.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from ckptlog import AsyncReader
from ckptlog.client.connect import Topics
from ckptlog.kafka import read_topic
from ckptlog.processor.service.harness import produce_events, running
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

KEPT = int(os.environ.get("CKPTLOG_TEST_LARGE_RUN", "300000"))
pytestmark = pytest.mark.timeout(900)


async def test_a_keep_all_run_of_300k_checkpoints_is_served_and_read_back_whole(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, max_batch_records=20_000)
    root = f"{settings.storage_root}/big"
    lines = [f.started("big", root, attr="acc", event_id="start")]
    lines += [f.report("big", {"acc": (i * 7919) % 100_003}, f"{root}/c{i}", event_id=f"r{i}") for i in range(KEPT)]
    conn = conn_of(settings)
    started = time.monotonic()
    async with running(settings, ready_timeout_s=60):
        await produce_events(conn, settings.input_topic, lines)
        topics = Topics(
            settings.input_topic, settings.validations_topic, settings.state_topic, settings.watermarks_topic
        )
        async with AsyncReader(connection=conn, topics=topics) as reader:
            result = await reader.wait_for("big", KEPT, "committed", timeout_s=600)
    assert result.reached, f"the committed watermark did not reach {KEPT} in time"
    kept = result.checkpoints
    assert len(kept) == KEPT and len({c.path for c in kept}) == KEPT
    scores = [c.metrics["acc"] for c in kept]
    assert scores == sorted(scores), "not in sort order, best last"
    assert kept[-1].path == result.view.best  # type: ignore[union-attr]
    sizes = [len(r.value or b"") for r in await read_topic(conn, settings.state_topic)]
    assert max(sizes) < 1024 * 1024, f"a state record of {max(sizes)} bytes"
    print(f"{KEPT} kept checkpoints served and read back in {time.monotonic() - started:.0f} s; "
          f"{len(sizes)} state records, the largest {max(sizes)} bytes")  # fmt: skip
