"""ckptlog processor: fold, snapshots, Kafka loop, deletion, CLI."""

__version__ = "0.3.0"
