"""Command-line options derived from the settings model: one flag per `ServiceSettings` field.

A command declares which settings it takes (`settings_options(fields)`); each becomes
`--field-name` with the field's description as its help, and the command receives the merged
`ServiceSettings` (flags > CKPTLOG_* environment > `--config` file > defaults, processor/service/
settings.py). So a setting is defined once — its type, default, check and help — and every
command taking it offers the same flag (tests/unit/cli/test_options.py checks it). Fields marked
env-only (`json_schema_extra={"env_only": why}`: secrets, nested option tables) have no flag.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from pydantic.fields import FieldInfo

from processor.cli.errors import cli_errors
from processor.service.settings import ServiceSettings, load_settings

F = TypeVar("F", bound=Callable[..., Any])

CONFIG = inspect.Parameter(
    "config",
    inspect.Parameter.KEYWORD_ONLY,
    default=None,
    annotation=Annotated[Path | None, typer.Option("--config", help="TOML (.toml) or JSON file of settings.")],
)


def env_only(info: FieldInfo) -> str | None:
    """Why a setting has no flag (None: it has one)."""
    extra = info.json_schema_extra
    return extra.get("env_only") if isinstance(extra, dict) else None  # type: ignore[return-value]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _option_type(annotation: Any) -> Any:
    """The flag's type: the field's, optional (None: not given); Literals become plain str (the
    settings model checks the value and says what is allowed)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    base = args[0] if len(args) == 1 else str
    if typing.get_origin(base) is Literal:
        base = str
    return base | None


def _parameter(name: str, info: FieldInfo) -> inspect.Parameter:
    kind = _option_type(info.annotation)
    help_text = (info.description or name.replace("_", " ")) + _default_note(info)
    if kind == bool | None:
        option = typer.Option(f"{flag(name)}/--no-{flag(name)[2:]}", help=help_text, show_default=False)
    else:
        option = typer.Option(flag(name), help=help_text, show_default=False)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind, option])


def _default_note(info: FieldInfo) -> str:
    if info.default_factory is not None or info.default in (None, "", {}):
        return ""
    return f" (default {info.default})"


def fields_of(groups: Iterable[str]) -> list[str]:
    """The settings fields in the named groups (`json_schema_extra={"group": ...}` of each field)."""
    wanted = set(groups)
    return [
        name
        for name, info in ServiceSettings.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("group") in wanted
    ]


def settings_options(fields: Iterable[str]) -> Callable[[F], F]:
    """Give the command a flag per field (and `--config`); it is called with `settings=` the
    merged ServiceSettings instead of the flags."""
    chosen = [name for name in fields if env_only(ServiceSettings.model_fields[name]) is None]

    def decorate(command: F) -> F:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "settings"]
        added = [CONFIG, *(_parameter(name, ServiceSettings.model_fields[name]) for name in chosen)]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            config = kwargs.pop("config", None)
            given = {name: kwargs.pop(name) for name in chosen if name in kwargs}
            with cli_errors():
                settings = load_settings(config, **given)
            return command(*args, settings=settings, **kwargs)

        parameters = [*own, *added]
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return typing.cast(F, wrapper)

    return decorate


def settings_table() -> str:
    """The settings as the Markdown table docs/processor.md shows (generated, so it never drifts:
    `python -m processor.cli.options` prints it; tests/unit/cli/test_options.py compares)."""
    rows = ["| setting | flag | variable | default | |", "|---|---|---|---|---|"]
    for name, info in ServiceSettings.model_fields.items():
        why = env_only(info)
        option = f"— ({why})" if why else f"`{flag(name)}`"
        default = "" if info.default_factory is not None or info.default is None else f"`{info.default}`"
        text = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {option} | `CKPTLOG_{name.upper()}` | {default} | {text} |")
    return "\n".join(rows)


__all__ = ["env_only", "fields_of", "flag", "settings_options", "settings_table"]

if __name__ == "__main__":
    print(settings_table())
