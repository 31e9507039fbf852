"""The storage contract every backend must meet; subclass `StorageContract` per backend.

A subclass provides a `backend` fixture returning a `Backend`; the test methods here then run
unchanged against `file://`, plain local paths, `memory://` (tests/unit) and S3 over HTTP
(tests/integration), so a behaviour that holds on one backend and not another shows up.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

import pytest

from ckptlog.errors import SnapshotCorrupt, SnapshotVersionError, StorageError
from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.claims import Claimant, claim_name
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.objects import ObjectStore
from ckptlog.processor.storage.snapshots import ChainBroken, SnapshotStore, content_digest


class S3Endpoint(TypedDict):
    """The `s3_endpoint` fixture: local S3 URL, fsspec options, and a bucket maker."""

    endpoint_url: str
    storage_options: dict[str, Any]
    make_bucket: Callable[[], str]


class AzureEndpoint(TypedDict):
    """The `azure_endpoint` fixture: Azurite's blob endpoint, adlfs options, and a container maker."""

    blob_endpoint: str
    storage_options: dict[str, Any]
    make_container: Callable[[], str]


class GcsEndpoint(TypedDict):
    """The `gcs_endpoint` fixture: fake-gcs-server's URL, gcsfs options, and a bucket maker."""

    endpoint_url: str
    storage_options: dict[str, Any]
    make_bucket: Callable[[], str]


ALIASES = {"s3": ("s3a",), "gs": ("gcs",), "abfs": ("az", "abfss")}
"""Protocol names fsspec maps to the same filesystem class (s3fs, gcsfs, adlfs)."""


@dataclass(frozen=True)
class Backend:
    """One storage location for one test: its base URL and fsspec options."""

    base_url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> str:
        return self.base_url.split("://", 1)[0] if "://" in self.base_url else "file"

    def store(self) -> ObjectStore:
        return ObjectStore(self.base_url, self.storage_options)

    @property
    def aliases(self) -> list[str]:
        """Other spellings of `base_url` that the backend resolves to the same objects: other
        protocol names of its fsspec filesystem, and Azure's `container@account.dfs.core.windows.net`."""
        rest = self.base_url.partition("://")[2]
        spellings = [f"{alias}://{rest}" for alias in ALIASES.get(self.protocol, ())]
        account = re.search(r"AccountName=([^;]+)", str(self.storage_options.get("connection_string", "")))
        if self.protocol == "abfs" and account:
            container, _, key = rest.partition("/")
            spellings.append(f"abfs://{container}@{account[1]}.dfs.core.windows.net/{key}")
        return spellings

    def deleter(self, **kwargs: Any) -> Deleter:
        retry = RetryPolicy(max_attempts=2, base_delay=0.01)
        return Deleter(storage_options={self.protocol: self.storage_options}, retry=retry, **kwargs)

    def storage(self, outer_root: str, **kwargs: Any) -> tuple[Deleter, ClaimWriter]:
        """A deleter and the claim writer it asks which paths wait, as the processor builds them."""
        claims = ClaimWriter(outer_root=outer_root, storage_options={self.protocol: self.storage_options})
        return self.deleter(outer_root=outer_root, claims=claims, **kwargs), claims


# --- a stand-in codec: "v<version>:<payload>" + "#" + 8 hex chars of sha256 over the rest --


def encode(payload: str, version: int = 1) -> bytes:
    body = f"v{version}:{payload}".encode()
    return body + b"#" + hashlib.sha256(body).hexdigest()[:8].encode()


def decode(objects: Sequence[bytes], sha256s: Sequence[str] | None = None) -> str:
    """A chain of test objects (a base, then its deltas): each verified; their payloads joined by '+'.
    `sha256s`, as a store passes them: each must be the SHA-256 of its object."""
    if sha256s is not None:
        assert list(sha256s) == [hashlib.sha256(data).hexdigest() for data in objects]
    payloads = []
    for data in objects:
        body, sep, checksum = data.rpartition(b"#")
        if not sep or hashlib.sha256(body).hexdigest()[:8].encode() != checksum:
            raise SnapshotCorrupt("checksum mismatch")
        version, _, payload = body.decode().partition(":")
        if version != "v1":
            raise SnapshotVersionError(f"unknown snapshot schema {version}; upgrade ckptlog")
        payloads.append(payload)
    return "+".join(payloads)


