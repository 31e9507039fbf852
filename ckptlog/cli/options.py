"""Command-line options derived from the settings model: one flag per `ServiceSettings` field.

A command declares which settings it takes (`settings_options(fields)`); each becomes
`--field-name` with the field's description as its help, and the command receives the merged
`ServiceSettings` (flags > CKPTLOG_* environment > `--config` file > defaults, ckptlog/processor/service/
settings.py). So a setting is defined once — its type, default, check and help — and every
command taking it offers the same flag (tests/unit/cli/test_options.py checks it). Fields marked
env-only (`json_schema_extra={"env_only": why}`: secrets, nested option tables) have no flag.

The flags are built from ckptlog/cli/setting_flags.py, which `python -m ckptlog.cli.options
--write-flags` generates from the model (and the tests check equals it): so a command's --help and
its argument errors need not import the model, pydantic-settings, the fold and the Kafka adapter
(issue 38 item 8); the model is imported when the command runs (`load_settings`).

Flags that are not settings but that several commands share are a block: a dataclass of typer
options that `options_block` turns into a decorator (ckptlog/cli/clients.py `Sending`, the
--topic and --confirm flags of every command that sends an input event); `rule_options` gives the
retention rules' flags (generated from their table).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.rule_flags import RULE_FLAGS
from ckptlog.cli.setting_flags import FLAGS

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])
FLAGS_MODULE = Path(__file__).with_name("setting_flags.py")
_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}

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


def _parameter(name: str) -> inspect.Parameter:
    _, kind, help_text = FLAGS[name]
    assert kind is not None, f"{name} is env-only: it has no flag"
    if kind == "bool":
        option = typer.Option(f"{flag(name)}/--no-{flag(name)[2:]}", help=help_text, show_default=False)
    else:
        option = typer.Option(flag(name), help=help_text, show_default=False)
    annotation = Annotated[_KINDS[kind] | None, option]  # type: ignore[valid-type]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def _default_note(info: FieldInfo) -> str:
    if info.default_factory is not None or info.default in (None, "", {}):
        return ""
    return f" (default {info.default})"


def fields_of(groups: Iterable[str]) -> list[str]:
    """The settings fields in the named groups (`json_schema_extra={"group": ...}` of each field)."""
    wanted = set(groups)
    return [name for name, (group, _, _) in FLAGS.items() if group in wanted]


def _own_parameters(command: Callable[..., Any], *drop: str) -> list[inspect.Parameter]:
    """The command's parameters but `settings` (and `drop`), their annotations evaluated (`settings:
    ServiceSettings` is not: a command module names that type for mypy only)."""
    found = []
    for parameter in inspect.signature(command).parameters.values():
        if parameter.name == "settings" or parameter.name in drop:
            continue
        annotation = parameter.annotation
        if isinstance(annotation, str):
            annotation = eval(annotation, command.__globals__)  # what inspect's eval_str does
        found.append(parameter.replace(annotation=annotation))
    return found


def settings_options(fields: Iterable[str]) -> Callable[[F], F]:
    """Give the command a flag per field (and `--config`); it is called with `settings=` the
    merged ServiceSettings instead of the flags."""
    chosen = [name for name in fields if FLAGS[name][1] is not None]

    def decorate(command: F) -> F:
        own = _own_parameters(command)
        added = [CONFIG, *(_parameter(name) for name in chosen)]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from ckptlog.processor.service.settings import load_settings

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


def rule_options(command: F) -> F:
    """Give the command a flag per retention rule field (ckptlog/cli/rule_flags.py, generated from
    ckptlog/events/retention_rules.py); it is called with `rules=` the fields given."""
    own = [p for p in _own_parameters(command) if p.name != "rules"]
    added = []
    for name, (kind, help_text) in RULE_FLAGS.items():
        annotation = Annotated[_KINDS[kind] | None, typer.Option(flag(name), help=help_text)]  # type: ignore[valid-type]
        added.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rules = {name: kwargs.pop(name) for name in RULE_FLAGS if name in kwargs}
        return command(*args, rules=rules, **kwargs)

    parameters = sorted([*own, *added], key=lambda p: p.kind)  # keyword-only after the others
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return typing.cast(F, wrapper)


def options_block(block: type[Any], name: str) -> Callable[[F], F]:
    """A decorator giving a command the flags of `block`, a dataclass whose fields are typer options
    (`Annotated[type, typer.Option(...)] = default`): the command is called with `name=` one `block`
    built from them. So flags that several commands share are declared once, in the dataclass, and
    each command names only the block (ckptlog/cli/clients.py `Sending`)."""
    hints = typing.get_type_hints(block, include_extras=True)
    fields = [f.name for f in dataclasses.fields(block)]
    defaults, keyword = block(), inspect.Parameter.KEYWORD_ONLY  # every field has a default: a flag is optional
    added = [inspect.Parameter(f, keyword, default=getattr(defaults, f), annotation=hints[f]) for f in fields]

    def decorate(command: F) -> F:
        own = _own_parameters(command, name)

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {field: kwargs.pop(field) for field in fields if field in kwargs}
            return command(*args, **{name: block(**values)}, **kwargs)

        parameters = sorted([*own, *added], key=lambda p: p.kind)  # keyword-only after the others
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return typing.cast(F, wrapper)

    return decorate


def flags_source() -> str:
    """ckptlog/cli/setting_flags.py as the model gives it (`--write-flags` writes it)."""
    from ckptlog.processor.service.settings import ServiceSettings

    rows = []
    for name, info in ServiceSettings.model_fields.items():
        extra = info.json_schema_extra
        group = extra.get("group") if isinstance(extra, dict) else None
        kind = None if env_only(info) else _option_type(info.annotation).__args__[0].__name__
        text = (info.description or name.replace("_", " ")) + _default_note(info)
        rows.append(f"    {name!r}: ({group!r}, {kind!r}, {text!r}),")
    return FLAGS_HEAD + "\n".join(rows) + "\n}\n"


FLAGS_HEAD = '''"""The flags of the settings: name -> (group, flag type or None for env-only, help with the default).

Generated from ServiceSettings (ckptlog/processor/service/settings.py) by `python -m ckptlog.cli.options
--write-flags`; tests/unit/cli/test_options.py checks it is what the model gives. It lets a
command's --help and its argument errors skip importing the model (ckptlog/cli/options.py).
"""

from __future__ import annotations

# ruff: noqa: E501
# fmt: off
FLAGS: dict[str, tuple[str, str | None, str]] = {
'''


def settings_table() -> str:
    """The settings as the Markdown table docs/processor.md shows (generated, so it never drifts:
    `python -m ckptlog.cli.options` prints it; tests/unit/cli/test_options.py compares)."""
    from ckptlog.processor.service.settings import ServiceSettings

    rows = ["| setting | flag | variable | default | |", "|---|---|---|---|---|"]
    for name, info in ServiceSettings.model_fields.items():
        why = env_only(info)
        option = f"— ({why})" if why else f"`{flag(name)}`"
        default = "" if info.default_factory is not None or info.default is None else f"`{info.default}`"
        text = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {option} | `CKPTLOG_{name.upper()}` | {default} | {text} |")
    return "\n".join(rows)


__all__ = ["env_only", "fields_of", "flag", "options_block", "rule_options", "settings_options", "settings_table"]

if __name__ == "__main__":
    if sys.argv[1:] == ["--write-flags"]:
        FLAGS_MODULE.write_text(flags_source(), encoding="utf-8")
    else:
        print(settings_table())
