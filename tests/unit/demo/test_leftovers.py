"""What a demo leaves and how the next one clears it: only a directory that is exactly a demo's,
never through a symlink, never a path the record merely names (ckptlog/demo/leftovers.py)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from ckptlog.demo import leftovers as lo
from ckptlog.demo.runner import demo_settings
from ckptlog.processor.service.settings import load_settings


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTLOG_HOME", str(tmp_path / "home"))


def _demo_dir(tmp_path: Path, name: str = "ckptlog-demo-abc") -> Path:
    workdir = tmp_path / name
    (workdir / "runs" / "r").mkdir(parents=True)
    (workdir / "runs" / "r" / "ckpt").write_text("x")
    lo.write_config(demo_settings("127.0.0.1:1", "ckptlog-demo-abc", workdir), workdir)
    return workdir


def test_the_config_file_is_one_every_command_loads_with_the_demos_topics(tmp_path: Path) -> None:
    workdir = _demo_dir(tmp_path)
    path = workdir / lo.CONFIG_NAME
    assert tomllib.loads(path.read_text())["state_topic"] == "ckptlog-demo-abc.state"
    settings = load_settings(path)
    assert (settings.state_topic, settings.dlq_topic, settings.group_id) == (
        "ckptlog-demo-abc.state",
        "ckptlog-demo-abc.dlq",
        "ckptlog-demo-abc",
    )
    assert settings.bootstrap_servers == "127.0.0.1:1" and settings.storage_root is not None


def test_a_remembered_demo_is_recalled_and_its_directory_removed(tmp_path: Path) -> None:
    workdir = _demo_dir(tmp_path)
    lo.remember(lo.Leftovers.of(demo_settings("b:1", "ckptlog-demo-abc", workdir), workdir))
    last = lo.recalled()
    assert last is not None and last.workdir == workdir
    assert lo.demo_topics(last, "b:1") == list(last.topics) and len(last.topics) == 6
    assert lo.demo_topics(last, "other:1") == [], "topics on another broker are never touched"
    lo.clear_files(last, tmp_path / "ckptlog-demo-new")
    assert not workdir.exists() and lo.recalled() is None


@pytest.mark.parametrize("body", ["", "{", "[]", '{"topics": 3}', '{"bootstrap_servers": "b", "topics": []}'])
def test_an_unreadable_record_recalls_nothing(body: str) -> None:
    lo.record_path().parent.mkdir(parents=True)
    lo.record_path().write_text(body)
    assert lo.recalled() is None


def test_topics_a_demo_did_not_name_are_not_deleted(tmp_path: Path) -> None:
    body = {"bootstrap_servers": "b:1", "topics": ["ckptlog.events", "ckptlog-demo-x.events"], "workdir": "/nowhere"}
    lo.record_path().parent.mkdir(parents=True)
    lo.record_path().write_text(json.dumps(body))
    last = lo.recalled()
    assert last is not None and lo.demo_topics(last, "b:1") == ["ckptlog-demo-x.events"]


def test_a_directory_that_is_not_a_demos_is_kept(tmp_path: Path) -> None:
    precious = tmp_path / "experiments"  # a record edited (or written by a careless script) to name it
    precious.mkdir()
    (precious / lo.CONFIG_NAME).write_text("x")
    assert not lo.remove_workdir(precious) and (precious / lo.CONFIG_NAME).exists()
    unmarked = tmp_path / "ckptlog-demo-unmarked"
    unmarked.mkdir()
    (unmarked / "data").write_text("x")
    assert not lo.remove_workdir(unmarked) and (unmarked / "data").exists()
    assert not lo.remove_workdir(tmp_path / "ckptlog-demo-missing")


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    target = _demo_dir(tmp_path, "ckptlog-demo-target")
    link = tmp_path / "ckptlog-demo-link"
    os.symlink(target, link)
    assert not lo.remove_workdir(link) and (target / "runs" / "r" / "ckpt").exists()
    marked_by_link = tmp_path / "ckptlog-demo-fake"
    marked_by_link.mkdir()
    (marked_by_link / "keep").write_text("x")
    os.symlink(target / lo.CONFIG_NAME, marked_by_link / lo.CONFIG_NAME)
    assert not lo.remove_workdir(marked_by_link) and (marked_by_link / "keep").exists()


def test_the_current_demos_directory_is_never_cleared_as_the_last(tmp_path: Path) -> None:
    workdir = _demo_dir(tmp_path)
    last = lo.Leftovers("b:1", (), workdir)
    lo.clear_files(last, workdir / ".." / workdir.name)
    assert workdir.exists()