class Written(NamedTuple):
    data: bytes
    next_offset: int
    on: tuple[int, str] | None  # what a delta is written on (the store's link)
    expected: bytes  # a full snapshot of the same moment


def chain_of(deltas: int, runs: int = 3) -> list[Written]:
    """A base and `deltas` deltas of a real fold (ckptlog/processor/core/delta.py), one run changed between each."""
    from ckptlog.processor.core import Fold, FoldSettings
    from ckptlog.processor.core.delta import Capture, decode_chain
    from ckptlog.processor.core.snapshot import encode, of_fold
    from tests import factories as f

    fold = Fold(FoldSettings(default_root="file:///data"), track_changes=True)
    out: list[Written] = []
    chain = None
    for n in range(deltas + 1):
        for r in range(runs if n == 0 else 1):
            fold.apply(f.event(f.report(f"run-{r}", {"acc": n}, f"file:///data/run-{r}/c{n}", event_id=f"e{n}-{r}")))
        offset = 10 * (n + 1)
        capture = Capture(fold, "t", 0, offset, chain)
        while capture.step():
            pass
        data = capture.encoded()
        on = None if chain is None else (chain.tip_offset, chain.tip_sha256[:12])
        out.append(Written(data, offset, on, encode(of_fold(fold, "t", 0, offset))))
        chain = decode_chain([w.data for w in out]).chain
    return out


def _digest(data: bytes) -> str:
    return content_digest(data)


