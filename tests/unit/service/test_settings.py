"""Settings of `ckptlog run`: flags > CKPTLOG_* env > config file > defaults; clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from processor.errors import ConfigError
from processor.service.settings import load_settings


def test_defaults() -> None:
    s = load_settings(None)
    assert (s.input_topic, s.state_topic, s.group_id, s.guarantee) == (
        "ckptlog.events",
        "ckptlog.state",
        "ckptlog",
        "exactly_once",
    )
    assert (s.snapshot_every, s.snapshot_interval_s, s.keep_snapshots) == (10_000, 60.0, 3)
    assert s.txn_prefix == "ckptlog"


def test_flags_beat_env_beat_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "ckptlog.toml"
    config.write_text('group-id = "from-file"\nsnapshot_every = 7\nscore_order = "min"\n')
    monkeypatch.setenv("CKPTLOG_GROUP_ID", "from-env")
    monkeypatch.setenv("CKPTLOG_SNAPSHOT_EVERY", "8")
    s = load_settings(config, snapshot_every=9, storage_root=None)
    assert (s.group_id, s.snapshot_every, s.score_order) == ("from-env", 9, "min")


def test_json_config_and_fold_settings(tmp_path: Path) -> None:
    config = tmp_path / "ckptlog.json"
    config.write_text(json.dumps({"storage_root": "file:///runs", "default_num_to_keep": 2, "score_attribute": "acc"}))
    fold = load_settings(config).fold_settings()
    assert fold.default_root == fold.outer_root == "file:///runs"
    assert (fold.default_config.num_to_keep, fold.default_config.checkpoint_score_attribute) == (2, "acc")


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"guarantee": "maybe_once"}, "guarantee"),
        ({"snapshot_every": 0}, "snapshot_every"),
        ({"state_topic": "ckptlog.events"}, "distinct"),
    ],
)
def test_invalid_settings_name_the_setting(values: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_settings(None, **values)


def test_unknown_key_in_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("snapshot_evry = 5\n")
    with pytest.raises(ConfigError, match="snapshot_evry.*c.toml"):
        load_settings(config)


def test_unreadable_or_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.toml")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_settings(bad)


@pytest.mark.parametrize("root", ["/", "file:///", "s3://bucket", "runs/here", "file:///runs/::memory"])
def test_an_unsafe_storage_root_is_refused(root: str) -> None:
    """The outer bound of every deletion (SPEC §9) must be a directory."""
    with pytest.raises(ConfigError, match="invalid setting storage_root"):
        load_settings(None, storage_root=root)
    assert load_settings(None, storage_root="s3://bucket/runs").storage_root == "s3://bucket/runs"
