"""`ckptlog topics [--check]`: the processor's topics and its consumer group, as the broker sees them.

Which topics exist and with how many partitions, and how many processors are in the group: an
input topic of N partitions keeps at most N of them working (the rest wait as standbys). `--check`
exits 1 unless every topic exists and the group has a member — the processor's health check in
deploy/docker-compose.yml, which other services wait on before they use the topics.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from ckptlog.connect import require_bootstrap
from processor.cli.errors import cli_errors
from processor.cli.main import app
from processor.kafka.connection import KafkaConnection
from processor.kafka.topics import existing_topics, group_members
from processor.service.settings import ServiceSettings, load_settings

Opt = typer.Option


def roles(settings: ServiceSettings) -> dict[str, str]:
    """topic -> what the processor uses it for."""
    return {
        settings.input_topic: "input",
        settings.checkpoints_topic: "checkpoint events",
        settings.validations_topic: "validation requests",
        settings.watermarks_topic: "watermarks",
        settings.state_topic: "run views (compacted)",
        settings.dlq_topic: "dead letters",
    }


async def describe(conn: KafkaConnection, settings: ServiceSettings) -> tuple[dict[str, int], tuple[str, int]]:
    return await existing_topics(conn, list(roles(settings))), await group_members(conn, settings.group_id)


def report(settings: ServiceSettings, counts: dict[str, int], group: tuple[str, int]) -> list[str]:
    """The lines `ckptlog topics` prints."""
    lines = [
        f"{name:<30} {role:<22} {f'{counts[name]} partition(s)' if name in counts else 'MISSING'}"
        for name, role in roles(settings).items()
    ]
    state, members = group
    partitions = counts.get(settings.input_topic, 0)
    line = f"group {settings.group_id}: {state}, {members} member(s)"
    if members > partitions > 0:
        line += f"; {members - partitions} of them idle (the input topic has {partitions} partition(s))"
    return [*lines, line]


def problems(settings: ServiceSettings, counts: dict[str, int], group: tuple[str, int]) -> list[str]:
    missing = [name for name in roles(settings) if name not in counts]
    found = [f"topics missing: {', '.join(missing)} (`ckptlog run` creates them when it starts)"] if missing else []
    if group[1] == 0:
        found.append(f"no processor in group {settings.group_id} (is `ckptlog run --group-id {settings.group_id}` up?)")
    return found


@app.command("topics")
def topics_command(
    check: Annotated[bool, Opt("--check", help="Exit 1 unless every topic exists and the group has a member.")] = False,
    config: Annotated[Path | None, Opt("--config", help="TOML or JSON settings file (as for run).")] = None,
    bootstrap_servers: Annotated[
        str | None,
        Opt(help="Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else a running `ckptlog broker start`)."),
    ] = None,
    group_id: Annotated[str | None, Opt(help="The processor's consumer group (default ckptlog).")] = None,
    input_topic: Annotated[str | None, Opt(help="Default ckptlog.events (other topics: --config).")] = None,
) -> None:
    """Show the processor's topics (partitions) and group (members); --check: exit 1 if one is missing."""
    with cli_errors():
        settings = load_settings(
            config, bootstrap_servers=bootstrap_servers, group_id=group_id, input_topic=input_topic
        )
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        counts, group = asyncio.run(describe(conn, settings))
    for line in report(settings, counts, group):
        typer.echo(line)
    found = problems(settings, counts, group)
    for problem in found:
        typer.echo(f"{'error' if check else 'warning'}: {problem}", err=True)
    if check and found:
        raise typer.Exit(1)