class StorageContract:
    """ObjectStore, SnapshotStore and Deleter behaviour that must hold on every backend."""

    # --- ObjectStore ------------------------------------------------------------------

    def test_put_get_roundtrip_and_identical_rewrite_is_noop(self, backend: Backend) -> None:
        store = backend.store()
        store.put_immutable("a/one.bin", b"\x00payload\xff")
        store.put_immutable("a/one.bin", b"\x00payload\xff")
        assert store.get("a/one.bin") == b"\x00payload\xff"
        assert store.list() == ["a/one.bin"]

    def test_put_refuses_different_bytes_and_keeps_original(self, backend: Backend) -> None:
        store = backend.store()
        store.put_immutable("obj", b"first")
        with pytest.raises(StorageError, match="already exists with different content") as err:
            store.put_immutable("obj", b"second")
        assert store.url("obj") in str(err.value)
        assert store.get("obj") == b"first"

    def test_list_is_sorted_relative_and_prefix_filtered(self, backend: Backend) -> None:
        store = backend.store()
        for name in ["b/2", "a/10", "a/9", "a1", "b/1/x"]:
            store.put_immutable(name, name.encode())
        assert store.list() == ["a/10", "a/9", "a1", "b/1/x", "b/2"]
        assert store.list("a/") == ["a/10", "a/9"]
        assert store.list("a") == ["a/10", "a/9", "a1"]
        assert store.list("b/1") == ["b/1/x"]
        assert store.list("missing/") == []

    def test_delete_is_idempotent_and_exists_follows(self, backend: Backend) -> None:
        store = backend.store()
        store.put_immutable("d/x", b"x")
        assert store.exists("d/x") and not store.exists("d/y")
        store.delete("d/x")
        store.delete("d/x")
        assert not store.exists("d/x")
        assert store.list() == []

    def test_get_missing_names_the_url(self, backend: Backend) -> None:
        store = backend.store()
        with pytest.raises(StorageError, match="does not exist") as err:
            store.get("nope/none")
        assert store.url("nope/none") in str(err.value)

    @pytest.mark.parametrize("name", ["../x", "a/../b", "/abs", "s3://b/k", "", "a//b", "a/"])
    def test_unsafe_names_are_refused(self, backend: Backend, name: str) -> None:
        with pytest.raises(StorageError, match="refusing object name"):
            backend.store().put_immutable(name, b"x")

    # --- SnapshotStore ----------------------------------------------------------------

    def test_snapshot_names_sort_in_offset_order(self, backend: Backend) -> None:
        snaps = SnapshotStore(backend.base_url, "ckptlog.events", 0, keep=10, storage_options=backend.storage_options)
        for offset in [10, 9, 100, 2, 0]:
            snaps.write(encode(f"at {offset}"), offset)
        assert snaps.list_offsets() == [0, 2, 9, 10, 100]
        names = backend.store().list("ckptlog.events/0/")
        assert [int(n.split("-")[1]) for n in names] == [0, 2, 9, 10, 100]
        assert snaps.load_latest(decode) == "at 100"

    def test_write_prunes_to_newest_k(self, backend: Backend) -> None:
        snaps = SnapshotStore(backend.base_url, "t", 3, keep=2, storage_options=backend.storage_options)
        urls = [snaps.write(encode(f"s{o}"), o) for o in range(5)]
        assert snaps.list_offsets() == [3, 4]
        assert urls[-1].startswith(snaps.url + "/snapshot-00000000000000000004-")
        assert len(backend.store().list("t/3/")) == 2

    def test_partitions_do_not_see_each_other(self, backend: Backend) -> None:
        opts = backend.storage_options
        one = SnapshotStore(backend.base_url, "t", 1, keep=1, storage_options=opts)
        ten = SnapshotStore(backend.base_url, "t", 10, keep=1, storage_options=opts)
        one.write(encode("p1"), 5)
        ten.write(encode("p10"), 7)
        ten.write(encode("p10 later"), 8)
        assert one.list_offsets() == [5] and ten.list_offsets() == [8]
        assert one.load_latest(decode) == "p1"

    def test_load_latest_skips_corrupt_and_truncated(self, backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
        snaps = SnapshotStore(backend.base_url, "t", 0, keep=5, storage_options=backend.storage_options)
        snaps.write(encode("good"), 10)
        bad_checksum = snaps.write(encode("x")[:-1] + b"0", 20)  # decode's checksum fails
        full = encode("cut short")  # named for its full content, stored truncated
        from ckptlog.processor.storage.snapshots import SnapshotName, content_digest

        truncated = f"t/0/{SnapshotName(30, content_digest(full)).filename}"
        backend.store().put_immutable(truncated, full[:5])
        with caplog.at_level(logging.WARNING, logger="ckptlog.processor.storage.snapshots"):
            assert snaps.load_latest(decode) == "good"
        warned = "\n".join(r.getMessage() for r in caplog.records)
        assert backend.store().url(truncated) in warned
        assert bad_checksum in warned

    def test_version_error_propagates_instead_of_falling_back(self, backend: Backend) -> None:
        snaps = SnapshotStore(backend.base_url, "t", 0, storage_options=backend.storage_options)
        snaps.write(encode("old but fine"), 1)
        snaps.write(encode("from the future", version=9), 2)
        with pytest.raises(SnapshotVersionError, match="upgrade"):
            snaps.load_latest(decode)

    def test_load_latest_is_none_when_nothing_valid(self, backend: Backend) -> None:
        snaps = SnapshotStore(backend.base_url, "t", 0, storage_options=backend.storage_options)
        assert snaps.load_latest(decode) is None
        snaps.write(b"garbage without checksum", 4)
        assert snaps.load_latest(decode) is None
        assert snaps.list_offsets() == [4]

    def test_a_chain_of_deltas_restores_exactly_and_is_pruned_as_a_whole(self, backend: Backend) -> None:
        """A base and its deltas (contract §6) on this backend: the newest restore point reads its whole
        chain; pruning to the newest `keep` restore points keeps every object they need."""
        from ckptlog.processor.core.delta import decode_chain
        from ckptlog.processor.core.snapshot import encode as encode_snapshot

        snaps = SnapshotStore(backend.base_url, "t", 0, keep=2, storage_options=backend.storage_options)
        written = chain_of(3)
        for w in written:
            snaps.write(w.data, w.next_offset, w.on)
        assert snaps.list_offsets() == [10, 20, 30, 40]  # keep=2: points 30 and 40 need the whole chain
        restored = snaps.load_latest(decode_chain)
        assert restored is not None and encode_snapshot(restored) == written[-1].expected
        assert restored.chain is not None and restored.chain.deltas == 3
        later = snaps.load_latest(decode_chain, max_offset=25)
        assert later is not None and encode_snapshot(later) == written[1].expected
        fresh = chain_of(1)
        snaps.write(fresh[0].data, 50)  # a new base (compaction): the old chain is still needed by point 40
        assert snaps.list_offsets() == [10, 20, 30, 40, 50]
        snaps.write(fresh[1].data, 60, (50, _digest(fresh[0].data)))
        assert snaps.list_offsets() == [50, 60]

    def test_a_lost_or_torn_delta_falls_back_to_what_is_whole(
        self, backend: Backend, caplog: pytest.LogCaptureFixture
    ) -> None:
        from ckptlog.processor.core.delta import decode_chain
        from ckptlog.processor.core.snapshot import encode as encode_snapshot

        snaps = SnapshotStore(backend.base_url, "t", 0, keep=10, storage_options=backend.storage_options)
        written = chain_of(3)
        for w in written[:3]:
            snaps.write(w.data, w.next_offset, w.on)
        last = written[3]
        name = f"t/0/delta-{last.next_offset:020d}-{_digest(last.data)}-on-{last.on[0]:020d}-{last.on[1]}.json"  # type: ignore[index]
        backend.store().put_immutable(name, last.data[: len(last.data) // 2])  # torn: named for all of it
        with caplog.at_level(logging.WARNING, logger="ckptlog.processor.storage.snapshots"):
            restored = snaps.load_latest(decode_chain)
        assert restored is not None and encode_snapshot(restored) == written[2].expected
        assert "does not match the name" in caplog.text
        lost = [n for n in backend.store().list("t/0/") if n.startswith("t/0/delta-00000000000000000020-")]
        backend.store().delete(lost[0])  # the delta at 20 is lost: 30 and 40 are unreachable, 10 is whole
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ckptlog.processor.storage.snapshots"):
            restored = snaps.load_latest(decode_chain)
        assert restored is not None and encode_snapshot(restored) == written[0].expected
        assert "an object of its chain is missing" in caplog.text
        with pytest.raises(ChainBroken, match="is gone"):
            snaps.write(b"a delta on the lost one", 50, (20, _digest(written[1].data)))
        assert snaps.list_offsets() == [10, 50]  # its prune dropped 30 and 40: no whole chain needs them
        snaps.write(chain_of(0)[0].data, 60)
        assert snaps.list_offsets() == [10, 60]  # and the next one drops 50

    # --- Deleter ----------------------------------------------------------------------

    async def test_deleter_removes_tree_only_and_is_idempotent(self, backend: Backend) -> None:
        store = backend.store()
        for name in [
            "runs/r/ckpt_1/model.bin",
            "runs/r/ckpt_1/sub/opt.bin",
            "runs/r/ckpt_10/model.bin",
            "runs/r/ckpt_2",
        ]:
            store.put_immutable(name, b"w")
        done: list[tuple[str, str]] = []
        deleter = backend.deleter(on_done=done.extend)
        root, dir_ckpt, file_ckpt = (f"{backend.base_url}/runs/r{s}" for s in ("", "/ckpt_1", "/ckpt_2"))
        assert deleter.submit("r", dir_ckpt, root) and deleter.submit("r", file_ckpt, root)
        assert await deleter.drain(timeout=30)
        assert store.list() == ["runs/r/ckpt_10/model.bin"]
        assert sorted(done) == [("r", dir_ckpt), ("r", file_ckpt)]
        assert deleter.submit("r", dir_ckpt, root)  # already gone: still success
        assert await deleter.drain(timeout=30)
        assert done[-1] == ("r", dir_ckpt) and deleter.outstanding == frozenset()

    async def test_deleter_deletes_what_confinement_checked(self, backend: Backend) -> None:
        """On local files `run/./ckpt` and `run//ckpt` name `run/ckpt`, so that is deleted; on an object
        store they are other keys than `run/ckpt` (which may be a kept checkpoint): refused, nothing
        deleted (contract §9)."""
        store = backend.store()
        store.put_immutable("runs/r/ckpt_1/model.bin", b"w")
        store.put_immutable("runs/r/ckpt_2/model.bin", b"w")
        deleter = backend.deleter()
        root = f"{backend.base_url}/runs/r"
        local = backend.base_url.startswith(("/", "file:"))
        assert deleter.submit("r", f"{root}/./ckpt_1", root) is local
        assert deleter.submit("r", f"{root}//ckpt_2/", root) is local
        assert await deleter.drain(timeout=30)
        assert store.list() == ([] if local else ["runs/r/ckpt_1/model.bin", "runs/r/ckpt_2/model.bin"])
        if not local:
            assert all("empty or '.' segment" in why for why in deleter.refused.values())

    async def test_deleter_refuses_outside_root_and_leaves_it(self, backend: Backend) -> None:
        store = backend.store()
        store.put_immutable("runs/other/ckpt/model.bin", b"keep me")
        deleter = backend.deleter(outer_root=f"{backend.base_url}/runs")
        target = f"{backend.base_url}/runs/other/ckpt"
        assert not deleter.submit("r", target, f"{backend.base_url}/runs/r")
        assert not deleter.submit("r", f"{backend.base_url}/runs/r/../other/ckpt", f"{backend.base_url}/runs/r")
        assert await deleter.drain(timeout=5)
        assert store.get("runs/other/ckpt/model.bin") == b"keep me"
        assert "not strictly under the run's storage root" in deleter.refused[("r", target)]
        assert len(deleter.refused) == 2 and deleter.outstanding == frozenset()

    # --- Deleter: deletion safety (contract §9), on every backend -----------------------------

    async def test_url_chaining_in_a_path_deletes_nothing(self, backend: Backend) -> None:
        """`root/::memory` once went through fsspec's URL chaining and removed the whole root."""
        store = backend.store()
        for name in ("runs/r1/A/model.bin", "runs/r1/C/model.bin", "runs/r1/::memory"):
            if "::" not in name:
                store.put_immutable(name, b"kept")
        root = f"{backend.base_url}/runs/r1"
        refused: list[tuple[tuple[str, str], str]] = []
        deleter = backend.deleter(on_refused=refused.extend)
        for path in (f"{root}/::memory", f"{root}/x::memory://runs", f"{root}/A::file"):
            assert not deleter.submit("r1", path, root)
        assert await deleter.drain(timeout=5)
        assert store.list() == ["runs/r1/A/model.bin", "runs/r1/C/model.bin"]
        assert len(refused) == 3 and all("URL chaining" in why for _, why in refused)

    async def test_a_sibling_sharing_a_name_prefix_survives(self, backend: Backend) -> None:
        store = backend.store()
        names = ["runs/r1/x/model.bin", "runs/r1/xy/model.bin", "runs/r1/x.bak", "runs/r1/x-1/model.bin"]
        for name in names:
            store.put_immutable(name, b"w")
        deleter = backend.deleter()
        root = f"{backend.base_url}/runs/r1"
        assert deleter.submit("r1", f"{root}/x", root)
        assert await deleter.drain(timeout=30)
        assert store.list() == sorted(names[1:])

    async def test_filesystem_and_bucket_roots_are_refused(self, backend: Backend) -> None:
        store = backend.store()
        store.put_immutable("runs/r1/A/model.bin", b"kept")
        protocol, _, rest = backend.base_url.partition("://")
        top = f"{protocol}://{rest.split('/')[0]}" if protocol not in ("file", "memory") else f"{protocol}:///"
        if not _:
            top = "/"
        deleter = backend.deleter()
        assert not deleter.submit("r1", f"{backend.base_url}/runs/r1/A", top)
        assert await deleter.drain(timeout=5)
        assert store.list() == ["runs/r1/A/model.bin"]
        assert "root" in next(iter(deleter.refused.values()))

    async def test_a_deletion_the_current_state_no_longer_owes_is_dropped(self, backend: Backend) -> None:
        """The re-check immediately before deleting: a path live again stays, the others go."""
        store = backend.store()
        for name in ("runs/r1/A/model.bin", "runs/r1/B/model.bin"):
            store.put_immutable(name, b"w")
        root = f"{backend.base_url}/runs/r1"
        done: list[tuple[str, str]] = []
        deleter = backend.deleter(
            on_done=done.extend, recheck=lambda key: "live again" if key[1].endswith("A") else None
        )
        assert deleter.submit("r1", f"{root}/A", root) and deleter.submit("r1", f"{root}/B", root)
        assert await deleter.drain(timeout=30)
        assert store.list() == ["runs/r1/A/model.bin"]
        assert done == [("r1", f"{root}/B")] and deleter.outstanding == frozenset()

    @pytest.mark.parametrize(
        "spelling",
        ["ckpt*", "ck?pt", "ckpt[0]", "ckpt#x", "%2e%2e/other/ckpt", "ckpt/%2F..%2Fother", "x\\..\\..\\other"],
    )
    async def test_hostile_spellings_below_the_root_delete_nothing(self, backend: Backend, spelling: str) -> None:
        """Globs (fsspec's `rm` expands them on object stores), queries and fragments (gcsfs reads
        `?generation=` and `#`), percent-escapes and backslashes: refused, whatever the backend."""
        store = backend.store()
        names = ["runs/r/ckpt/model.bin", "runs/r/ckpt0/model.bin", "runs/r/ckpt1/model.bin", "runs/other/ckpt/m.bin"]
        for name in names:
            store.put_immutable(name, b"kept")
        refused: list[tuple[tuple[str, str], str]] = []
        deleter = backend.deleter(outer_root=f"{backend.base_url}/runs", on_refused=refused.extend)
        root = f"{backend.base_url}/runs/r"
        assert not deleter.submit("r", f"{root}/{spelling}", root)
        assert await deleter.drain(timeout=5)
        assert store.list() == sorted(names)
        assert len(refused) == 1 and deleter.outstanding == frozenset()

    # --- run ownership across partitions (contract §9): claims in run roots -----------------------

    async def claimed(self, backend: Backend, claims: ClaimWriter, *runs: tuple[str, str]) -> None:
        """Claim `(relative root, run id)`s, as the processor does."""
        claims.claim_many([(normalize(f"{backend.base_url}/{root}"), run) for root, run in runs])
        assert await claims.drain(timeout=30)

    async def test_a_claim_names_its_run_and_a_shared_root_is_reported(self, backend: Backend) -> None:
        store = backend.store()
        deleter, claims = backend.storage(f"{backend.base_url}/runs")
        await self.claimed(backend, claims, ("runs/a", "a"))
        assert store.list() == [f"runs/a/{CLAIM_DIR}/{claim_name(Claimant('a'))}"]
        assert b'"run": "a"' in store.get(f"runs/a/{CLAIM_DIR}/{claim_name(Claimant('a'))}")
        await self.claimed(backend, claims, ("runs/a", "a"))  # claimed once: nothing new
        await self.claimed(backend, claims, ("runs/a", "b"), ("runs/a/b", "b2"))
        assert {(root, claimant.run) for root, claimant in claims.shared} == {
            (normalize(f"{backend.base_url}/runs/a"), "b"),
            (normalize(f"{backend.base_url}/runs/a/b"), "b2"),
        }  # the same root, and a root inside it
        assert not claims.refused and len(store.list()) == 3  # each run's claim is its own file
        await deleter.close()
        await claims.close()

    async def test_a_finished_runs_retired_claim_bars_its_own_run_id_and_a_gone_root_gets_none(
        self, backend: Backend
    ) -> None:
        """Contract §3 *Expiry*: after a run's record expired, its id may be folded again as a new run;
        the retired claim written as it retired keeps its checkpoints, on every backend."""
        store = backend.store()
        store.put_immutable("runs/a/c0/model.bin", b"kept for good")
        refused: list[tuple[tuple[str, str], str]] = []
        deleter, claims = backend.storage(f"{backend.base_url}/runs", on_refused=refused.extend)
        await self.claimed(backend, claims, ("runs/a", "a"))
        a = normalize(f"{backend.base_url}/runs/a")
        claims.claim_many([(a, "a"), (normalize(f"{backend.base_url}/runs/gone"), "g")], retired=True)
        assert deleter.submit("a", f"{a}/c0", a)  # the same id, as a new run of it would
        assert await deleter.drain(timeout=30) and await claims.drain(timeout=30)
        assert [why for _, why in refused if "finished" in why] and "runs/a/c0/model.bin" in store.list()
        assert f"runs/a/{CLAIM_DIR}/{claim_name(Claimant('a', retired=True))}" in store.list()
        assert not [name for name in store.list() if name.startswith("runs/gone")]
        await deleter.close()
        await claims.close()

    async def test_no_deletion_reaches_into_another_runs_root(self, backend: Backend) -> None:
        """Runs of different partitions whose roots nest: the fold cannot see it, the claims can."""
        store = backend.store()
        names = ["runs/a/ok/model.bin", "runs/a/b/kept/model.bin", "runs/a/x/y/c/kept/model.bin", "runs/d/z/m.bin"]
        for name in names:
            store.put_immutable(name, b"w")
        refused: list[tuple[tuple[str, str], str]] = []
        done: list[tuple[str, str]] = []
        deleter, claims = backend.storage(f"{backend.base_url}/runs", on_refused=refused.extend, on_done=done.extend)
        await self.claimed(backend, claims, ("runs/a", "a"), ("runs/a/b", "b"), ("runs/a/x/y/c", "c"))
        a, d = f"{backend.base_url}/runs/a", f"{backend.base_url}/runs/d"
        for path in (f"{a}/b", f"{a}/x", f"{a}/ok"):  # b's root; a tree holding c's root; a's own
            assert deleter.submit("a", path, a)
        assert deleter.submit("b", f"{a}/b/kept", f"{a}/b")  # b's root lies inside a's
        await deleter.drain(timeout=30)
        assert done == [("a", f"{a}/ok")] and "runs/a/ok/model.bin" not in store.list()
        assert {key[1].removeprefix(a) for key, _ in refused} == {"/b", "/x", "/b/kept"}
        assert all("the claim of run" in why for _, why in refused)
        await self.claimed(backend, claims, ("runs", "e"))  # a run claims the bound itself
        assert deleter.submit("d", f"{d}/z", d)
        await deleter.drain(timeout=30)
        assert "runs/d/z/m.bin" in store.list() and "'e'" in refused[-1][1]  # every root lies inside e's
        await deleter.close()
        await claims.close()

    async def test_a_root_two_runs_claim_is_protected_both_ways(self, backend: Backend) -> None:
        store = backend.store()
        for name in ("runs/a/c1/model.bin", "runs/a/c2/model.bin", "runs/a/c3/model.bin"):
            store.put_immutable(name, b"w")
        done: list[tuple[str, str]] = []
        refused: list[tuple[tuple[str, str], str]] = []
        deleter, claims = backend.storage(f"{backend.base_url}/runs", on_done=done.extend, on_refused=refused.extend)
        a = f"{backend.base_url}/runs/a"
        await self.claimed(backend, claims, ("runs/a", "a"))
        assert deleter.submit("a", f"{a}/c1", a)  # its own root, claimed by it alone
        await deleter.drain(timeout=30)
        await self.claimed(backend, claims, ("runs/a", "b"))  # another partition's run, the same root
        assert deleter.submit("a", f"{a}/c2", a) and deleter.submit("b", f"{a}/c3", a)
        await deleter.drain(timeout=30)
        assert done == [("a", f"{a}/c1")] and sorted(key for key, _ in refused) == [("a", f"{a}/c2"), ("b", f"{a}/c3")]
        assert [n for n in store.list() if CLAIM_DIR not in n] == ["runs/a/c2/model.bin", "runs/a/c3/model.bin"]
        await deleter.close()
        await claims.close()


class RemoteStorageContract(StorageContract):
    """The contract, and what holds on object stores whose fsspec filesystem answers to more than
    one spelling (S3, GCS, Azure Blob)."""

    async def test_other_spellings_of_the_store_are_never_under_the_root(self, backend: Backend) -> None:
        """`s3a://`, `gcs://`, `az://`, `abfss://` and `container@account…` name the same objects as the
        root's own spelling: a path in one of them is not provably under the root, so it is refused."""
        assert backend.aliases, f"{backend.protocol}:// has no other spelling: subclass StorageContract"
        store = backend.store()
        store.put_immutable("runs/r/ckpt/model.bin", b"mine")
        store.put_immutable("runs/other/ckpt/model.bin", b"theirs")
        refused: list[tuple[tuple[str, str], str]] = []
        deleter = backend.deleter(outer_root=f"{backend.base_url}/runs", on_refused=refused.extend)
        root = f"{backend.base_url}/runs/r"
        for alias in backend.aliases:
            assert ObjectStore(alias, backend.storage_options).get("runs/other/ckpt/model.bin") == b"theirs", alias
            assert not deleter.submit("r", f"{alias}/runs/other/ckpt", root)  # another run's, spelled otherwise
            assert not deleter.submit("r", f"{alias}/runs/r/ckpt", root)  # the run's own, spelled otherwise
            assert not deleter.submit("r", f"{alias}/runs/other/ckpt", f"{alias}/runs/r")  # outside the bound
        assert await deleter.drain(timeout=5)
        assert store.list() == ["runs/other/ckpt/model.bin", "runs/r/ckpt/model.bin"]
        assert len(refused) == 3 * len(backend.aliases)
        assert all("not strictly under" in why for _, why in refused), refused
