"""The input and output tables cover every kind, and nothing else keeps a list of kinds (issue 26
item 3): every model, Struct, handler, schema file, topic and metric label of an event kind is
found from its row of `INPUT_KINDS` (ckptlog/events/decoded.py) or `OUTPUT_KINDS` (ckptlog/events/outputs.py)."""

from __future__ import annotations

import ast
import json
import typing
from pathlib import Path

import msgspec
import pytest
from pydantic import BaseModel

from ckptlog.events import decoded, models, outputs
from ckptlog.events.decoded import INPUT_KINDS, INPUTS, decode_fast
from ckptlog.events.outputs import OUTPUT_KINDS, OUTPUTS
from ckptlog.events.schema import SCHEMAS, documents, input_file, output_file
from ckptlog.processor.core import Fold
from ckptlog.processor.service.metrics import EVENT_LABELS, OUTPUT_LABELS, UNDECODABLE, VIEW, PrometheusMetrics
from ckptlog.processor.service.records import TopicNames
from tests import factories as f

REPO = Path(__file__).resolve().parents[3]
SAMPLES = {  # one event of the newest version of each input kind
    "run_started": f.started(),
    "report": f.report(path="file:///data/r/a"),
    "validation_result": f.result("r", "file:///data/r/a"),
    "worker_group_restart": f.restart(),
    "deletion_completed": f.settled("r", deleted=[("file:///data/r/a", 0)]),
    "run_finished": f.finished(),
    "run_forgotten": f.forgotten(),
    "root_refused": f.root_refused(),
    "run_reopened": f.reopened(),
}


def defined_in(module: object, base: type) -> set[type]:
    """The public subclasses of `base` that `module` itself defines."""
    return {
        value
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, base)
        and value is not base
        and value.__module__ == getattr(module, "__name__", None)
        and not name.startswith("_")
    }


# -- the input table --------------------------------------------------------------------


def test_every_envelope_model_and_struct_is_one_row() -> None:
    assert len(INPUTS) == len(INPUT_KINDS)
    assert [k.model for k in INPUT_KINDS] == list(dict.fromkeys(k.model for k in INPUT_KINDS))
    assert {k.model for k in INPUT_KINDS} == defined_in(models, models.Envelope)
    assert {k.struct for k in INPUT_KINDS} == defined_in(decoded, decoded._Envelope)


def test_each_rows_model_struct_and_type_agree() -> None:
    for kind in INPUT_KINDS:
        (literal,) = typing.get_args(kind.model.model_fields["type"].annotation)
        assert literal == kind.type == kind.struct.__struct_config__.tag
        assert kind.model.__name__ == kind.struct.__name__
        assert decoded.INPUT_TYPES[kind.name] == kind.version and decoded.EVENT_TYPES[kind.type] is kind.struct


