"""Run ownership on protocols other than local files (contract §9): the checks of
ckptlog/processor/storage/markers.py through the protocol's fsspec filesystem, with `exists` and `find`
(one request per directory level above a checkpoint, one listing of the checkpoint)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from ckptlog.events.paths import MARKER, parse_url
from ckptlog.processor.storage.claims import CLAIMING, Claimant, Shared, claim_name, claimant_in, marker_body, named
from ckptlog.processor.storage.objects import mapped_errors, open_protocol
from ckptlog.processor.storage.safety import Outcome, Refused, nesting, ownership

_TEMP = ".tmp-"
CLAIM_BYTES = 4096
Options = Mapping[str, Mapping[str, Any]]


def claimants_at(fs: fsspec.AbstractFileSystem, directory: str) -> set[Claimant] | None:
    path = f"{directory}/{MARKER}"
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return None
    names = [p for p in fs.find(path) if not p.rsplit("/", 1)[-1].startswith(_TEMP)]
    # the first CLAIM_BYTES of each, as a local claim is read (markers._read_claim): a claim is small, and
    # a large object planted there must not be downloaded whole on every walk; it reads as nobody's
    found = {named(p.rsplit("/", 1)[-1], claimant_in(fs.cat_file(p, start=0, end=CLAIM_BYTES))) for p in names}
    return found or {CLAIMING}


def root_problem(
    fs: fsspec.AbstractFileSystem, root: str, base: str, outer: str | None, me: Claimant
) -> Refused | None:
    """Another claimant's marker above the run root (from the bound down) or at it; `base` is the
    backend's spelling of the root."""
    top = fs._strip_protocol(outer).rstrip("/") if outer is not None else base
    if top != base and base.startswith(top + "/"):
        names = base[len(top) + 1 :].split("/")
        for at in range(len(names)):
            where = "/".join([top, *names[:at]])
            refused = nesting(where, claimants_at(fs, where), me)
            if refused is not None:
                return refused
    return ownership(root, claimants_at(fs, base), me)


def path_problem(fs: fsspec.AbstractFileSystem, path: str, base: str, me: Claimant | None) -> Refused | None:
    """Another claimant's marker in a directory between the root and the checkpoint, or inside it."""
    names = path[len(base) + 1 :].split("/")
    for at in range(1, len(names)):
        where = "/".join([base, *names[:at]])
        refused = nesting(where, claimants_at(fs, where), me)
        if refused is not None:
            return refused
    fs.invalidate_cache(path)
    for where in sorted({p.split(f"/{MARKER}/", 1)[0] for p in fs.find(path) if f"/{MARKER}/" in p}):
        refused = nesting(where, claimants_at(fs, where), me)
        if refused is not None:
            return refused
    return None


def claim(root: str, me: Claimant, outer: str | None, options: Options, *, reopened: bool = False) -> Outcome | Shared:
    """The claim through the protocol's filesystem (one object per claimant), then read back;
    `reopened`: then the run's own retired claim is removed (see markers.claim_local)."""
    protocol = parse_url(root).protocol
    fs = open_protocol(protocol, options.get(protocol))
    base = fs._strip_protocol(root).rstrip("/")
    with mapped_errors(root, "claim"):
        if me.retired:  # see markers.claim_local: where the root is, whoever else claims it
            if fs.exists(base):
                fs.pipe_file(f"{base}/{MARKER}/{claim_name(me)}", marker_body(me))
            return None
        claimants = claimants_at(fs, base)
        new = claimants is None or me not in claimants
        if new:
            fs.pipe_file(f"{base}/{MARKER}/{claim_name(me)}", marker_body(me))
            claimants = claimants_at(fs, base)
        if claimants is None or me not in claimants:
            return f"the claim in {root} vanished right after it was written; claiming it again"
        retired = f"{base}/{MARKER}/{claim_name(me._replace(retired=True))}"
        if reopened and fs.exists(retired):  # only now that its live claim is in place
            fs.rm_file(retired)
        problem = root_problem(fs, root, base, outer, me)
        if problem is None and new:  # a root around one already claimed (its tree is small now)
            inside = {p.split(f"/{MARKER}/", 1)[0] for p in fs.find(base) if f"/{MARKER}/" in p} - {base}
            problem = next(filter(None, (nesting(w, claimants_at(fs, w), me) for w in sorted(inside))), None)
    return Shared(problem.reason) if problem is not None else None
