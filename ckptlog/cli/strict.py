"""`ckptlog report --strict` and the client's score check (ckptlog.client.score_check) on the command line:
its ScoreMissingWarning printed as the processor's warnings are (`warning CODE: MESSAGE`), or under
--strict an error before anything is sent; and an event applied with warnings failing --strict."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from ckptlog.client.errors import ClientError
from ckptlog.client.reporter import SentEvent


@contextmanager
def score_checked(strict: bool) -> Iterator[list[str]]:
    """Print the Reporter's ScoreMissingWarning (ckptlog.client.score_check) as `warning score_missing: …`
    and yield the codes printed; `strict`: it is an error instead, raised before the report is sent."""
    from ckptlog.client.score_check import ScoreMissingWarning

    said: list[str] = []
    others = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *rest: Any, **named: Any) -> None:
        if not issubclass(category, ScoreMissingWarning):
            others(message, category, *rest, **named)
            return
        typer.echo(f"warning score_missing: {message}", err=True)
        said.append("score_missing")

    with warnings.catch_warnings():
        warnings.simplefilter("error" if strict else "always", ScoreMissingWarning)
        warnings.showwarning = show
        try:
            yield said
        except ScoreMissingWarning as exc:
            raise ClientError(f"{exc}; not sent (--strict; without it the report is sent with a warning)") from None


def strict_check(sent: SentEvent, strict: bool) -> None:
    """--strict: an event the processor applied with warnings (--confirm) exits 1 (after they were printed)."""
    if strict and sent.warnings:
        count = len(sent.warnings)
        raise ClientError(
            f"{sent.type} {sent.event_id} of run {sent.run_id!r} was applied with {count} warning"
            f"{'s' if count > 1 else ''} (--strict)"
        )
