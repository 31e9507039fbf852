"""deploy/ stays in step with the CLI: the compose file parses and only invokes
ckptlog subcommands the project documents; those that exist accept its flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from processor.cli.main import _register, app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# Subcommands the CLI must provide (docs + compose). `broker` is checked against the
# real CLI; `run` and `evaluate` are checked in full once they are registered.
DOCUMENTED = {"run", "evaluate", "broker"}


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _ckptlog_calls() -> dict[str, list[str]]:
    """service name -> argv after `ckptlog`, for every service that runs ckptlog."""
    calls = {}
    for name, service in _compose()["services"].items():
        command = service.get("command", [])
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if argv[:1] == ["ckptlog"]:
            calls[name] = argv[1:]
    return calls


def _help(*args: str) -> str:
    _register()
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def _registered() -> set[str]:
    _register()
    group = typer.main.get_command(app)
    return set(getattr(group, "commands", {}))


def test_compose_parses_and_has_the_documented_services() -> None:
    services = _compose()["services"]
    assert {"kafka", "minio", "processor", "evaluator"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert (DEPLOY / "Dockerfile").read_text().startswith("#")
    assert "FROM python:3.11-slim" in (DEPLOY / "Dockerfile").read_text()


def test_compose_invokes_only_documented_subcommands() -> None:
    used = {argv[0] for argv in _ckptlog_calls().values()}
    assert used <= DOCUMENTED
    assert {"run", "evaluate"} <= used


def test_processor_and_evaluator_arguments() -> None:
    calls = _ckptlog_calls()
    run = calls["processor"]
    assert run[run.index("--bootstrap-servers") + 1] == "kafka:9092"
    assert run[run.index("--snapshots") + 1].startswith("s3://")
    assert run[run.index("--storage-root") + 1].startswith("s3://")
    fn = calls["evaluator"][calls["evaluator"].index("--fn") + 1]
    assert re.fullmatch(r"\$\{CKPTLOG_EVAL_FN:-[\w.]+:\w+\}", fn)


def test_broker_subcommand_is_real() -> None:
    assert "broker" in _registered()
    out = _help("broker")
    for sub in ("start", "stop", "status", "fetch"):
        assert sub in out
    start = _help("broker", "start")
    assert "--dir" in start and "--port" in start


@pytest.mark.parametrize("service", ["processor", "evaluator"])
def test_implemented_subcommands_accept_the_compose_flags(service: str) -> None:
    argv = _ckptlog_calls()[service]
    if argv[0] not in _registered():
        pytest.skip(f"`ckptlog {argv[0]}` is not implemented yet")
    out = _help(argv[0])
    for flag in (a for a in argv if a.startswith("--")):
        assert flag in out, f"`ckptlog {argv[0]}` has no {flag}, but deploy/docker-compose.yml uses it"
