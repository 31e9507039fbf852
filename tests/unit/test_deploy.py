"""deploy/ stays in step with the CLI: the compose file and the Kubernetes manifests parse and only
invoke ckptlog subcommands the project documents, with flags and settings that exist. There is no
Docker engine here, so everything the compose file references is checked statically: images are
pinned, every command and health check names a real subcommand with real flags, the evaluator's
default function exists and runs, and services wait only on health checks that exist."""

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

from ckptlog.cli.main import _register, app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# Subcommands the CLI must provide (docs + compose). `broker` is checked against the
# real CLI; `run` and `evaluate` are checked in full once they are registered.
DOCUMENTED = {"run", "evaluate", "broker", "topics"}


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _argv(command: str | list[Any]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    return argv[1:] if argv[:1] in (["CMD"], ["CMD-SHELL"]) else argv


def _ckptlog_calls(kind: str = "command") -> dict[str, list[str]]:
    """service name -> argv after `ckptlog`, for every service that runs ckptlog as its command
    (or, kind="healthcheck", as its health check)."""
    calls = {}
    for name, service in _compose()["services"].items():
        command = service.get("command", []) if kind == "command" else service.get("healthcheck", {}).get("test", [])
        argv = _argv(command)
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


def test_health_checks_name_real_subcommands_and_flags() -> None:
    checks = _ckptlog_calls("healthcheck")
    assert checks["processor"][:2] == ["topics", "--check"], "the processor's health check"
    for service, argv in checks.items():
        assert argv[0] in _registered(), f"{service}: `ckptlog {argv[0]}` does not exist"
        out = _help(argv[0])
        for flag in (a for a in argv if a.startswith("--")):
            assert flag in out, f"{service}'s health check passes {flag}, which `ckptlog {argv[0]}` lacks"


def test_images_are_pinned() -> None:
    """`latest` (or no tag) changes under a deployment; only the locally built image is exempt."""
    services = _compose()["services"]
    built = {s["image"] for s in services.values() if "build" in s}
    for name, service in services.items():
        image = service.get("image", "")
        if image in built:
            continue
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned to a release"
        if image.startswith("minio/"):
            assert re.fullmatch(r"RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ", tag), image


def test_services_wait_on_health_checks_that_exist() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for target, rule in service.get("depends_on", {}).items():
            assert target in services, f"{name} depends on unknown service {target}"
            if rule.get("condition") == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target} to be healthy: it has no check"
    assert services["evaluator"]["depends_on"]["processor"]["condition"] == "service_healthy", (
        "the evaluator subscribes to the validations topic: it must wait until the processor created it"
    )


def _default(expression: str) -> str:
    found = re.fullmatch(r"\$\{\w+:-(.+)\}", expression)
    assert found, expression
    return found.group(1)


def test_the_default_evaluator_exists_and_validates_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compose file's default `--fn evaluator:evaluate` named a module nobody shipped."""
    from ckptlog.client.evaluator import load_function

    evaluator = _compose()["services"]["evaluator"]
    fn = _default(_ckptlog_calls()["evaluator"][_ckptlog_calls()["evaluator"].index("--fn") + 1])
    volume = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::ro)?", evaluator["volumes"][0])
    assert volume, evaluator["volumes"]
    host_dir, mount = volume.groups()
    assert evaluator["environment"]["PYTHONPATH"] == mount
    source = DEPLOY / _default(host_dir)
    assert (source / f"{fn.partition(':')[0]}.py").is_file()
    monkeypatch.syspath_prepend(str(source))
    evaluate = load_function(fn)
    checkpoint = tmp_path / "ckpt-1"
    checkpoint.mkdir()
    (checkpoint / "model.pt").write_bytes(b"weights")
    assert evaluate(checkpoint.as_uri(), split="val") == {"eval": {"files": 1, "bytes": 7}}
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        evaluate((tmp_path / "empty").as_uri())


def test_the_readme_says_how_a_job_on_the_host_reaches_kafka_and_minio() -> None:
    readme = (DEPLOY / "README.md").read_text()
    services = _compose()["services"]
    published = {port.split(":")[-2] for s in services.values() for port in s.get("ports", [])}
    assert {"29092", "9000"} <= published
    for needle in ("localhost:29092", "http://localhost:9000", "FSSPEC_S3_ENDPOINT_URL", "s3://ckptlog/checkpoints/"):
        assert needle in readme, needle
    storage_root = _ckptlog_calls()["processor"][_ckptlog_calls()["processor"].index("--storage-root") + 1]
    assert storage_root == "s3://ckptlog/checkpoints"


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
    from ckptlog.processor.service.settings import ServiceSettings

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
    from ckptlog.processor.service.settings import load_settings

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


# -- what the k8s evaluator imports (--fn) must be shipped --------------------------------------------

REPO = DEPLOY.parent


def _image_copies() -> dict[str, Path]:
    """Where deploy/Dockerfile's `COPY src dest` puts repo paths: image path -> repo path. A source
    the build context leaves out (Dockerfile.dockerignore) never reaches the image, so it is refused."""
    ignored = [line.strip() for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()]
    ignored = [p for p in ignored if p and not p.startswith("#")]
    copies: dict[str, Path] = {}
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        argv = shlex.split(line) if line.startswith("COPY ") else []
        if not argv or any(a.startswith("--from") for a in argv):
            continue
        src, dest = argv[-2], argv[-1]
        excluded = [p for p in ignored if src.rstrip("/") == p or src.startswith(p.rstrip("/") + "/")]
        assert not excluded, f"deploy/Dockerfile copies {src}, which Dockerfile.dockerignore leaves out ({excluded})"
        copies[dest.rstrip("/") or "/"] = (REPO / src).resolve()
    return copies


