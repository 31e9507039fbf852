"""The peer: ckptlog's benchmark job as a Quix Streams application (`quixstreams`, the `bench` extra).

One process runs one `Application`: it consumes the input topic, folds each message with
bench/peer_fold.py in a stateful `apply` (Quix's RocksDB state store, key = the message key =
the run id, changelog topic on: Quix's own fault tolerance, as ckptlog's is its snapshots), and
writes each eviction to the checkpoints topic and each watermark to the watermarks topic, under
exactly-once (Kafka transactions) or at-least-once. bench/peer_compare.py starts it as

    python -m bench.quix_peer --bootstrap-servers B --input T --checkpoints T --watermarks T \\
        --group G --guarantee exactly-once --end N --state-dir D --kept FILE

It stops once it has processed input offset N-1 (Quix then commits what it holds), reads every
run's kept list back from its state store and writes it to FILE as JSON: {run id: [path, ...]}.

Settings mapped from ckptlog's (bench/peer_compare.py says which cannot be): a checkpoint commit
every 20,000 messages (ckptlog's `max_batch_records`: it commits per batch of at most that) or
every 5 s (Quix's default interval), offsets from the earliest, Quix's own consumer and producer
defaults otherwise (it uses confluent-kafka, ckptlog aiokafka).
"""

from __future__ import annotations

import argparse
import json
from contextlib import closing
from pathlib import Path
from typing import Any

from quixstreams import Application, State, message_context
from quixstreams.state.rocksdb import RocksDBStorePartition

from bench import peer_fold

COMMIT_EVERY = 20_000  # ckptlog's max_batch_records (ckptlog/processor/service/settings.py)
COMMIT_INTERVAL_S = 5.0  # Quix's default
STATE_KEY = "run"


def step(value: dict[str, Any], state: State[str, Any]) -> list[dict[str, Any]]:
    """One message: the run's state from the store, folded, written back; the outputs."""
    context = message_context()
    origin = f"{context.topic}:{context.partition}:{context.offset}"
    run, outputs = peer_fold.apply(state.get(STATE_KEY), value, origin)
    if run is not None:
        state.set(STATE_KEY, run)
    return outputs


def build(args: argparse.Namespace) -> Application:
    """The application, its dataframe wired, stopping after input offset `args.end - 1`."""
    app: Application

    def processed(topic: str, partition: int, offset: int) -> None:
        if topic == args.input and offset >= args.end - 1:
            app.stop()  # the loop ends and commits what it holds

    app = Application(
        broker_address=args.bootstrap_servers,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        commit_every=COMMIT_EVERY,
        commit_interval=COMMIT_INTERVAL_S,
        state_dir=str(args.state_dir),
        loglevel="WARNING",
        on_message_processed=processed,
    )
    source = app.topic(args.input, value_deserializer="json", key_deserializer="str")
    evictions = app.topic(args.checkpoints, value_serializer="json", key_serializer="str")
    watermarks = app.topic(args.watermarks, value_serializer="json", key_serializer="str")
    sdf = app.dataframe(source).apply(step, stateful=True, expand=True)
    sdf.to_topic(lambda value, key, timestamp, headers: evictions if value["type"] == peer_fold.EVICTED else watermarks)
    return app


def read_kept(state_dir: Path) -> dict[str, list[str]]:
    """Every run's kept paths, from the (closed) state store's partitions: {run id: [path, ...]}."""
    kept: dict[str, list[str]] = {}
    partitions = [p for p in state_dir.glob("*/*/*/*") if p.is_dir() and p.name.isdigit()]
    if not partitions:
        raise SystemExit(f"bench.quix_peer: no state store partition under {state_dir}")
    key = json.dumps(STATE_KEY).encode()  # as Quix's state serialises it
    for path in partitions:
        with closing(RocksDBStorePartition(str(path))) as partition:
            transaction = partition.begin()
            runs = [k[: -len(key) - 1] for k, _ in partition.iter_items(lower_bound=b"") if k.endswith(b"|" + key)]
            for prefix in runs:  # the message key as Quix's str serialiser wrote it
                run = transaction.get(key, prefix=prefix, default={"kept": []})
                kept[json.loads(prefix)] = peer_fold.kept_paths(run)
    return kept


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--checkpoints", required=True, help="topic of the evictions")
    p.add_argument("--watermarks", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--guarantee", choices=("exactly-once", "at-least-once"), required=True)
    p.add_argument("--end", type=int, required=True, help="stop after this input offset minus one")
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--kept", type=Path, required=True, help="write the kept sets here (JSON)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    build(args).run()
    args.kept.write_text(json.dumps(read_kept(args.state_dir)))


if __name__ == "__main__":
    main()
