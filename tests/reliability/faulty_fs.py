"""`faulty://`: an in-memory fsspec filesystem that injects storage faults (contract §6–7 under stress).

Each operation class — `write`, `read`, `list`, `delete` — has a plan: fail the next N calls
(transient), fail every call (persistent), corrupt what is read (flip a byte or cut it short),
or add latency. Plans are per class and reset with `FaultyFS.reset()`. Everything the
processor's storage adapter does goes through these methods, so a test drives the real
ObjectStore, SnapshotStore and Deleter against it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

OPS = ("write", "read", "list", "delete")


@dataclass
class Plan:
    fail_next: int = 0  # transient: this many calls raise, then calls work again
    fail_always: bool = False  # persistent
    corrupt: str | None = None  # reads only: "flip" a byte or "truncate" the data
    latency_s: float = 0.0
    calls: int = 0
    failed: int = 0

    def hit(self, op: str, path: str) -> None:
        self.calls += 1
        if self.latency_s:
            time.sleep(self.latency_s)
        if self.fail_always or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            self.failed += 1
            raise OSError(5, f"injected {op} failure", path)


@dataclass
class Faults:
    plans: dict[str, Plan] = field(default_factory=lambda: {op: Plan() for op in OPS})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self, op: str, path: str) -> None:
        with self.lock:
            plan = self.plans[op]
        plan.hit(op, path)


class FaultyFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec is untyped
    protocol = "faulty"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]
    faults: ClassVar[Faults] = Faults()

    @classmethod
    def reset(cls) -> Faults:
        cls.store.clear()
        cls.pseudo_dirs[:] = [""]
        cls.faults = Faults()
        return cls.faults

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        return super()._strip_protocol(str(path).removeprefix("faulty://"))

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        self.faults.hit("write", path)
        super().pipe_file(path, value, *args, **kwargs)

    def cat_file(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        self.faults.hit("read", path)
        data = bytes(super().cat_file(path, *args, **kwargs))
        corrupt = self.faults.plans["read"].corrupt
        if corrupt == "flip" and data:
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
        elif corrupt == "truncate":
            data = data[: len(data) // 2]
        return data

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        self.faults.hit("list", path)
        return super().find(path, *args, **kwargs)

    def rm_file(self, path: str) -> None:
        self.faults.hit("delete", path)
        super().rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        self.faults.hit("delete", str(path))
        super().rm(path, recursive=recursive, maxdepth=maxdepth)


def register() -> type[FaultyFS]:
    fsspec.register_implementation("faulty", FaultyFS, clobber=True)
    FaultyFS.reset()
    return FaultyFS
