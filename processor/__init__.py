"""ckptlog processor: fold, snapshots, Kafka loop, deletion, CLI."""

__version__ = "0.2.0"
