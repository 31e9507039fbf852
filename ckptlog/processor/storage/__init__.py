"""The storage adapter: the only package in ckptlog that talks to fsspec."""

from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.objects import ObjectStore
from ckptlog.processor.storage.snapshots import SnapshotStore

__all__ = ["Deleter", "ObjectStore", "RetryPolicy", "SnapshotStore"]
