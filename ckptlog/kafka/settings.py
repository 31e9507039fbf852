"""How every ckptlog process reaches Kafka: one settings model the processor and the clients share.

`ConnectionSettings` holds the connection fields of `ckptlog run` (ckptlog/processor/service/settings.py's
`ServiceSettings` is a subclass, so the fields, their checks and their help are written once):
bootstrap servers, the security settings and the clients' delivery timeout. The clients read it
from the same places as `ckptlog run`: `CKPTLOG_*` variables, a `--config` file (the same file the
processor reads; its other keys are the processor's and ignored here), or a `connection=` argument.

A setting the connection cannot honour is an error, never a silent plaintext fallback: a SASL user
without a SASL protocol, a CA file without TLS, SASL without its user or password.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from ckptlog.errors import ConfigError
from ckptlog.kafka.fence import Internals

if TYPE_CHECKING:
    from ckptlog.kafka.connection import KafkaConnection

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_DELIVERY_TIMEOUT_S = 30.0
_SASL_FIELDS = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
_SSL_FIELDS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")


def setting(default: Any, group: str, description: str, env_only: str | None = None, **checks: Any) -> Any:
    """A setting: its default, its group (which commands take it: ckptlog/cli/options.py), the
    help its flag and the docs show, and its checks. `env_only`: why it has no flag."""
    extra: dict[str, str] = {"group": group}
    if env_only is not None:
        extra["env_only"] = env_only
    return Field(default=default, description=description, json_schema_extra=extra, **checks)  # type: ignore[arg-type]


class ConnectionSettings(BaseSettings):
    """Where Kafka is and how to connect; CKPTLOG_* variables (e.g. CKPTLOG_SECURITY_PROTOCOL)."""

    model_config = SettingsConfigDict(env_prefix="CKPTLOG_", extra="ignore", frozen=True)

    bootstrap_servers: str | None = setting(
        None, "connection", "Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)"
    )
    security_protocol: str = setting("PLAINTEXT", "connection", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    sasl_mechanism: str | None = setting(None, "connection", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_plain_username: str | None = setting(None, "connection", "SASL user name")
    sasl_plain_password: SecretStr | None = setting(
        None, "connection", "SASL password", env_only="a secret: CKPTLOG_SASL_PLAIN_PASSWORD or --config, never a flag"
    )
    ssl_cafile: str | None = setting(None, "connection", "CA bundle (PEM) the broker's certificate is checked against")
    ssl_certfile: str | None = setting(None, "connection", "client certificate (PEM), for mutual TLS")
    ssl_keyfile: str | None = setting(None, "connection", "the client certificate's key (PEM)")
    delivery_timeout_s: float = setting(
        DEFAULT_DELIVERY_TIMEOUT_S,
        "clients",
        "clients: how long a send waits for the broker's acknowledgement before raising KafkaIOError",
        gt=0,
    )
    aiokafka_internals: Internals = setting(
        "auto",
        "connection",
        "auto: the fast producer path into aiokafka's private batch builders, only on the aiokafka version it "
        "was written for (else the public API, slower); off: always aiokafka's public API",
    )

    @model_validator(mode="after")
    def _honourable(self) -> ConnectionSettings:
        """Refuse what the connection would not use: never connect in plaintext while the user
        configured security."""
        problem = connection_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def load(cls, config_file: Path | str | None = None, **overrides: Any) -> ConnectionSettings:
        """defaults < the `config_file`'s connection keys < CKPTLOG_* environment < `overrides` (None:
        not given): the same order `ckptlog run` merges its settings in."""
        file_values = read_config_file(Path(config_file)) if config_file is not None else {}
        mine = {k: v for k, v in file_values.items() if k in cls.model_fields}
        env_values = environment_values(cls)
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            return cls(**{**mine, **env_values, **given})
        except ValidationError as exc:
            raise ConfigError(invalid_message(exc, config_file)) from None

    def password(self) -> str | None:
        return self.sasl_plain_password.get_secret_value() if self.sasl_plain_password else None

    def connect(self, bootstrap_servers: str, client_id: str) -> KafkaConnection:
        """The aiokafka-facing connection to `bootstrap_servers` (found by the caller: this model's
        own `bootstrap_servers` may be None, meaning the environment or the local broker)."""
        from ckptlog.kafka.connection import KafkaConnection  # aiokafka: loaded by the commands that connect

        return KafkaConnection(
            bootstrap_servers,
            client_id,
            self.security_protocol,
            self.sasl_mechanism,
            self.sasl_plain_username,
            self.password(),
            self.ssl_cafile,
            self.ssl_certfile,
            self.ssl_keyfile,
            self.delivery_timeout_s,
            self.aiokafka_internals,
        )


def environment_values(model: type[BaseSettings]) -> dict[str, Any]:
    """The CKPTLOG_* values of `model`'s fields, parsed but not validated: checks across settings
    (a CA file needs TLS) run once the file, the environment and the flags are merged."""
    return {k: v for k, v in EnvSettingsSource(model)().items() if k in model.model_fields}


def connection_problem(s: ConnectionSettings) -> str | None:
    """Why the connection cannot honour these settings (None: it can)."""
    protocol = s.security_protocol
    if protocol not in PROTOCOLS:
        return f"security_protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}; fix CKPTLOG_SECURITY_PROTOCOL"
    sasl = protocol.startswith("SASL")
    if not sasl and any(getattr(s, name) is not None for name in _SASL_FIELDS):
        return (
            f"SASL settings are given but security_protocol is {protocol}, so they would be ignored; set "
            "security_protocol to SASL_SSL or SASL_PLAINTEXT (CKPTLOG_SECURITY_PROTOCOL), or drop the SASL settings"
        )
    if not protocol.endswith("SSL") and any(getattr(s, name) is not None for name in _SSL_FIELDS):
        return (
            f"TLS files are given but security_protocol is {protocol}, so the connection would be plaintext; "
            "set security_protocol to SSL or SASL_SSL (CKPTLOG_SECURITY_PROTOCOL), or drop the ssl_* settings"
        )
    if sasl and (s.sasl_plain_username is None or s.sasl_plain_password is None):
        return (
            f"security_protocol {protocol} needs a SASL user and password; set CKPTLOG_SASL_PLAIN_USERNAME and "
            "CKPTLOG_SASL_PLAIN_PASSWORD (or sasl_plain_username / sasl_plain_password in the config file)"
        )
    if sasl and (s.sasl_mechanism or "PLAIN") not in MECHANISMS:
        return f"sasl_mechanism {s.sasl_mechanism!r} is not supported; use one of {', '.join(MECHANISMS)}"
    if (s.ssl_certfile is None) != (s.ssl_keyfile is None):
        return "mutual TLS needs both ssl_certfile and ssl_keyfile; give both or neither"
    return None


def invalid_message(exc: ValidationError, config_file: Path | str | None) -> str:
    """One line: the first invalid setting, and where to fix it."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    source = f" (config file {config_file})" if config_file else ""
    if not where:  # a check across settings (the model validators): its message says what to do
        return f"invalid settings{source}: {str(first['msg']).removeprefix('Value error, ')}"
    return (
        f"invalid setting {where}: {first['msg']}{source}; fix the flag --{where.replace('_', '-')}, the "
        f"CKPTLOG_{where.upper()} variable or the config file"
    )


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
