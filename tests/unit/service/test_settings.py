"""Settings of `ckptlog run`: flags > CKPTLOG_* env > config file > defaults; clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptlog.errors import ConfigError
from ckptlog.processor.service.settings import load_settings


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
    """The outer bound of every deletion (contract §9) must be a directory."""
    with pytest.raises(ConfigError, match="invalid setting storage_root"):
        load_settings(None, storage_root=root)
    assert load_settings(None, storage_root="s3://bucket/runs").storage_root == "s3://bucket/runs"


@pytest.mark.parametrize("ms", [3000, 5999, 1_800_001])
def test_a_session_timeout_the_broker_refuses_is_refused_up_front(ms: int) -> None:
    """Issue 17 item 7: below the broker's group.min.session.timeout.ms (6000 by default) the group
    refused the processor at join, and it exited with an unrelated-looking Kafka error."""
    with pytest.raises(ConfigError, match=rf"session_timeout_ms={ms} lies outside 6000..1800000"):
        load_settings(None, session_timeout_ms=ms)
    assert load_settings(None, session_timeout_ms=6000).session_timeout_ms == 6000


def test_run_has_a_session_timeout_flag() -> None:
    from typer.testing import CliRunner

    from ckptlog.cli.main import _register, app

    _register(["run"])
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "--session-timeout-ms" in result.output and "--group-instance-id" in result.output


def test_a_misspelt_environment_variable_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17 item 6: `snapshot_evry` in a config file is refused; the same typo in the
    environment was silently ignored."""
    monkeypatch.setenv("CKPTLOG_SNAPSHOT_EVRY", "5")
    with pytest.raises(ConfigError, match=r"CKPTLOG_SNAPSHOT_EVRY \(did you mean CKPTLOG_SNAPSHOT_EVERY\?\)"):
        load_settings(None)
    monkeypatch.delenv("CKPTLOG_SNAPSHOT_EVRY")
    for name in ("CKPTLOG_HOME", "CKPTLOG_CACHE", "CKPTLOG_TEST_ANYTHING", "ckptlog_group_id"):
        monkeypatch.setenv(name, "x")
    assert load_settings(None).group_id == "x"  # pydantic-settings reads names case-insensitively


def _variables_by_file() -> dict[Path, set[str]]:
    """The `CKPTLOG_*` names each tracked kind of file of the repository mentions."""
    import re

    repo = Path(__file__).resolve().parents[3]
    found: dict[Path, set[str]] = {}
    tops = [p for p in repo.iterdir() if not p.name.startswith(".")]
    for path in (f for top in tops for f in ([top] if top.is_file() else top.rglob("*"))):
        if path.suffix in {".py", ".md", ".yml", ".toml"} and path.is_file():
            text = path.read_text(errors="replace")
            found[path.relative_to(repo)] = set(re.findall(r"\bCKPTLOG_[A-Z][A-Z0-9_]*[A-Z0-9]\b", text))
    return found


def test_every_ckptlog_variable_the_repository_uses_is_a_setting_or_known() -> None:
    """A variable the code or a deploy file reads must be listed in NOT_SETTINGS, and a test knob
    must be named CKPTLOG_TEST_*, or `ckptlog run` refuses to start where it is set."""
    from ckptlog.processor.service.environment import unknown_variables
    from ckptlog.processor.service.settings import ServiceSettings

    names = set().union(*_variables_by_file().values())
    names -= {"CKPTLOG_SNAPSHOT_EVRY", "CKPTLOG_TEST_ANYTHING"}  # this file's own examples
    assert unknown_variables(dict.fromkeys(names, ""), ServiceSettings.model_fields) == []


def test_no_test_knob_is_listed_in_production_code() -> None:
    """Issue 26 item 5: every name in NOT_SETTINGS is read outside the tests (ckptlog/processor/, ckptlog/,
    deploy/); the test suite's knobs carry the CKPTLOG_TEST_ prefix the loader ignores instead."""
    from ckptlog.processor.service.environment import NOT_SETTINGS, TEST_PREFIX

    production = Path("ckptlog/processor/service/environment.py")
    used = set().union(
        *(
            names
            for path, names in _variables_by_file().items()
            if path.parts[0] in {"processor", "ckptlog", "events", "deploy", "setup.py"} and path != production
        )
    )
    only_tests = sorted(NOT_SETTINGS - used)
    assert only_tests == [], f"{only_tests}: no production code reads them; a test knob is named {TEST_PREFIX}*"
    assert not any(name.startswith(TEST_PREFIX) for name in NOT_SETTINGS)
