"""deploy/ stays in step with the CLI: the compose file and the Kubernetes manifests parse and only
invoke ckptlog subcommands the project documents, with flags and settings that exist."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
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


# -- Kubernetes (deploy/k8s) -------------------------------------------------------------------------

K8S = DEPLOY / "k8s"
EXTERNAL_ENV = {"PYTHONPATH", "KAFKA_BOOTSTRAP_SERVERS"}
"""Variables the manifests may set that are not ckptlog settings (the clients read KAFKA_BOOTSTRAP_SERVERS)."""


def _manifests() -> dict[str, list[dict[str, Any]]]:
    """file name -> its documents (every file must parse)."""
    return {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        for path in sorted(K8S.glob("*.yaml"))
    }


def _objects(kind: str) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for docs in _manifests().values()
        for doc in docs
        if doc.get("kind") == kind and "metadata" in doc
    }


def _container(deployment: str) -> dict[str, Any]:
    (container,) = _objects("Deployment")[deployment]["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _env_names(container: dict[str, Any]) -> set[str]:
    """Every variable the container gets: `env` entries and the keys of ConfigMaps in `envFrom`."""
    names = {entry["name"] for entry in container.get("env", [])}
    config_maps = _objects("ConfigMap")
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            names |= set(config_maps[source["configMapRef"]["name"]]["data"])
    return names


def test_k8s_manifests_parse_and_the_kustomization_lists_them_all() -> None:
    manifests = _manifests()
    (kustomization,) = manifests.pop("kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    assert set(kustomization["resources"]) == set(manifests)
    kinds = sorted(doc["kind"] for docs in manifests.values() for doc in docs)
    assert kinds == ["ConfigMap", "Deployment", "Deployment", "Namespace", "PodDisruptionBudget", "Service"]
    assert set(_objects("Deployment")) == {"ckptlog-processor", "ckptlog-evaluator"}


@pytest.mark.parametrize("deployment", ["ckptlog-processor", "ckptlog-evaluator"])
def test_k8s_containers_use_only_real_flags_and_settings(deployment: str) -> None:
    from processor.service.settings import ServiceSettings

    container = _container(deployment)
    argv = [*container["command"], *container.get("args", [])]
    assert argv[0] == "ckptlog" and argv[1] in _registered()
    options = set(re.findall(r"--[a-z0-9][a-z0-9-]*", _help(argv[1])))
    for flag in (a for a in argv if a.startswith("--")):
        assert flag in options, f"`ckptlog {argv[1]}` has no {flag}, but deploy/k8s uses it"
    fields = {f"CKPTLOG_{name.upper()}" for name in ServiceSettings.model_fields}
    for name in _env_names(container):
        assert name in fields or name in EXTERNAL_ENV, f"{deployment} sets {name}: no such setting"


def test_k8s_config_map_holds_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from processor.service.settings import load_settings

    data = _objects("ConfigMap")["ckptlog-processor"]["data"]
    for name, value in data.items():
        assert isinstance(value, str), f"{name}: ConfigMap values must be strings (quote numbers)"
        monkeypatch.setenv(name, value)
    settings = load_settings(None)
    assert settings.log_format == "json" and settings.storage_root and settings.snapshots.startswith("s3://")


def test_k8s_processor_probes_metrics_service_and_shutdown() -> None:
    processor = _objects("Deployment")["ckptlog-processor"]
    pod = processor["spec"]["template"]
    container = _container("ckptlog-processor")
    args = container["args"]
    port = int(args[args.index("--metrics-port") + 1])
    assert args[args.index("--metrics-host") + 1] == "0.0.0.0"  # the default 127.0.0.1 is unreachable for probes
    (named,) = container["ports"]
    assert (named["name"], named["containerPort"]) == ("metrics", port)
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        check = container[probe]["httpGet"]
        assert (check["path"], check["port"]) == (path, "metrics"), probe
        assert container[probe]["timeoutSeconds"] > 5  # /healthz may take 5 s to say the loop is stuck
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 60  # the final snapshots (docs/runbook.md)
    assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and container["resources"]["limits"]["memory"]
    labels = pod["metadata"]["labels"]
    assert processor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = _objects("Service")["ckptlog-metrics"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    pdb = _objects("PodDisruptionBudget")["ckptlog-processor"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items() and pdb["spec"]["maxUnavailable"] == 1


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_k8s_kustomization_builds() -> None:
    built = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    docs = list(yaml.safe_load_all(built.stdout))
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"ckptlog"}
