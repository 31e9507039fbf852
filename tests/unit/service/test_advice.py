"""Set-ups that work but surprised a new user get a warning (issue 17 item 6)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ckptlog.processor.service.advice import start_advice
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.restore import restore
from ckptlog.processor.service.settings import load_settings
from tests.unit.service.test_restore import PID, SETTINGS, Offsets, store_with


async def test_an_instance_without_partitions_says_it_is_idle(caplog: pytest.LogCaptureFixture) -> None:
    """A second processor on a 1-partition topic sat idle without a word."""
    processor = Processor(load_settings(None, bootstrap_servers="unused:9092", group_id="g1"))
    with caplog.at_level(logging.INFO, "ckptlog.processor.service.processor"):
        await processor.driver.partitions_assigned([])
    idle = [r for r in caplog.records if "event=idle" in r.getMessage()]
    assert idle and idle[0].levelno == logging.WARNING
    assert "group=g1 topic=ckptlog.events" in idle[0].getMessage() and "--topic-partitions" in idle[0].getMessage()


def test_no_snapshots_flag_is_called_out(tmp_path: Path) -> None:
    """`ckptlog run` without --snapshots kept them on this host's disk without saying so."""
    [advice] = start_advice(load_settings(None))
    assert advice.startswith("event=default_snapshots") and "--snapshots" in advice
    assert start_advice(load_settings(None, snapshots=str(tmp_path))) == []


async def test_a_restore_that_folds_the_whole_log_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        await restore(PID, Offsets(0, 500, 400), store_with(tmp_path / "a", None), SETTINGS, False)
    assert "event=full_replay" in caplog.text and "records=500" in caplog.text and "no snapshot under" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await restore(PID, Offsets(0, 500, 400), store_with(tmp_path / "b", 300), SETTINGS, False)
        await restore(PID, Offsets(0, 0, None), store_with(tmp_path / "c", None), SETTINGS, False)  # empty log
    assert "full_replay" not in caplog.text
