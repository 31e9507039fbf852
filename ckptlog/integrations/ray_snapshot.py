"""Ray's own bookkeeping, kept consistent with what ckptlog deleted, so Ray can resume (issue 21).

When ckptlog owns deletion (Ray's `CheckpointConfig(num_to_keep=None)`, ckptlog's `num_to_keep`),
Ray's `checkpoint_manager_snapshot.json` still lists every checkpoint ever reported, and a job
resuming the run fails in Ray's `CheckpointManager` before any callback runs
(`CheckpointManagerInitializationError: ... a checkpoint that does not exist anymore`). Ray loads
that file in the controller's `__init__`; the only place to act is that load. So, in a controller
process where a deleting `CkptlogCallback` was unpickled (`OWNS_DELETION`), the snapshot's JSON is
filtered before Ray parses it: a checkpoint whose directory is gone is dropped from the ranked
list (with its report index and validation status). The latest and pending checkpoints are never
dropped — ckptlog never deletes them, so one that is missing is real damage and Ray's own error
stands. Each drop is logged at WARNING.

This wraps a private method (`CheckpointManager._load_state`) of the Ray versions the `ray`
extra pins; on any other layout the wrap is not installed and a WARNING says that a resume after
ckptlog's deletions will fail in Ray, and what to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

OWNS_DELETION: set[bool] = set()  # non-empty once a deleting CkptlogCallback was unpickled in this process
_NEEDED = ("checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result", "pending_training_results")
_STATUS_LISTS = (
    "validated_checkpoint_dir_names",
    "timed_out_validation_checkpoint_dir_names",
    "failed_validation_checkpoint_dir_names",
)


def reconcile(json_state: str, exists: Callable[[str], bool]) -> tuple[str, list[str]]:
    """Ray's snapshot JSON without the ranked checkpoints whose directory (by name) no longer
    exists, and the names dropped; an unknown layout comes back unchanged."""
    state: Any = json.loads(json_state)
    if not isinstance(state, dict) or any(key not in state for key in _NEEDED):
        return json_state, []
    results, indices = state["checkpoint_results"], state["checkpoint_report_indices"]
    if not isinstance(results, list) or not isinstance(indices, list) or len(results) != len(indices):
        return json_state, []
    protected = {(state["latest_checkpoint_result"] or {}).get("checkpoint_dir_name")}
    protected |= {result.get("checkpoint_dir_name") for result in state["pending_training_results"]}
    gone = [
        result["checkpoint_dir_name"]
        for result in results
        if result.get("checkpoint_dir_name") not in protected and not exists(result["checkpoint_dir_name"])
    ]
    if not gone:
        return json_state, []
    pairs = zip(results, indices, strict=True)
    kept = [(result, index) for result, index in pairs if result["checkpoint_dir_name"] not in gone]
    state["checkpoint_results"] = [result for result, _ in kept]
    state["checkpoint_report_indices"] = [index for _, index in kept]
    for key in _STATUS_LISTS:
        if isinstance(state.get(key), list):
            state[key] = [name for name in state[key] if name not in gone]
    return json.dumps(state), gone


def install(manager_class: Any, exists_at: Any) -> bool:
    """Wrap `manager_class._load_state` (once); False when Ray's layout is not the one known here."""
    original = getattr(manager_class, "_load_state", None)
    if original is None or exists_at is None:
        log.warning(
            "event=ray_snapshot_unreconciled message=%r",
            "this Ray's CheckpointManager has no _load_state: a job resuming a run after ckptlog deleted "
            "checkpoints will fail in Ray; install the Ray range `pip install 'ckptlog[ray]'` pins",
        )
        return False
    if getattr(original, "_ckptlog", False):
        return True

    def load_state(self: Any, json_state: str) -> Any:
        if OWNS_DELETION:
            storage = self._storage_context

            def exists(name: str) -> bool:
                path = storage.build_checkpoint_path_from_name(name)
                return bool(exists_at(fs=storage.storage_filesystem, fs_path=path))

            json_state, gone = reconcile(json_state, exists)
            if gone:
                log.warning(
                    "event=ray_snapshot_reconciled experiment=%r dropped=%d message=%r",
                    storage.experiment_fs_path,
                    len(gone),
                    f"Ray's snapshot listed {len(gone)} checkpoints ckptlog deleted ({', '.join(gone[:5])}"
                    f"{', …' if len(gone) > 5 else ''}); Ray resumes without them",
                )
        return original(self, json_state)

    load_state._ckptlog = True  # type: ignore[attr-defined]
    manager_class._load_state = load_state
    return True
