"""What a run's reporter sends: one method per input event, written once for both reporters.

`Senders` is a base of `AsyncReporter` (ckptlog/client/reporter.py) and of the sync `Reporter`
(ckptlog/client/sync_clients.py). Each method is written async, with the async reporter as
`self`, and decorated `@twin` (ckptlog/client/loop_thread.py): on an `AsyncReporter` it is that
coroutine method, on a `Reporter` its blocking twin, typed for mypy from the same signature. So a
new input event's client method is written here, once: its body (the `data`), its deterministic
id (`ids.event_id(self.run_id, kind, *parts)`: what happened, never when it was sent;
ckptlog/client/ids.py) and `self._send(kind, ...)`; the sync `Reporter` has it with no line of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Unpack

from ckptlog.client import ids
from ckptlog.client.bodies import PathLike, ValidationArg, as_url, validation_body
from ckptlog.client.errors import ClientError, InvalidEvent
from ckptlog.client.loop_thread import twin
from ckptlog.events.retention_rules import rule_config
from ckptlog.events.rule_types import RuleKwargs
from ckptlog.events.rules import validation_without_checkpoint

if TYPE_CHECKING:
    from ckptlog.client.event_warnings import EventWarning
    from ckptlog.client.reporter import AsyncReporter, SentEvent


class Senders:
    """The events of one run (see the module docstring); every call returns once the broker
    acknowledged the event, or, confirming, once the processor committed it."""

    @twin
    async def run_started(
        self: AsyncReporter,
        storage_path: PathLike,
        num_to_keep: int | None = None,
        checkpoint_score_attribute: str | None = None,
        checkpoint_score_order: Literal["max", "min"] = "max",
        validation: ValidationArg | None = None,
        *,
        event_id: str | None = None,
        confirm: bool | None = None,
        **rules: Unpack[RuleKwargs],
    ) -> SentEvent:
        """Declare the run's storage root and Ray's CheckpointConfig (send before the first checkpoint).
        Beyond Ray, `rules`: the retention rules' fields (ckptlog/events/retention_rules.py, contract
        §3), e.g. `keep_every_n_steps` preserves every checkpoint whose step (the metric
        `step_attribute`, default the report's 1-based number) is a multiple of N, and
        `keep_time_interval_s` one checkpoint per interval of report time; preserved checkpoints
        are never evicted and do not count against `num_to_keep`."""
        root = as_url(storage_path, "storage_path")
        config: dict[str, Any] = {
            "num_to_keep": num_to_keep,
            "checkpoint_score_attribute": checkpoint_score_attribute,
            "checkpoint_score_order": checkpoint_score_order,
            **rule_config(rules),  # only those set: the same ids as before the rules
        }
        data: dict[str, Any] = {"storage_path": root, "checkpoint_config": config}
        if validation is not None and validation is not False:
            spec = validation_body(validation)
            data["validation"] = {} if spec is True else spec
        async with self._order:
            event_id = event_id or ids.run_started_id(self.run_id, data)
            started = partial(self._started, root, checkpoint_score_attribute)  # once sent (reporter.py)
            return await self._send("run_started", data, event_id, confirm, started)

    @twin
    async def report(
        self: AsyncReporter,
        metrics: Mapping[str, Any],
        checkpoint_path: PathLike | None = None,
        validation: ValidationArg = False,
        generation: int | None = None,
        *,
        index: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """Ray's `train.report(metrics, checkpoint)`; `validation` asks an evaluator to score the
        checkpoint first (True = the run's default spec, or {"fn_kwargs": ..., "timeout_s": ...})."""
        async with self._order:  # concurrent calls must not pick the same index, and keep their order
            return await _report(self, metrics, checkpoint_path, validation, generation, index, event_id, confirm)

    @twin
    async def worker_group_restart(
        self: AsyncReporter,
        num_workers: int,
        reason: str | None = None,
        *,
        generation: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """A new worker group starts: generation + 1 (or `generation`, e.g. a resumed job going on
        after the run's view), report index back to 0 (as the fold does); later reports carry the
        new generation so reports from the old workers are rejected."""
        async with self._order:
            new_generation = generation if generation is not None else (self.generation or 0) + 1
            data: dict[str, Any] = {"num_workers": num_workers, "reason": reason}
            if generation is not None:
                data["generation"] = generation
            event_id = event_id or ids.restart_id(self.run_id, new_generation)
            restarted = partial(self._restarted, new_generation)
            return await self._send("worker_group_restart", data, event_id, confirm, restarted)

    @twin
    async def finish(
        self: AsyncReporter,
        keep: Literal["kept", "best"] | None = None,
        *,
        epoch: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """The run is over (contract §3 "Finished runs"): its last retention is applied (`keep`:
        `kept`, the default, keeps the kept set; `best` only the best besides the latest, pending
        and preserved ones), later events for it are refused (`run_finished`) and it leaves the
        processor's hot state once its deletions are settled; its final VIEW stays readable.
        `epoch`: the run's reopens so far, which its id names (default: this reporter's, else the VIEW's)."""
        async with self._order:
            data: dict[str, Any] = {} if keep is None else {"keep": keep}
            if event_id is None:
                event_id = ids.finished_id(self.run_id, await self._epoch(epoch, strict=False))
            return await self._send("run_finished", data, event_id, confirm, lambda: None)

    @twin
    async def reopen(
        self: AsyncReporter, *, epoch: int | None = None, event_id: str | None = None, confirm: bool | None = None
    ) -> SentEvent:
        """A finished run goes on with its state as it finished (contract §3 "Reopened runs"); refused
        (`confirm=True`: `EventRejected`) when it has not finished, is unknown or expired, or kept no
        state. `epoch`: the reopen this is, which its id names (default: the VIEW's `reopened` + 1)."""
        async with self._order:
            start = epoch if epoch is not None else await self._epoch(None, strict=True) + 1
            event_id = event_id or ids.reopened_id(self.run_id, start)
            return await self._send("run_reopened", {}, event_id, confirm, partial(self._reopened, start))

    @twin
    async def forget(self: AsyncReporter, *, event_id: str | None = None, confirm: bool | None = None) -> SentEvent:
        """An operator drops the run (contract §3 "Forgotten runs"): its state and VIEW go, its
        checkpoints stay in storage; refused (`deletions_owed`) while deletions are not settled.
        Its id names the run alone: a run is forgotten once."""
        async with self._order:
            event_id = event_id or ids.event_id(self.run_id, "run_forgotten")
            return await self._send("run_forgotten", {}, event_id, confirm, lambda: None)

    @twin
    async def validation_result(
        self: AsyncReporter,
        checkpoint_path: PathLike,
        status: Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"],
        metrics: Mapping[str, Any] | None = None,
        error: str | None = None,
        *,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """A validation result the caller obtained itself (e.g. Ray's own validation, forwarded by
        ckptlog.integrations.ray), rather than through ckptlog's Evaluator: merged into the
        checkpoint's metrics when VALIDATED, as the fold does for any result."""
        data: dict[str, Any] = {
            "checkpoint_path": as_url(checkpoint_path, "checkpoint_path"),
            "status": status,
            "metrics": dict(metrics or {}),
        }
        if error is not None:
            data["error"] = error
        async with self._order:
            event_id = event_id or ids.forwarded_result_id(self.run_id, data)
            return await self._send("validation_result", data, event_id, confirm, lambda: None)

    @twin
    async def confirm(self: AsyncReporter, sent: SentEvent, timeout_s: float | None = None) -> tuple[EventWarning, ...]:
        """Wait until the processor committed `sent` (an event this reporter sent while confirming, i.e.
        with `confirm=True`) and return the warnings it caused; raise `EventRejected` if it was
        rejected, `NotConfirmed` at `timeout_s` (default: the reporter's `confirm_timeout_s`)."""
        if self._confirmer is None:
            raise ClientError("nothing to confirm: create the reporter with confirm=True (or pass confirm=True)")
        return await self._confirm(self._confirmer, sent, self.confirm_timeout_s if timeout_s is None else timeout_s)


async def _report(
    reporter: AsyncReporter,
    metrics: Mapping[str, Any],
    checkpoint_path: PathLike | None,
    validation: ValidationArg,
    generation: int | None,
    index: int | None,
    event_id: str | None,
    confirm: bool | None,
) -> SentEvent:
    if not isinstance(metrics, Mapping):  # the fold would dead-letter it: say so now, as ckptlog's error
        raise InvalidEvent(
            f"metrics of run {reporter.run_id!r} must be a mapping of name to value, got {metrics!r:.80}"
        )
    gen = generation if generation is not None else reporter.generation
    slot = gen or 0
    position = index if index is not None else reporter._next_index.get(slot, 0)
    data: dict[str, Any] = {"metrics": dict(metrics), "checkpoint": None, "validation": validation_body(validation)}
    if checkpoint_path is None and data["validation"] is not False:  # the fold would refuse it: say so now
        raise InvalidEvent(validation_without_checkpoint(reporter.run_id).message)
    if checkpoint_path is not None:
        data["checkpoint"] = {"path": reporter._checkpoint_url(checkpoint_path)}
        if data["validation"] is False:  # else its validation result may bring the score
            await reporter._check_score(data["metrics"])
    if gen is not None:
        data["generation"] = gen
    if event_id is None:
        content = reporter.report_ids == "content" and index is None
        event_id = (
            ids.report_content_id(reporter.run_id, data) if content else ids.report_id(reporter.run_id, gen, position)
        )

    def counted() -> None:
        reporter._next_index[slot] = max(reporter._next_index.get(slot, 0), position + 1)
        reporter.reports_sent += 1

    return await reporter._send("report", data, event_id, confirm, counted)
