"""The flags of the settings: name -> (group, flag type or None for env-only, help with the default).

Generated from ServiceSettings (ckptlog/processor/service/settings.py) by `python -m ckptlog.cli.options
--write-flags`; tests/unit/cli/test_options.py checks it is what the model gives. It lets a
command's --help and its argument errors skip importing the model (ckptlog/cli/options.py).
"""

from __future__ import annotations

# ruff: noqa: E501
# fmt: off
FLAGS: dict[str, tuple[str, str | None, str]] = {
    'bootstrap_servers': ('connection', 'str', 'Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)'),
    'security_protocol': ('connection', 'str', 'PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default PLAINTEXT)'),
    'sasl_mechanism': ('connection', 'str', 'SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512'),
    'sasl_plain_username': ('connection', 'str', 'SASL user name'),
    'sasl_plain_password': ('connection', None, 'SASL password'),
    'ssl_cafile': ('connection', 'str', "CA bundle (PEM) the broker's certificate is checked against"),
    'ssl_certfile': ('connection', 'str', 'client certificate (PEM), for mutual TLS'),
    'ssl_keyfile': ('connection', 'str', "the client certificate's key (PEM)"),
    'delivery_timeout_s': ('clients', 'float', "clients: how long a send waits for the broker's acknowledgement before raising KafkaIOError (default 30.0)"),
    'aiokafka_internals': ('connection', 'str', "auto: the fast producer path into aiokafka's private batch builders, only on the aiokafka version it was written for (else the public API, slower); off: always aiokafka's public API (default auto)"),
    'group_id': ('group', 'str', "the processor's consumer group (default ckptlog)"),
    'group_instance_id': ('group', 'str', 'static group membership id (e.g. the pod name)'),
    'transactional_id_prefix': ('group', 'str', 'prefix of the transactional ids (default: the group id)'),
    'guarantee': ('group', 'str', 'exactly_once or at_least_once (default exactly_once)'),
    'session_timeout_ms': ('group', 'int', "group session timeout, 6000..1800000 ms: how soon a dead member's partitions move (default 10000)"),
    'input_topic': ('topics', 'str', 'input events (default ckptlog.events)'),
    'checkpoints_topic': ('topics', 'str', 'checkpoint outputs and warnings (default ckptlog.checkpoints)'),
    'validations_topic': ('topics', 'str', "validation requests (the evaluators' queue) (default ckptlog.validations)"),
    'watermarks_topic': ('topics', 'str', 'watermarks (default ckptlog.watermarks)'),
    'state_topic': ('topics', 'str', "each run's VIEW (compacted) (default ckptlog.state)"),
    'dlq_topic': ('topics', 'str', 'dead letters (default ckptlog.dlq)'),
    'topic_partitions': ('topics', 'int', 'partitions of the topics it creates (default 1)'),
    'replication_factor': ('topics', 'int', 'replication of the topics it creates (default min(3, brokers))'),
    'storage_root': ('fold', 'str', 'outer bound of every deletion, and the parent of the roots of runs without run_started'),
    'default_num_to_keep': ('fold', 'int', 'num_to_keep of runs without run_started (default: keep all)'),
    'score_attribute': ('fold', 'str', 'score metric of runs without run_started'),
    'score_order': ('fold', 'str', 'max or min, for runs without run_started (default max)'),
    'max_payload_bytes': ('fold', 'int', 'reject larger events (default 1048576)'),
    'max_depth': ('fold', 'int', 'reject JSON nested deeper (default 64)'),
    'finished_runs_kept': ('fold', 'int', 'finished runs per input partition whose record (id, root, state to reopen) is kept; the oldest expire first (contract §3) (default 10000)'),
    'snapshots': ('snapshots', 'str', 'fsspec URL of the snapshots (default ${CKPTLOG_HOME:-~/.ckptlog}/snapshots)'),
    'snapshot_every': ('snapshots', 'int', 'snapshot every N events (default 10000)'),
    'snapshot_interval_s': ('snapshots', 'float', '...or every T seconds (default 60.0)'),
    'keep_snapshots': ('snapshots', 'int', 'restore points kept per partition, with every base and delta they need (default 3)'),
    'snapshot_deltas': ('snapshots', 'int', 'incremental snapshots: deltas written on a base before a new full one (0: every snapshot is full) (default 32)'),
    'allow_data_loss': ('snapshots', 'bool', 'continue from the log start when it lost offsets a restore needs (default False)'),
    'snapshot_storage_options': ('snapshots', None, 'fsspec options of --snapshots'),
    'checkpoint_storage_options': ('snapshots', None, 'protocol -> fsspec options, for deletions'),
    'deletion_concurrency': ('snapshots', 'int', 'deletion jobs at once (each up to 100 paths) (default 8)'),
    'max_batch_records': ('loop', 'int', 'input records per batch at most (default 20000)'),
    'poll_timeout_ms': ('loop', 'int', 'how long a poll waits for records (default 100)'),
    'log_format': ('logs', 'str', "console (key=value lines) or json (one object per line); text is console's old name (default console)"),
    'log_level': ('logs', 'str', 'DEBUG, INFO, WARNING, ... (default INFO)'),
    'metrics_port': ('observability', 'int', 'serve /metrics, /healthz and /readyz on this port'),
    'metrics_host': ('observability', 'str', 'address for --metrics-port (0.0.0.0 or :: for every interface) (default 127.0.0.1)'),
}
