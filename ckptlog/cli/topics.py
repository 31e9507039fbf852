"""`ckptlog topics [--check]`: the processor's topics and its consumer group, as the broker sees them.

Which topics exist and with how many partitions, and how many processors are in the group: an
input topic of N partitions keeps at most N of them working (the rest wait as standbys). `--check`
exits 1 unless every topic exists and the group has a member — the processor's health check in
deploy/docker-compose.yml, which other services wait on before they use the topics. Both warn
(without failing the check) when the input topic's retention can delete what a restore needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.cli.options import settings_options

if TYPE_CHECKING:  # the Kafka adapter and the settings load when the command runs (issue 38 item 8)
    from ckptlog.kafka.connection import KafkaConnection
    from ckptlog.processor.service.settings import ServiceSettings

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


RETENTION_FLOOR_S = 86_400
"""The shortest input retention `topics` accepts without a warning: a day, or 100 snapshot intervals."""


async def describe(conn: KafkaConnection, settings: ServiceSettings) -> tuple[dict[str, int], tuple[str, int]]:
    from ckptlog.kafka.topics import existing_topics, group_members

    return await existing_topics(conn, list(roles(settings))), await group_members(conn, settings.group_id)


async def input_retention(conn: KafkaConnection, settings: ServiceSettings) -> dict[str, str]:
    from ckptlog.kafka.topics import topic_configs

    return await topic_configs(conn, settings.input_topic, ["retention.ms", "retention.bytes"])


def retention_warnings(settings: ServiceSettings, configs: dict[str, str]) -> list[str]:
    """What the input topic's retention puts at risk (docs/runbook.md "Input-topic retention"): a
    restore needs the log from the newest snapshot's offset on, `ckptlog replay` from the log start
    and `ckptlog history` the whole log."""
    found = []
    ms, size = int(configs.get("retention.ms", "-1")), int(configs.get("retention.bytes", "-1"))
    floor_s = max(RETENTION_FLOOR_S, 100 * settings.snapshot_interval_s)
    if 0 <= ms < floor_s * 1000:
        found.append(
            f"{settings.input_topic} keeps records for {ms / 1000:g} s (retention.ms), under {floor_s:g} s (a day, or "
            f"100 snapshot intervals of {settings.snapshot_interval_s:g} s): an outage or a stale snapshot longer than "
            "that makes a restore lose events (OffsetOutOfRange); set retention.ms to days, or -1 to keep "
            "`ckptlog replay` from the start and `ckptlog history` possible"
        )
    if size >= 0:
        found.append(
            f"{settings.input_topic} is capped at {size:,} bytes per partition (retention.bytes): a burst can delete "
            "records a restore still needs; prefer retention.bytes=-1 and a time-based retention.ms"
        )
    return found


def report(settings: ServiceSettings, counts: dict[str, int], group: tuple[str, int]) -> list[str]:
    """The lines `ckptlog topics` prints: columns as wide as their longest name (a demo's topics are
    longer than the defaults)."""
    used = roles(settings)
    name_width, role_width = max(map(len, used)), max(map(len, used.values()))
    lines = [
        f"{name:<{name_width}}  {role:<{role_width}}  {f'{counts[name]} partition(s)' if name in counts else 'MISSING'}"
        for name, role in used.items()
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
@settings_options(["bootstrap_servers", "group_id", "input_topic"])
def topics_command(
    check: Annotated[bool, Opt("--check", help="Exit 1 unless every topic exists and the group has a member.")] = False,
    *,
    settings: ServiceSettings,
) -> None:
    """Show the processor's topics (partitions) and group (members); --check: exit 1 if one is missing."""
    import asyncio

    from ckptlog.client.connect import require_bootstrap

    with cli_errors():
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        counts, group = asyncio.run(describe(conn, settings))
        retention = asyncio.run(input_retention(conn, settings)) if settings.input_topic in counts else {}
    for line in report(settings, counts, group):
        typer.echo(line)
    found = problems(settings, counts, group)
    for problem in found:
        typer.echo(f"{'error' if check else 'warning'}: {problem}", err=True)
    for risk in retention_warnings(settings, retention):  # a risk, not a failed health check
        typer.echo(f"warning: {risk}", err=True)
    if check and found:
        raise typer.Exit(1)
