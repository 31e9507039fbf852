"""A report whose metrics lack the run's score attribute, caught by the sender (issue 38 item 5).

`report RUN -m scroe=0.99 --checkpoint …` is applied: the checkpoint ranks last (contract §3, a
missing score is the worst), becomes the latest and may push a real one out, and the processor's
`score_missing` warning reaches only a confirming sender. The reporter knows the run's score
attribute when it sent the run's `run_started` itself, else from the run's VIEW on the state topic
(its `checkpoint_config`: run_started's, or the processor's defaults), read once per reporter from
the run's own partition. A report with a checkpoint and no validation (a validation result may
bring the score) whose metrics miss it raises a `ScoreMissingWarning` through `warnings.warn`,
naming the closest metric the report has (difflib): Python's warning filters decide what happens —
shown once per run by default, an error under `warnings.simplefilter("error", ScoreMissingWarning)`
(the report is then not sent), as `ckptlog report --strict` does.
"""

from __future__ import annotations

import difflib
import logging
import warnings
from collections.abc import Mapping
from typing import Any

from ckptlog.client.epoch import newest_view
from ckptlog.errors import CkptlogError
from ckptlog.events.metrics import MISSING, flatten, lookup
from ckptlog.kafka.connection import KafkaConnection

log = logging.getLogger(__name__)


class ScoreMissingWarning(UserWarning):
    """A report's metrics lack the run's score attribute (its checkpoint would rank last)."""


def missing_score(run_id: str, metrics: Mapping[str, Any], attribute: str) -> str | None:
    """Why a report of `run_id` with these metrics has no score by `attribute`, with the closest
    metric it has; None when it has the metric."""
    if lookup(dict(metrics), attribute) is not MISSING:
        return None
    names = list(flatten(dict(metrics)))
    close = difflib.get_close_matches(attribute, names, n=1, cutoff=0.6)
    if close:
        hint = f"did you mean {attribute!r} instead of {close[0]!r}?"
    else:
        hint = f"its metrics are {', '.join(map(repr, names[:8]))}" if names else "it has no metrics"
    return (
        f"report of run {run_id!r} has no metric {attribute!r}, the run's score attribute: its checkpoint "
        f"would rank last (and, as the latest, may push a better one out); {hint}"
    )


async def view_score_attribute(conn: KafkaConnection, state_topic: str, run_id: str) -> str | None:
    """The score attribute of the run's newest VIEW on `state_topic` (None: no VIEW, or it ranks by
    report order). Reads only the run's partition, and decodes only the run's own records."""
    view = await newest_view(conn, state_topic, run_id)
    config = view.checkpoint_config if view is not None else None
    return config.checkpoint_score_attribute if config is not None else None


class ScoreCheck:
    """One reporter's check: the run's score attribute, learned once, and each report against it."""

    def __init__(self, run_id: str, state_topic: str, enabled: bool = True) -> None:
        self.run_id, self.state_topic, self.enabled = run_id, state_topic, enabled
        self.known = False  # whether `attribute` is the run's yet
        self.attribute: str | None = None

    def started(self, attribute: str | None) -> None:
        """This reporter's run_started was sent (and not rejected): its attribute is the run's."""
        self.known, self.attribute = True, attribute

    async def check(self, conn: KafkaConnection | None, metrics: Mapping[str, Any]) -> None:
        """`warnings.warn(ScoreMissingWarning)` when the metrics lack the run's score attribute (read
        over `conn` the first time, unless known; no connection: not checked)."""
        if not self.enabled:
            return
        if not self.known:
            self.attribute = None if conn is None else await self._read(conn)
            self.known = True
        message = None if self.attribute is None else missing_score(self.run_id, metrics, self.attribute)
        if message is not None:
            warnings.warn(ScoreMissingWarning(message), stacklevel=2)

    async def _read(self, conn: KafkaConnection) -> str | None:
        try:
            return await view_score_attribute(conn, self.state_topic, self.run_id)
        except CkptlogError as exc:  # the check only helps: never fail a report over it
            log.warning(
                "event=score_check_skipped run=%r topic=%s error=%r: its reports' metrics are not checked "
                "against its score attribute (pass state_topic= when the processor has another --state-topic)",
                self.run_id,
                self.state_topic,
                exc,
            )
            return None
