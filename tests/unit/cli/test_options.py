"""Settings as the single source (issue 26 #4): every setting is defined once, in
ckptlog/processor/service/settings.py, and every command that takes it offers the same flag; the
docs' table is generated from the same model."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main

from ckptlog.cli.main import _register, app
from ckptlog.cli.options import FLAGS_MODULE, env_only, fields_of, flag, flags_source, settings_table
from ckptlog.processor.service.settings import ServiceSettings

REPO = Path(__file__).resolve().parents[3]
FIELDS = ServiceSettings.model_fields
_register()


def flags_of(command: str) -> set[str]:
    group = typer.main.get_command(app)
    found = group.commands[command]  # type: ignore[attr-defined]
    return {opt for param in found.params for opt in param.opts if opt.startswith("--")}


@pytest.mark.parametrize("name", list(FIELDS))
def test_every_setting_has_a_group_a_help_and_a_flag_or_says_why_not(name: str) -> None:
    info = FIELDS[name]
    assert isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("group"), name
    assert info.description, f"{name} has no description: its flag and the docs would have no help"
    why = env_only(info)
    command = "report" if info.json_schema_extra["group"] == "clients" else "run"  # clients only: not run's
    assert (flag(name) in flags_of(command)) != bool(why), f"{name}: a flag of `ckptlog {command}`, or env-only"
    if command == "report":
        assert flag(name) not in flags_of("run"), f"{name} is a client setting: `ckptlog run` has no use for it"


@pytest.mark.parametrize(
    ("command", "groups"),
    [
        ("replay", ["connection", "group", "topics", "fold", "snapshots"]),
        ("fold", ["fold"]),
    ],
)
def test_a_command_taking_settings_offers_the_same_flags_as_run(command: str, groups: list[str]) -> None:
    wanted = {flag(n) for n in fields_of(groups) if env_only(FIELDS[n]) is None}
    assert wanted <= flags_of(command) and wanted <= flags_of("run")


@pytest.mark.parametrize("command", ["report", "start-run", "worker-group-restart", "evaluate", "watch"])
def test_every_client_command_takes_the_connection_settings_of_run(command: str) -> None:
    """Issue 21 #1: a client command offered --bootstrap-servers only, so TLS/SASL were never used."""
    wanted = {flag(n) for n in fields_of(["connection"]) if env_only(FIELDS[n]) is None}
    assert {"--security-protocol", "--ssl-cafile", "--sasl-plain-username"} <= wanted
    assert wanted <= flags_of(command) and wanted <= flags_of("run")
    assert {"--config", "--delivery-timeout-s"} <= flags_of(command)


def test_the_docs_table_is_the_models() -> None:
    text = (REPO / "docs/processor.md").read_text()
    assert settings_table() in text, "docs/processor.md: regenerate the table with `python -m ckptlog.cli.options`"


def test_a_bad_value_names_the_flag_and_the_variable() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["fold", "-", "--max-depth", "0"], input="")
    assert result.exit_code == 2 and "--max-depth" in result.output and "CKPTLOG_MAX_DEPTH" in result.output


def test_the_flags_module_is_the_models() -> None:
    """ckptlog/cli/setting_flags.py lets --help skip the model (issue 38 item 8); it must say what the model does."""
    assert FLAGS_MODULE.read_text() == flags_source(), "regenerate: python -m ckptlog.cli.options --write-flags"