def _image_path(path: str) -> Path | None:
    """The repo directory the image holds at `path` (a COPY destination or a directory below one)."""
    for dest, src in sorted(_image_copies().items(), key=lambda item: -len(item[0])):
        if path == dest or path.startswith(dest.rstrip("/") + "/"):
            return src / path[len(dest) :].lstrip("/") if src.is_dir() else None
    return None


def _fn_directory(
    deployment: dict[str, Any], config_maps: dict[str, dict[str, str]], scratch: Path
) -> tuple[str, Path]:
    """The Deployment's `--fn` and the directory that holds its module as the pod sees it: for each
    PYTHONPATH entry, the ConfigMap mounted there (its files written to `scratch`), else what the
    image has there (deploy/Dockerfile's COPYs)."""
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    spec = args[args.index("--fn") + 1]
    top = spec.partition(":")[0].split(".")[0]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    for entry in filter(None, env.get("PYTHONPATH", "").split(":")):
        mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"].rstrip("/") == entry.rstrip("/")]
        directory: Path | None
        if mounts:
            (volume,) = [v for v in pod.get("volumes", []) if v["name"] == mounts[0]["name"]]
            files = config_maps.get(volume.get("configMap", {}).get("name", ""), {})
            directory = scratch / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (directory / name).write_text(text)
        else:
            directory = _image_path(entry)
        if directory is not None and ((directory / f"{top}.py").is_file() or (directory / top).is_dir()):
            return spec, directory
    raise AssertionError(
        f"--fn {spec}: no {top} in the PYTHONPATH {env.get('PYTHONPATH')!r} of the mounts or the image"
    )


def _load_fn(spec: str, directory: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Import `spec` from `directory` as `ckptlog evaluate --fn` does; check it can be called as
    `fn(checkpoint_path, **fn_kwargs)`."""
    import inspect
    import sys

    from ckptlog.client.evaluator import load_function

    monkeypatch.delitem(sys.modules, spec.partition(":")[0], raising=False)  # another test's module of that name
    monkeypatch.syspath_prepend(str(directory))
    fn = load_function(spec)
    assert Path(inspect.getfile(fn)).resolve().parent == directory.resolve()
    params = list(inspect.signature(fn).parameters.values())
    assert params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD), params
    assert all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[1:]), (
        f"{spec} is called as fn(checkpoint_path, **fn_kwargs): its other parameters need defaults"
    )
    assert any(p.kind is p.VAR_KEYWORD for p in params), f"{spec} must accept the request's **fn_kwargs"
    return fn


def test_k8s_evaluator_imports_a_module_it_ships(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deploy/k8s ran `--fn evaluator:evaluate` with PYTHONPATH=/opt/evaluator and nothing there: the
    pod crash-looped. Resolve the module against what the pod mounts or the image ships, import it."""
    config_maps = {name: cm.get("data", {}) for name, cm in _objects("ConfigMap").items()}
    spec, directory = _fn_directory(_objects("Deployment")["ckptlog-evaluator"], config_maps, tmp_path / "mounts")
    assert directory == (DEPLOY / "evaluator").resolve()  # from the image
    evaluate = _load_fn(spec, directory, monkeypatch)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "weights.bin").write_bytes(b"12345")
    assert evaluate(checkpoint.as_uri(), split="val") == {"eval": {"files": 1, "bytes": 5}}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_readme_overlay_mounts_its_own_evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deploy/README.md's overlay, built: the generated ConfigMap is mounted on the PYTHONPATH and
    holds the module its --fn names."""
    readme = (DEPLOY / "README.md").read_text()
    found = re.search(r"```yaml\n(# my-overlay/kustomization\.yaml.*?)```", readme, re.S)
    assert found, "deploy/README.md has no my-overlay/kustomization.yaml"
    shutil.copytree(K8S, tmp_path / "deploy" / "k8s")
    overlay = tmp_path / "my-overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(found.group(1))
    (overlay / "my_evals.py").write_text(
        "def score(checkpoint_path, **fn_kwargs):\n    return {'seen': checkpoint_path}\n"
    )
    built = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    (deployment,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "ckptlog-evaluator"]
    spec, directory = _fn_directory(deployment, config_maps, tmp_path / "mounts")
    assert spec == "my_evals:score" and directory == tmp_path / "mounts" / "code"
    assert _load_fn(spec, directory, monkeypatch)("s3://b/ckpt", split="val") == {"seen": "s3://b/ckpt"}


def test_the_image_installs_every_storage_extra() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["all-storage"] == ["ckptlog[s3,gcs,azure]"]
    assert (extras["s3"], extras["gcs"], extras["azure"]) == (["s3fs>=2024.2"], ["gcsfs>=2024.2"], ["adlfs>=2024.2"])
    installs = re.findall(r'pip install "\.\[([\w,-]+)\]"', (DEPLOY / "Dockerfile").read_text())
    assert installs and "all-storage" in installs[0].split(","), installs
