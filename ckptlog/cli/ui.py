"""`ckptlog ui`: the read-only web console (ckptlog/processor/ui, docs/ui.md)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.errors import cli_errors, echo_err
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, settings_options
from ckptlog.processor.redaction import register_secrets

if TYPE_CHECKING:  # the console's server loads when the command runs (issue 38 item 8)
    from ckptlog.processor.service.settings import ServiceSettings

GROUPS = ("connection", "topics", "fold", "snapshots")
TOKEN_ENV = "CKPTLOG_UI_TOKEN"
Opt = typer.Option


async def _serve(settings: ServiceSettings, host: str, port: int, token: str | None) -> None:
    import asyncio

    from ckptlog.processor.ui.server import running
    from ckptlog.processor.ui.source import LiveSource

    source = LiveSource(settings)
    await source.start()
    try:
        async with running(source, host, port, token) as url:
            echo_err(f"ckptlog ui: serving {url}/ (read-only; Ctrl-C stops)")
            await asyncio.Event().wait()
    finally:
        await source.close()


@app.command("ui")
@settings_options(fields_of(GROUPS))
def ui_command(
    host: Annotated[str, Opt(help="Address to listen on; other than loopback it needs a token.")] = "127.0.0.1",
    port: Annotated[int, Opt(help="Port to listen on.")] = 8000,
    token: Annotated[
        str | None, Opt(help=f"Every request must present it (Bearer header or ?token=); default ${TOKEN_ENV}.")
    ] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Serve a read-only web console: every run, its chart, kept checkpoints and history, live."""
    import asyncio

    from ckptlog.processor.ui.server import check_exposure

    token = token or os.environ.get(TOKEN_ENV) or None
    with cli_errors():
        register_secrets([*settings.secrets(), *([token] if token else [])])
        check_exposure(host, token)
        try:
            asyncio.run(_serve(settings, host, port, token))
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
