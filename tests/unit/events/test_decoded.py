"""One decoded type: every accepted event is a frozen Struct of ckptlog/events/decoded.py, whichever
route decoded it, and the Structs mirror the pydantic models field for field."""

from __future__ import annotations

import msgspec
import pytest
from pydantic import BaseModel

from ckptlog.events import decoded, models
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Reason, Rejection
from tests import factories as f

PAIRS: list[tuple[type[BaseModel], type[msgspec.Struct]]] = [
    (getattr(models, name), struct) for name, struct in decoded._STRUCTS.items()
]  # every Struct and the model of its name (tests/unit/events/test_kinds.py: every model has one)


@pytest.mark.parametrize(("model", "struct"), PAIRS, ids=lambda kind: kind.__name__)
def test_each_struct_has_its_models_fields(model: type[BaseModel], struct: type[msgspec.Struct]) -> None:
    assert struct.__name__ == model.__name__
    assert list(struct.__struct_fields__) == [name for name in model.model_fields if name != "type"]
    assert struct.__struct_config__.frozen


def test_from_model_copies_nested_models_and_checks_the_kind() -> None:
    model = models.RunStartedData(storage_path="/d/r", validation=models.ValidationSpec(timeout_s=2.0))
    data = decoded.from_model(model, decoded.RunStartedData)
    assert data == decoded.RunStartedData("/d/r", decoded.CheckpointConfig(), decoded.ValidationSpec({}, 2.0))
    with pytest.raises(TypeError, match="not CheckpointConfig"):
        decoded.from_model(model, decoded.CheckpointConfig)


def test_an_upcast_event_is_a_struct_and_its_key_is_checked() -> None:
    raw = f.deleted("r", "file:///data/r/a")  # v1, upcast to v2 before validation
    event = decode_event(raw, b"r")
    assert isinstance(event, decoded.DeletionCompleted)
    assert event.data.deleted == [decoded.CompletedPath("file:///data/r/a", None)]
    mismatch = decode_event(raw, b"other")
    assert isinstance(mismatch, Rejection) and mismatch.reason == Reason.KEY_MISMATCH
