"""Topic administration: create what is missing, describe partitions, truncate a log prefix."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import TopicAlreadyExistsError

from ckptlog.kafka.connection import KafkaConnection, start_client
from ckptlog.kafka.errors import TopicSetupError, map_kafka_errors

log = logging.getLogger(__name__)

_TOPIC_EXISTS = TopicAlreadyExistsError.errno
_CHECK_ACLS = "check that the broker is up and this principal may describe them"


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic ckptlog needs; `partitions=None` means "as many as the input topic"."""

    name: str
    partitions: int | None = None
    config: dict[str, str] = field(default_factory=dict)


@asynccontextmanager
async def admin_client(conn: KafkaConnection) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(**conn.client_kwargs())
    await start_client(_Admin(admin), conn, "the admin client")
    try:
        yield admin
    finally:
        await admin.close()


class _Admin:
    """The admin client as `start_client` stops a client: its `stop` is `close`."""

    def __init__(self, admin: AIOKafkaAdminClient) -> None:
        self.start, self.stop = admin.start, admin.close


async def partition_counts(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, int]:
    """Partitions per existing topic; topics that do not exist are left out."""
    with map_kafka_errors(f"describing topics {', '.join(names)} failed", _CHECK_ACLS, error=TopicSetupError):
        described = await admin.describe_topics(list(names))
    return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}


async def ensure_topics(
    conn: KafkaConnection, specs: Sequence[TopicSpec], default_partitions: int, replication_factor: int | None = None
) -> dict[str, int]:
    """Create every missing topic; returns the partition count of each. Existing ones are left as they are."""
    async with admin_client(conn) as admin:
        existing = await partition_counts(admin, [s.name for s in specs])
        missing = [s for s in specs if s.name not in existing]
        if missing:
            await _create(admin, conn, missing, default_partitions, replication_factor)
            existing = await _wait_for(admin, [s.name for s in specs])
        return existing


async def _create(
    admin: AIOKafkaAdminClient,
    conn: KafkaConnection,
    missing: Sequence[TopicSpec],
    default_partitions: int,
    replication_factor: int | None,
) -> None:
    with map_kafka_errors(
        f"creating topics {', '.join(s.name for s in missing)} on {conn.bootstrap_servers} failed",
        "create them by hand or fix the broker's permissions",
        error=TopicSetupError,
    ):
        brokers = len((await admin.describe_cluster())["brokers"])
        rf = replication_factor or min(3, max(1, brokers))
        new = [NewTopic(s.name, s.partitions or default_partitions, rf, topic_configs=s.config) for s in missing]
        response = await admin.create_topics(new)
    for entry in getattr(response, "topic_errors", []):
        name, code = entry[0], entry[1]
        if code and code != _TOPIC_EXISTS:
            raise TopicSetupError(
                f"creating topic {name} on {conn.bootstrap_servers} failed with error "
                f"code {code} ({entry[2] if len(entry) > 2 else ''}); create it by hand "
                "or fix the broker's permissions"
            )
    for spec in missing:
        log.info(
            "event=topic_created topic=%s partitions=%d replication_factor=%d config=%s",
            spec.name,
            spec.partitions or default_partitions,
            rf,
            spec.config,
        )


async def _wait_for(admin: AIOKafkaAdminClient, names: list[str], attempts: int = 100) -> dict[str, int]:
    for _ in range(attempts):
        with map_kafka_errors(f"describing topics {', '.join(names)} failed", _CHECK_ACLS, error=TopicSetupError):
            described = await admin.describe_topics(names)
        ready = {
            t["topic"]: len(t["partitions"])
            for t in described
            if t["error_code"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
        }
        if len(ready) == len(names):
            return ready
        await asyncio.sleep(0.1)
    raise TopicSetupError(f"topics {', '.join(names)} have no leader after creation; check the broker's health")


async def topic_partitions(conn: KafkaConnection, topic: str) -> int:
    """The partition count of `topic`, or a clear error when it does not exist."""
    async with admin_client(conn) as admin:
        counts = await partition_counts(admin, [topic])
    if topic not in counts:
        raise TopicSetupError(
            f"topic {topic} does not exist on {conn.bootstrap_servers}; check the topic name "
            "(--input-topic) or start `ckptlog run` once to create it"
        )
    return counts[topic]


async def committed_offsets(conn: KafkaConnection, group_id: str, topic: str, partitions: int) -> dict[int, int]:
    """The consumer group's committed offset per partition of `topic` (partitions with none left out)."""
    async with admin_client(conn) as admin:
        with map_kafka_errors(
            f"reading the committed offsets of group {group_id} on {topic} failed",
            "check that the broker is reachable and this principal may describe the group",
        ):
            found = await admin.list_consumer_group_offsets(
                group_id, partitions=[TopicPartition(topic, p) for p in range(partitions)]
            )
    return {tp.partition: int(meta.offset) for tp, meta in found.items() if tp.topic == topic and meta.offset >= 0}


async def delete_prefix(conn: KafkaConnection, topic: str, partition: int, before_offset: int) -> int:
    """Delete records below `before_offset` (admin DeleteRecords); returns the new log start offset."""
    async with admin_client(conn) as admin:
        tp = TopicPartition(topic, partition)
        with map_kafka_errors(
            f"deleting records of {topic}[{partition}] below {before_offset} failed",
            "check that the topic exists and that this principal may delete records",
        ):
            result = await admin.delete_records({tp: RecordsToDelete(before_offset)})
        return int(result[tp])


async def existing_topics(conn: KafkaConnection, names: Sequence[str]) -> dict[str, int]:
    """Partitions of each topic in `names` that exists (missing ones are left out)."""
    async with admin_client(conn) as admin:
        return await partition_counts(admin, names)


async def topic_configs(conn: KafkaConnection, topic: str, names: Sequence[str]) -> dict[str, str]:
    """The topic's values of the config entries `names` (as the broker reports them, strings)."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async with admin_client(conn) as admin:
        with map_kafka_errors(
            f"describing the configs of {topic} on {conn.bootstrap_servers} failed",
            "check that the topic exists and this principal may describe its configs",
        ):
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, dict.fromkeys(names))]
            )
    return {
        entry[0]: entry[1]
        for response in responses
        for resource in response.resources  # (error_code, error_message, type, name, entries)
        for entry in resource[4]
        if entry[1] is not None
    }


async def group_members(conn: KafkaConnection, group_id: str) -> tuple[str, int]:
    """A consumer group's state (`Stable`, `Empty`, `Dead`, ...) and how many members it has now."""
    async with admin_client(conn) as admin:
        with map_kafka_errors(
            f"describing consumer group {group_id} on {conn.bootstrap_servers} failed",
            "check that the broker is up and this principal may describe the group",
        ):
            responses = await admin.describe_consumer_groups([group_id])
    for response in responses:
        for group in response.groups:  # (error_code, group_id, state, protocol_type, protocol, members, ...)
            if group[1] == group_id:
                return str(group[2]), len(group[5])
    return "Dead", 0
