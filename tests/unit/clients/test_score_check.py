"""A report lacking the run's score attribute is caught by the sender, with the closest metric
(issue 38 item 5). No broker: the attribute is known from the reporter's own run_started."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from ckptlog import ScoreMissingWarning
from ckptlog.client.score_check import ScoreCheck, missing_score
from ckptlog.events.metrics import flatten


def test_a_misspelled_metric_names_the_attribute_it_should_have_been() -> None:
    message = missing_score("r", {"scroe": 0.99, "loss": 0.1}, "score")
    assert message is not None
    assert "run 'r' has no metric 'score', the run's score attribute" in message
    assert message.endswith("did you mean 'score' instead of 'scroe'?")


def test_nested_metrics_are_named_as_a_score_attribute_names_them() -> None:
    assert list(flatten({"eval": {"acc": 1, "loss": {"x": 2}}, "step": 3})) == ["eval/acc", "eval/loss/x", "step"]
    assert missing_score("r", {"eval": {"acc": 0.7}}, "eval/acc") is None
    assert missing_score("r", {"eval/acc": 0.7}, "eval/acc") is None
    hint = missing_score("r", {"eval": {"accc": 0.7}}, "eval/acc")
    assert hint is not None and hint.endswith("did you mean 'eval/acc' instead of 'eval/accc'?")


def test_nothing_close_lists_what_the_report_has() -> None:
    assert (missing_score("r", {"loss": 1, "lr": 2}, "accuracy") or "").endswith("its metrics are 'loss', 'lr'")
    assert (missing_score("r", {}, "accuracy") or "").endswith("it has no metrics")


class _NoKafka:
    """A connection the check must not use: the attribute is known."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the check read Kafka ({name}) though it knew the attribute")


async def test_the_check_warns_through_warnings_so_filters_decide_and_reads_nothing_when_it_knows() -> None:
    check = ScoreCheck("r", "state")
    check.started("score")
    with pytest.warns(ScoreMissingWarning, match="did you mean 'score' instead of 'scroe'"):
        await check.check(_NoKafka(), {"scroe": 1.0})  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreMissingWarning)
        await check.check(_NoKafka(), {"score": 1.0})  # type: ignore[arg-type]
        with pytest.raises(ScoreMissingWarning):
            await check.check(_NoKafka(), {"scroe": 1.0})  # type: ignore[arg-type]
    check.started(None)  # report order: nothing to miss
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await check.check(_NoKafka(), {"anything": 1})  # type: ignore[arg-type]
