"""Settings of `ckptlog run` (and the in-process `Processor`): flags > env CKPTLOG_* > config file > defaults.

One flat pydantic-settings model; `load_settings` merges a TOML or JSON `--config FILE`
under the environment and the command-line overrides. Unknown keys are refused, so a typo
in a config file is an error instead of a silently ignored setting.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from events.decoded import CheckpointConfig
from events.paths import root_problem
from processor.core.state import FoldSettings
from processor.errors import ConfigError
from processor.kafka.connection import KafkaConnection
from processor.kafka.consumer import session_timeout_problem
from processor.service.environment import unknown_message, unknown_variables

Guarantee = Literal["exactly_once", "at_least_once"]
_SECRET_KEY = re.compile(r"(?i)key|secret|token|passw|credential|connection_string|sas")


def default_snapshots_dir() -> str:
    """${CKPTLOG_HOME:-~/.ckptlog}/snapshots, next to the local broker's directory."""
    home = os.environ.get("CKPTLOG_HOME")
    return str((Path(home).expanduser() if home else Path.home() / ".ckptlog") / "snapshots")


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CKPTLOG_", extra="forbid", frozen=True)

    # Kafka
    bootstrap_servers: str | None = Field(default=None, description="host:port,...; default: embedded broker")
    group_id: str = "ckptlog"
    group_instance_id: str | None = Field(default=None, description="static membership: restarts skip a rebalance")
    transactional_id_prefix: str | None = Field(default=None, description="default: the group id")
    guarantee: Guarantee = "exactly_once"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    # topics
    input_topic: str = "ckptlog.events"
    checkpoints_topic: str = "ckptlog.checkpoints"
    validations_topic: str = "ckptlog.validations"
    watermarks_topic: str = "ckptlog.watermarks"
    state_topic: str = "ckptlog.state"
    dlq_topic: str = "ckptlog.dlq"
    topic_partitions: int | None = Field(default=None, ge=1, description="for created topics; default 1")
    replication_factor: int | None = Field(default=None, ge=1, description="default min(3, brokers)")
    # fold
    storage_root: str | None = None
    default_num_to_keep: int | None = Field(default=None, ge=1)
    score_attribute: str | None = Field(default=None, min_length=1)
    score_order: Literal["max", "min"] = "max"
    max_payload_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1)
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1)
    # snapshots and storage
    snapshots: str = Field(default_factory=default_snapshots_dir)
    snapshot_every: int = Field(default=10_000, ge=1)
    snapshot_interval_s: float = Field(default=60.0, gt=0)
    keep_snapshots: int = Field(default=3, ge=1)
    allow_data_loss: bool = False
    snapshot_storage_options: dict[str, Any] = Field(default_factory=dict)
    checkpoint_storage_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="protocol -> fsspec options"
    )
    deletion_concurrency: int = Field(default=8, ge=1)
    # loop
    max_batch_records: int = Field(default=20_000, ge=1)
    poll_timeout_ms: int = Field(default=100, ge=1)
    session_timeout_ms: int = 10_000  # within the broker's bounds: _session_timeout
    log_format: Literal["console", "json", "text"] = "console"  # text: the old name of console
    log_level: str = "INFO"
    # observability (processor/service/observe.py)
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="/metrics, /healthz, /readyz")
    metrics_host: str = Field(default="127.0.0.1", description="0.0.0.0 (or ::) to listen on every interface")

    @field_validator("storage_root")
    @classmethod
    def _safe_root(cls, value: str | None) -> str | None:
        """The outer bound of every deletion (contract §9) must be a directory: not a filesystem root,
        a bare bucket, a relative path or an unsafe spelling."""
        problem = root_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(f"{problem}; give the directory every run's checkpoints live under, e.g. s3://bucket/runs")
        return value

    @field_validator("session_timeout_ms")
    @classmethod
    def _session_timeout(cls, value: int) -> int:
        """Outside the broker's bounds the group refuses the processor at join (issue 17)."""
        problem = session_timeout_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _distinct_topics(self) -> ServiceSettings:
        names = [
            self.input_topic,
            self.checkpoints_topic,
            self.validations_topic,
            self.watermarks_topic,
            self.state_topic,
            self.dlq_topic,
        ]
        if len(set(names)) != len(names):
            raise ValueError(f"topic names must be distinct (got {names}); give each output its own topic")
        return self

    def fold_settings(self) -> FoldSettings:
        config = CheckpointConfig(
            num_to_keep=self.default_num_to_keep,
            checkpoint_score_attribute=self.score_attribute,
            checkpoint_score_order=self.score_order,
        )
        return FoldSettings(
            default_config=config,
            default_root=self.storage_root,
            outer_root=self.storage_root,
            max_payload_bytes=self.max_payload_bytes,
            max_depth=self.max_depth,
        )

    def connection(self, bootstrap_servers: str) -> KafkaConnection:
        password = self.sasl_plain_password.get_secret_value() if self.sasl_plain_password else None
        return KafkaConnection(
            bootstrap_servers,
            f"ckptlog-{self.group_id}",
            self.security_protocol,
            self.sasl_mechanism,
            self.sasl_plain_username,
            password,
            self.ssl_cafile,
            self.ssl_certfile,
            self.ssl_keyfile,
        )

    @property
    def txn_prefix(self) -> str:
        return self.transactional_id_prefix or self.group_id

    def secrets(self) -> list[str]:
        """Values no log line may show (processor/service/logs.py masks them): the SASL password and
        the storage options' keys, secrets, tokens and passwords."""
        found = [self.sasl_plain_password.get_secret_value()] if self.sasl_plain_password else []
        stack: list[Any] = [self.snapshot_storage_options, self.checkpoint_storage_options]
        while stack:
            for key, value in stack.pop().items():
                if isinstance(value, dict):
                    stack.append(value)
                elif isinstance(value, str) and _SECRET_KEY.search(str(key)):
                    found.append(value)
        return found


def read_config_file(path: Path) -> dict[str, Any]:
    """A flat table of settings from TOML (`.toml`) or JSON (anything else); `-` in keys means `_`."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}; check --config") from None
    try:
        data = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ConfigError(f"config file {path} is not valid {kind}: {exc}; fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold one table/object of settings")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def load_settings(config_file: Path | None = None, **overrides: Any) -> ServiceSettings:
    """Merge defaults < config file < CKPTLOG_* environment < overrides (None = not given)."""
    file_values = read_config_file(config_file) if config_file is not None else {}
    unknown = unknown_variables(os.environ, ServiceSettings.model_fields)
    if unknown:
        raise ConfigError(unknown_message(unknown, ServiceSettings.model_fields))
    try:
        from_env = ServiceSettings()
        env_values = {name: getattr(from_env, name) for name in from_env.model_fields_set}
        given = {k: v for k, v in overrides.items() if v is not None}
        return ServiceSettings(**{**file_values, **env_values, **given})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        source = f" (config file {config_file})" if config_file else ""
        raise ConfigError(
            f"invalid setting {where}: {first['msg']}{source}; fix the flag, the CKPTLOG_"
            f"{where.upper()} variable or the config file"
        ) from None