def test_every_model_inside_an_input_has_the_struct_of_its_name() -> None:
    """`from_model` copies a model into the Struct of its class's name, nested models too."""

    def nested(model: type[BaseModel]) -> set[type[BaseModel]]:
        found = {model}
        for field in model.model_fields.values():
            for arg in _flatten(field.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    found |= nested(arg)
        return found

    reachable = set().union(*(nested(k.model) for k in INPUT_KINDS))
    assert {m.__name__ for m in reachable} == set(decoded._STRUCTS)
    for model in reachable:
        struct = decoded._STRUCTS[model.__name__]
        assert list(struct.__struct_fields__) == [name for name in model.model_fields if name != "type"]


def _flatten(annotation: object) -> list[object]:
    args = typing.get_args(annotation)
    return [annotation] if not args else [leaf for arg in args for leaf in _flatten(arg)]


def test_every_kind_decodes_to_its_struct_and_the_fast_rows_are_the_fast_path() -> None:
    assert set(SAMPLES) == set(INPUTS)
    for name, raw in SAMPLES.items():
        kind = INPUTS[name]
        assert type(f.event(raw)) is kind.struct
        assert (decode_fast(raw) is not None) == kind.fast, name


def test_every_handler_resolves_to_a_fold_method_or_a_lifecycle_function() -> None:
    fold = Fold()
    for kind in INPUT_KINDS:
        assert callable(fold.handler(kind.handler)), kind.handler
    assert set(fold._handlers) == {k.struct for k in INPUT_KINDS}
    with pytest.raises(AttributeError):
        fold.handler("lifecycle.no_such_handler")
    with pytest.raises(ValueError, match="a Fold method or a function"):
        fold.handler("retention.apply_retention")


def test_upcasters_chain_from_the_oldest_version_read_to_the_newest() -> None:
    for kind in INPUT_KINDS:
        steps = sorted(kind.upcasters)
        if steps:
            assert steps == list(range(steps[0], kind.version)), kind.name


# -- the output table -------------------------------------------------------------------


def test_every_output_model_is_one_row() -> None:
    assert len(OUTPUTS) == len(OUTPUT_KINDS)
    parts = {  # models that are a field of a row's model (a reason object), not outputs of their own
        arg
        for kind in OUTPUT_KINDS
        for field in kind.model.model_fields.values()
        for arg in (field.annotation, *typing.get_args(field.annotation))
        if isinstance(arg, type) and issubclass(arg, BaseModel)
    }
    assert {k.model for k in OUTPUT_KINDS} == defined_in(outputs, BaseModel) - {outputs.OutputEnvelope} - parts
    assert len({k.model for k in OUTPUT_KINDS}) == len(OUTPUT_KINDS)


def test_routing_reads_the_table() -> None:
    names = TopicNames("in", "ckpt", "val", "wm", "state", "dlq")
    assert set(typing.get_args(outputs.Topic)) <= set(TopicNames.__dataclass_fields__)
    for kind in OUTPUT_KINDS:
        assert names.route(kind.name) == getattr(names, kind.topic)
        assert names.placement(kind.name) == (getattr(names, kind.topic), kind.version)


# -- what reads the tables --------------------------------------------------------------


def test_the_schemas_publish_every_kind_and_nothing_else() -> None:
    docs = documents()
    on_disk = {p.relative_to(SCHEMAS).as_posix() for p in SCHEMAS.rglob("*.json")}
    assert on_disk == set(docs)  # no schema file of a kind that is gone
    assert {n for n in docs if n.startswith("input/")} == {input_file(k.name, k.version) for k in INPUT_KINDS}
    expected = {output_file(k.name, k.version) for k in OUTPUT_KINDS} | {"output/envelope.json"}
    assert {n for n in docs if n.startswith("output/")} == expected
    channels = json.loads((SCHEMAS / "asyncapi.json").read_text())["channels"]
    assert set(channels["ckptlog.events"]["messages"]) == set(INPUTS)
    for kind in OUTPUT_KINDS:
        homes = [topic for topic, channel in channels.items() if kind.name in channel["messages"]]
        assert homes == [f"ckptlog.{kind.topic}"], kind.name


def test_the_metric_labels_are_the_tables_and_start_at_zero() -> None:
    assert (*(k.name for k in INPUT_KINDS), UNDECODABLE) == EVENT_LABELS
    assert (*(k.name for k in OUTPUT_KINDS), VIEW) == OUTPUT_LABELS
    metrics = PrometheusMetrics()
    samples = {(s.name, s.labels.get("type")): s.value for family in metrics.registry.collect() for s in family.samples}
    for label in EVENT_LABELS:
        assert samples["ckptlog_events_total", label] == 0
    for label in OUTPUT_LABELS:
        assert samples["ckptlog_outputs_total", label] == 0


OUTPUT_NAMES = set(OUTPUTS)
NOT_AN_OUTPUT = {
    ("ckptlog/cli/topics.py", "warning"),  # a message prefix, not the output
    (
        "ckptlog/processor/ui/pages.py",
        "warning",
    ),  # a history step kind (ckptlog/processor/explain/story.py), not the output
}


def test_no_output_name_is_spelled_outside_the_table() -> None:
    """The server and the client name an output only through its row (docstrings aside), so that
    renaming or adding one cannot leave a routing branch or a reader behind."""
    found = []
    for pkg in ("processor", "events", "ckptlog"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "ckptlog/events/outputs.py":
                continue
            for name in _strings(path) & OUTPUT_NAMES:
                if (rel, name) not in NOT_AN_OUTPUT:
                    found.append(f"{rel}: {name!r}")
    assert found == []


def _strings(path: Path) -> set[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    constants = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return {n.value for n in constants if id(n) not in docs}


def test_the_fast_decoder_is_built_from_the_table() -> None:
    fast = {kind.struct for kind in INPUT_KINDS if kind.fast}
    assert set(typing.get_args(decoded._FAST.type)) == fast
    assert all(issubclass(s, msgspec.Struct) for s in fast)
