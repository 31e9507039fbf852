"""The storage adapter: the only package in ckptlog that talks to fsspec."""

from processor.storage.deletion import Deleter, RetryPolicy
from processor.storage.objects import ObjectStore
from processor.storage.snapshots import SnapshotStore

__all__ = ["Deleter", "ObjectStore", "RetryPolicy", "SnapshotStore"]
