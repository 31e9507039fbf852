"""Settings of `ckptlog run` (and the in-process `Processor`): flags > env CKPTLOG_* > config file > defaults.

One flat pydantic-settings model; `load_settings` merges a TOML or JSON `--config FILE`
under the environment and the command-line overrides. Unknown keys are refused, so a typo
in a config file is an error instead of a silently ignored setting.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from ckptlog.errors import ConfigError
from ckptlog.events import topics
from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.events.paths import root_problem
from ckptlog.kafka.discovery import ckptlog_home
from ckptlog.kafka.limits import session_timeout_problem
from ckptlog.kafka.settings import ConnectionSettings, environment_values, invalid_message, read_config_file, setting
from ckptlog.processor.core.state import DEFAULT_FINISHED_RUNS_KEPT, FoldSettings

if TYPE_CHECKING:
    from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.service.environment import unknown_message, unknown_variables

Guarantee = Literal["exactly_once", "at_least_once"]
_SECRET_KEY = re.compile(r"(?i)key|secret|token|passw|credential|connection_string|sas")


_f = setting


def default_snapshots_dir() -> str:
    """${CKPTLOG_HOME:-~/.ckptlog}/snapshots, next to the local broker's directory."""
    return str(ckptlog_home() / "snapshots")


class ServiceSettings(ConnectionSettings):
    """Every setting of `ckptlog run`; the connection ones (and their checks) are `ConnectionSettings`',
    which the clients read too."""

    model_config = SettingsConfigDict(env_prefix="CKPTLOG_", extra="forbid", frozen=True)

    # the processor's consumer group
    group_id: str = _f("ckptlog", "group", "the processor's consumer group")
    group_instance_id: str | None = _f(None, "group", "static group membership id (e.g. the pod name)")
    transactional_id_prefix: str | None = _f(None, "group", "prefix of the transactional ids (default: the group id)")
    guarantee: Guarantee = _f("exactly_once", "group", "exactly_once or at_least_once")
    session_timeout_ms: int = _f(
        10_000, "group", "group session timeout, 6000..1800000 ms: how soon a dead member's partitions move"
    )
    # topics
    input_topic: str = _f(topics.INPUT, "topics", "input events")
    checkpoints_topic: str = _f(topics.CHECKPOINTS, "topics", "checkpoint outputs and warnings")
    validations_topic: str = _f(topics.VALIDATIONS, "topics", "validation requests (the evaluators' queue)")
    watermarks_topic: str = _f(topics.WATERMARKS, "topics", "watermarks")
    state_topic: str = _f(topics.STATE, "topics", "each run's VIEW (compacted)")
    dlq_topic: str = _f(topics.DLQ, "topics", "dead letters")
    topic_partitions: int | None = _f(None, "topics", "partitions of the topics it creates (default 1)", ge=1)
    replication_factor: int | None = _f(
        None, "topics", "replication of the topics it creates (default min(3, brokers))", ge=1
    )
    # fold: what a log folds to (part of every snapshot)
    storage_root: str | None = _f(
        None, "fold", "outer bound of every deletion, and the parent of the roots of runs without run_started"
    )
    default_num_to_keep: int | None = _f(
        None, "fold", "num_to_keep of runs without run_started (default: keep all)", ge=1
    )
    score_attribute: str | None = _f(None, "fold", "score metric of runs without run_started", min_length=1)
    score_order: Literal["max", "min"] = _f("max", "fold", "max or min, for runs without run_started")
    max_payload_bytes: int = _f(DEFAULT_MAX_BYTES, "fold", "reject larger events", ge=1)
    max_depth: int = _f(DEFAULT_MAX_DEPTH, "fold", "reject JSON nested deeper", ge=1)
    finished_runs_kept: int = _f(
        DEFAULT_FINISHED_RUNS_KEPT,
        "fold",
        "finished runs per input partition whose record (id, root, state to reopen) is kept; the oldest expire first "
        "(contract §3)",
        ge=0,
    )
    # snapshots and storage
    snapshots: str = Field(
        default_factory=default_snapshots_dir,
        description="fsspec URL of the snapshots (default ${CKPTLOG_HOME:-~/.ckptlog}/snapshots)",
        json_schema_extra={"group": "snapshots"},
    )
    snapshot_every: int = _f(10_000, "snapshots", "snapshot every N events", ge=1)
    snapshot_interval_s: float = _f(60.0, "snapshots", "...or every T seconds", gt=0)
    keep_snapshots: int = _f(
        3, "snapshots", "restore points kept per partition, with every base and delta they need", ge=1
    )
    snapshot_deltas: int = _f(
        32,
        "snapshots",
        "incremental snapshots: deltas written on a base before a new full one (0: every snapshot is full)",
        ge=0,
    )
    allow_data_loss: bool = _f(False, "snapshots", "continue from the log start when it lost offsets a restore needs")
    snapshot_storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="fsspec options of --snapshots",
        json_schema_extra={"group": "snapshots", "env_only": "may hold credentials: --config or the environment"},
    )
    checkpoint_storage_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="protocol -> fsspec options, for deletions",
        json_schema_extra={"group": "snapshots", "env_only": "may hold credentials: --config or the environment"},
    )
    deletion_concurrency: int = _f(8, "snapshots", "deletion jobs at once (each up to 100 paths)", ge=1)
    # the loop
    max_batch_records: int = _f(20_000, "loop", "input records per batch at most", ge=1)
    poll_timeout_ms: int = _f(100, "loop", "how long a poll waits for records", ge=1)
    log_format: Literal["console", "json", "text"] = _f(
        "console", "logs", "console (key=value lines) or json (one object per line); text is console's old name"
    )
    log_level: str = _f("INFO", "logs", "DEBUG, INFO, WARNING, ...")
    # observability (ckptlog/processor/service/observe.py)
    metrics_port: int | None = _f(
        None, "observability", "serve /metrics, /healthz and /readyz on this port", ge=0, le=65535
    )
    metrics_host: str = _f(
        "127.0.0.1", "observability", "address for --metrics-port (0.0.0.0 or :: for every interface)"
    )

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
            finished_runs_kept=self.finished_runs_kept,
        )

    def connection(self, bootstrap_servers: str) -> KafkaConnection:
        return self.connect(bootstrap_servers, f"ckptlog-{self.group_id}")

    @property
    def txn_prefix(self) -> str:
        return self.transactional_id_prefix or self.group_id

    def secrets(self) -> list[str]:
        """Values no log line may show (ckptlog/processor/service/logs.py masks them): the SASL password and
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


def load_settings(config_file: Path | None = None, **overrides: Any) -> ServiceSettings:
    """Merge defaults < config file < CKPTLOG_* environment < overrides (None = not given)."""
    file_values = read_config_file(config_file) if config_file is not None else {}
    unknown = unknown_variables(os.environ, ServiceSettings.model_fields)
    if unknown:
        raise ConfigError(unknown_message(unknown, ServiceSettings.model_fields))
    try:
        env_values = environment_values(ServiceSettings)
        given = {k: v for k, v in overrides.items() if v is not None}
        return ServiceSettings(**{**file_values, **env_values, **given})
    except ValidationError as exc:
        raise ConfigError(invalid_message(exc, config_file)) from None
