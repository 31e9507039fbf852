"""The retention table (ckptlog/events/retention_rules.py) is where a rule is defined: everything
spelled per field elsewhere is generated from it or built from it (issue 40 item 1)."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ckptlog.cli.options import rule_options
from ckptlog.cli.rule_flags import RULE_FLAGS
from ckptlog.client.reporter import AsyncReporter
from ckptlog.events import decoded, models, rule_codegen, view
from ckptlog.events.retention_rules import LABELS, RULE_FIELDS, RULES, rule_config
from ckptlog.events.rule_types import Preserved, RuleKwargs
from ckptlog.kafka.clients_io import Delivery

NAMES = [f.name for f in RULE_FIELDS]


@pytest.mark.parametrize("path", sorted(rule_codegen.outputs()), ids=lambda p: p.name)
def test_the_generated_code_is_what_the_table_gives(path: Any) -> None:
    """Run `python -m ckptlog.events.rule_codegen` after changing the table."""
    assert path.read_text(encoding="utf-8") == rule_codegen.outputs()[path]


def test_every_shape_has_exactly_the_rule_fields_after_rays() -> None:
    ray = ["num_to_keep", "checkpoint_score_attribute", "checkpoint_score_order"]
    assert list(models.CheckpointConfig.model_fields) == ray + NAMES
    assert list(decoded.CheckpointConfig.__struct_fields__) == ray + NAMES
    assert list(view.ViewConfig.model_fields) == ray + NAMES
    assert list(RuleKwargs.__annotations__) == NAMES and list(RULE_FLAGS) == NAMES
    assert typing.get_args(Preserved) == LABELS and LABELS[:2] == ("steps", "time")


def test_the_models_check_the_bounds_the_table_gives() -> None:
    for field in RULE_FIELDS:
        bad: Any = "" if field.kind == "str" else field.minimum[1] - (field.minimum[0] == ">=")  # type: ignore[index]
        with pytest.raises(ValueError, match=field.name):
            models.CheckpointConfig.model_validate({field.name: bad})


def test_an_unknown_rule_keyword_is_a_type_error_naming_the_known_ones() -> None:
    with pytest.raises(TypeError, match="keep_evry_n_steps.*keep_every_n_steps"):
        rule_config({"keep_evry_n_steps": 5})
    assert rule_config({"keep_time_interval_s": 60.0, "keep_every_n_steps": 4, "step_attribute": None}) == {
        "keep_every_n_steps": 4,
        "keep_time_interval_s": 60.0,
    }


class _Producer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> Delivery:
        self.sent.append(json.loads(value))
        return Delivery(topic, 0, len(self.sent) - 1)

    async def stop(self) -> None:
        return None


async def test_run_started_sends_the_rules_with_the_ids_of_before_the_table() -> None:
    reporter, producer = AsyncReporter("run-1"), _Producer()
    reporter._producer = producer  # type: ignore[assignment]
    sent = await reporter.run_started(
        "/runs/a", 2, "loss", "min", keep_every_n_steps=4, step_attribute="step", keep_time_interval_s=60.0
    )
    assert sent.event_id == "d03a4fa8-d2e6-57f6-9e5a-31bfb919b865"  # main c404a9f gave this id
    assert list(producer.sent[0]["data"]["checkpoint_config"])[3:] == NAMES[:3]  # those given, in table order
    with pytest.raises(TypeError, match="keep_evry_n_steps"):
        await reporter.run_started("/runs/a", keep_evry_n_steps=4)  # type: ignore[call-arg]
    assert len(producer.sent) == 1


def test_rule_options_give_one_flag_per_field_and_the_command_the_given_ones() -> None:
    got: list[dict[str, Any]] = []
    app = typer.Typer()

    @app.command()
    @rule_options
    def start(run: str, *, rules: dict[str, Any]) -> None:
        got.append(rules)

    result = CliRunner().invoke(app, ["r", "--keep-every-n-steps", "4", "--keep-time-interval-s", "1.5"])
    assert result.exit_code == 0, result.output
    assert got == [{**dict.fromkeys(NAMES), "keep_every_n_steps": 4, "keep_time_interval_s": 1.5}]
    assert CliRunner().invoke(app, ["r", "--keep-every-n-steps", "x"]).exit_code == 2


def test_the_contract_lists_each_rule_with_its_label() -> None:
    text = rule_codegen.contract_region()
    for rule in RULES:
        assert f"- `{rule.label}`: `{rule.fields[0].name}`" in text
