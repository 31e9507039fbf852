"""The storage tree of every protocol but local files (contract §9): the `StorageTree` of
ckptlog/processor/storage/tree.py through the protocol's own fsspec filesystem, never URL chaining
(`::` never reaches here: confinement refuses it, and `fsspec.filesystem(protocol)` would not chain).

An object store has no links and no directories to open: a step down is a longer prefix, a claim
directory is read with `exists` and `find` (one request per directory level above a checkpoint, one
listing of the checkpoint), each claim's first CLAIM_BYTES only. The backend's own spelling of a
path must be its root's followed by the path's canonical rest, a check independent of the canonical
one done before. Caches are bypassed before every look, so a removal is confirmed by a fresh `exists`.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

import fsspec

from ckptlog.errors import StorageError
from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage.claims import (
    CLAIM_BYTES,
    CLAIMING,
    TEMP_PREFIX,
    Claimant,
    claim_body,
    claim_name,
    claimant_in,
    named,
)
from ckptlog.processor.storage.safety import Refused, nesting


@dataclass(frozen=True, slots=True)
class RemoteTree:
    """The `StorageTree` of one protocol's filesystem."""

    fs: fsspec.AbstractFileSystem

    def start(self, url: str, make: bool, bound: bool) -> RemoteDir:
        return RemoteDir(self.fs, self._spelled(url))

    def spelling_problem(self, url: str, root: str) -> Refused | None:
        path, base = self._spelled(url), self._spelled(root)
        if not base.strip("/") or path != f"{base}/{url[len(root) + 1 :]}" or len(path) <= len(base) + 1:
            return Refused(f"the backend spells {url} as {path!r}, which is not strictly below the root's {base!r}")
        return None

    def _spelled(self, url: str) -> str:
        return str(self.fs._strip_protocol(url)).rstrip("/")


@dataclass(frozen=True, slots=True)
class RemoteDir:
    """One directory of a remote walk: a path in the backend's spelling."""

    fs: fsspec.AbstractFileSystem
    path: str

    def child(self, name: str, make: bool, where: str) -> RemoteDir:
        return RemoteDir(self.fs, f"{self.path}/{name}")

    def claimants(self) -> set[Claimant] | None:
        fs, claims = self.fs, f"{self.path}/{CLAIM_DIR}"
        fs.invalidate_cache(claims)
        if not fs.exists(claims):
            return None
        names = [p for p in fs.find(claims) if not p.rsplit("/", 1)[-1].startswith(TEMP_PREFIX)]
        found = {named(p.rsplit("/", 1)[-1], claimant_in(fs.cat_file(p, start=0, end=CLAIM_BYTES))) for p in names}
        return found or {CLAIMING}

    def claims_below(self, name: str | None, me: Claimant | None) -> Refused | None:
        top = self.path if name is None else f"{self.path}/{name}"
        self.fs.invalidate_cache(top)
        found = {p.split(f"/{CLAIM_DIR}/", 1)[0] for p in self.fs.find(top) if f"/{CLAIM_DIR}/" in p}
        for where in sorted(found - {self.path}):
            refused = nesting(where, RemoteDir(self.fs, where).claimants(), me)
            if refused is not None:
                return refused
        return None

    def remove_checked(self, name: str, url: str, me: Claimant) -> Refused | None:
        """Two steps: one listing of the tree for claims, then `rm` and a fresh `exists`."""
        inside = self.claims_below(name, me)
        if inside is None:
            self._remove(name, url)
        return inside

    def _remove(self, name: str, url: str) -> None:
        path = f"{self.path}/{name}"
        with suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)
        self.fs.invalidate_cache(path)
        if self.fs.exists(path):
            raise still_exists(url)

    def write_claim(self, me: Claimant, root: str) -> bool:
        """A retired claim is written all the same (over whatever has its name: it is where the root is)."""
        if not me.retired and me in (self.claimants() or ()):
            return False
        self.fs.pipe_file(f"{self.path}/{CLAIM_DIR}/{claim_name(me)}", claim_body(me))
        return True

    def remove_claim(self, claimant: Claimant, root: str) -> Refused | None:
        path = f"{self.path}/{CLAIM_DIR}/{claim_name(claimant)}"
        if self.fs.exists(path):
            self.fs.rm_file(path)
        return None

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def close(self) -> None:
        pass


def still_exists(url: str) -> StorageError:
    return StorageError(
        f"{url} still exists after deleting it; check the storage's permissions and whether something re-creates it"
    )
