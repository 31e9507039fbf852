"""Generate JSON Schema for every event, the run view and the snapshot, plus an AsyncAPI document.

`python -m ckptlog.events.schema` rewrites `schemas/`; `python -m ckptlog.events.schema --check` exits 1
when the committed files differ from what the code generates (CI runs it via a test).

`input-event.schema.json` is the one file a producer in another language needs: every input
event as one union on `type` (JSON Schema 2020-12), accepting the events the processor accepts
(docs/schemas.md lists the few differences a schema cannot express). `output-event.schema.json`
is the same for every output event, envelope included.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ckptlog.events.codec import INPUT_ADAPTER
from ckptlog.events.decoded import INPUT_KINDS
from ckptlog.events.outputs import OUTPUT_KINDS, OutputEnvelope, Topic
from ckptlog.events.view import RunView, ViewPage

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
INPUTS: dict[str, type[BaseModel]] = {kind.name: kind.model for kind in INPUT_KINDS}
"""Input event name -> its envelope model, from the input table (ckptlog/events/decoded.py)."""
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_TABLE_CHANGE = {
    "type": "object",
    "required": ["drop", "put"],
    "properties": {
        "drop": {"type": "array", "items": {"type": "string"}, "description": "Ids popped first."},
        "put": {"type": "object", "description": "Then these entries set, in order (as the base writes them)."},
    },
}
_SNAPSHOT_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["processor_version", "topic", "partition", "next_offset", "settings", "runs", "refused"],
    "properties": {
        "processor_version": {"type": "string"},
        "topic": {"type": "string"},
        "partition": {"type": "integer"},
        "next_offset": {"type": "integer"},
        "settings": {"type": "object"},
        "runs": {"type": "object"},
        "refused": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Run id -> why its run_started was refused.",
        },
        "finished": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Schema 4: run id -> root of each finished run that left the hot state.",
        },
        "symlinked": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Schema 6: run id -> root of each run refused because its root is reached through a "
            "symlink.",
        },
        "retired": {
            "type": "object",
            "additionalProperties": {"type": "object"},
            "description": "Schema 6: run id -> the state (as in `runs`; its `dedup` without foreign ids from "
            "schema 7, an empty `seen` in 6) of each finished run of `finished` that may be reopened.",
        },
    },
}
_LINK = {
    "type": "object",
    "required": ["next_offset", "sha256"],
    "properties": {"next_offset": {"type": "integer"}, "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
}
_DELTA_TABLES = ("runs", "refused", "finished", "symlinked", "retired")
_DELTA_HEAD = ("processor_version", "topic", "partition", "next_offset", "base", "previous", "sequence", "settings")
_DELTA_BODY: dict[str, Any] = {
    "type": "object",
    "required": [*_DELTA_HEAD, *_DELTA_TABLES],
    "properties": {
        **{name: _SNAPSHOT_BODY["properties"][name] for name in ("processor_version", "topic", "partition")},
        "next_offset": {"type": "integer"},
        "base": {**_LINK, "description": "The chain's base: its next_offset and the SHA-256 of its bytes."},
        "previous": {**_LINK, "description": "The object this delta follows (the base, or the delta before)."},
        "sequence": {"type": "integer", "minimum": 1, "description": "This delta's number on its base."},
        "settings": {"type": "object", "description": "The chain's fold settings (its base's)."},
        **dict.fromkeys(_DELTA_TABLES, _TABLE_CHANGE),
    },
}
SNAPSHOT_SCHEMA: dict[str, Any] = {
    "title": "Snapshot",
    "description": "A base (format ckptlog.snapshot: the whole state) or a delta on the previous object of its "
    "chain (format ckptlog.snapshot.delta, contract §6). Canonical JSON (keys in the order written, which is "
    "data; no whitespace); checksum = sha256 of the body (`snapshot` or `delta`) as written. Versions 1 and 2 "
    "(older fold rules) are refused: rebuild them with `ckptlog replay`.",
    "oneOf": [{"$ref": "#/$defs/base"}, {"$ref": "#/$defs/delta"}],
    "$defs": {
        "base": {
            "type": "object",
            "required": ["format", "schema_version", "checksum", "snapshot"],
            "properties": {
                "format": {"const": "ckptlog.snapshot"},
                "schema_version": {
                    "enum": [3, 4, 5, 6, 7],
                    "description": "7 is written; 3 (no finished runs), 4 (no bound on them), 5 (no state of "
                    "retired runs) and 6 (each run's dedup window as the list `seen`) are read",
                },
                "checksum": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "snapshot": _SNAPSHOT_BODY,
            },
        },
        "delta": {
            "type": "object",
            "required": ["format", "schema_version", "checksum", "delta"],
            "properties": {
                "format": {"const": "ckptlog.snapshot.delta"},
                "schema_version": {"enum": [6, 7], "description": "Its base's: deltas exist from schema 6 on."},
                "checksum": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "delta": _DELTA_BODY,
            },
        },
    },
}


def documents() -> dict[str, Any]:
    """File name -> JSON document, in a stable order."""
    docs: dict[str, Any] = {}
    for kind in INPUT_KINDS:
        docs[input_file(kind.name, kind.version)] = kind.model.model_json_schema()
    for out in OUTPUT_KINDS:
        docs[output_file(out.name, out.version)] = {"title": f"{out.type} data", **out.model.model_json_schema()}
    docs["output/envelope.json"] = OutputEnvelope.model_json_schema()
    docs["view.schema.json"] = RunView.model_json_schema()
    docs["view_page.schema.json"] = ViewPage.model_json_schema()
    docs["snapshot.json"] = SNAPSHOT_SCHEMA
    docs["asyncapi.json"] = asyncapi()
    docs["input-event.schema.json"] = input_event_schema()
    docs["output-event.schema.json"] = output_event_schema()
    return docs


def input_file(name: str, version: int) -> str:
    """Where an input kind's schema is published."""
    return f"input/{name}.v{version}.json"


def output_file(name: str, version: int) -> str:
    """Where an output kind's `data` schema is published."""
    return f"output/{name}.v{version}.json"


def input_event_schema() -> dict[str, Any]:
    """Every input event this build reads, one union on `type` (the codec's own TypeAdapter)."""
    schema = INPUT_ADAPTER.json_schema()
    return {
        "$schema": DIALECT,
        "title": "ckptlog input event",
        "description": "A CloudEvents 1.0 structured-mode event on the input topic (key = run id = subject).",
        **schema,
    }


def output_event_schema() -> dict[str, Any]:
    """Every output event: the envelope with `type` fixed and `data` of that type, one union on `type`."""
    envelope = OutputEnvelope.model_json_schema()
    defs: dict[str, Any] = {}
    variants = []
    for out in OUTPUT_KINDS:
        model = out.model
        data = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(data.pop("$defs", {}))
        defs[model.__name__] = data
        event = {
            **envelope,
            "title": out.type,
            "properties": {
                **envelope["properties"],
                "type": {"const": out.type, "type": "string"},
                "data": {"$ref": f"#/$defs/{model.__name__}"},
            },
        }
        event.pop("description", None)
        defs[f"{model.__name__}Event"] = event
        variants.append({"$ref": f"#/$defs/{model.__name__}Event"})
    return {
        "$schema": DIALECT,
        "title": "ckptlog output event",
        "description": "An event on the checkpoints, validations or watermarks topic; `id` is "
        "ckptlog:{topic}:{partition}:{offset}:{sequence} of the input record that caused it.",
        "oneOf": variants,
        "$defs": dict(sorted(defs.items())),
    }


def _ref(path: str) -> dict[str, str]:
    return {"$ref": f"./{path}"}


def _messages(topic: Topic) -> dict[str, Any]:
    """The output kinds routed to `topic`, by the output table."""
    return {
        out.name: {"payload": _ref(output_file(out.name, out.version))} for out in OUTPUT_KINDS if out.topic == topic
    }


def asyncapi() -> dict[str, Any]:
    """Topics and their messages: the input kinds on the input topic, each output kind on its topic."""
    ref = _ref
    channels = {
        "ckptlog.events": {
            "description": "Input log; key = run id.",
            "messages": {k.name: {"payload": ref(input_file(k.name, k.version))} for k in INPUT_KINDS},
        },
        "ckptlog.checkpoints": {
            "description": "Checkpoint events; key = run id.",
            "messages": _messages("checkpoints"),
        },
        "ckptlog.validations": {"description": "Evaluators' work queue.", "messages": _messages("validations")},
        "ckptlog.watermarks": {
            "description": "Committed/validated watermarks; key = run id. One per run per transaction (per "
            "batch under at_least_once): the run's values after the batch's last change to it, with that "
            "input record's output id (contract §4, §5). Since info.version 2; before, one per event.",
            "messages": _messages("watermarks"),
        },
        "ckptlog.state": {
            "description": "Compacted. Key = run id: the run VIEW (for a run keeping many checkpoints, a head "
            "with `pages` and no checkpoints). Key = run id, \\x1f, 'page', \\x1f, page, \\x1f, part: one part "
            "of a page of that run's kept checkpoints, on the head's partition; readers assemble them.",
            "messages": {
                "view": {"payload": ref("view.schema.json")},
                "view_page": {"payload": ref("view_page.schema.json")},
            },
        },
        "ckptlog.dlq": {
            "description": "Rejected input: original bytes; reason, message and source "
            "topic/partition/offset in headers.",
            "messages": {"rejected": {}},
        },
    }
    return {"asyncapi": "3.0.0", "info": {"title": "ckptlog", "version": "2"}, "channels": channels}


def render(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if schemas/ is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, doc in documents().items():
        path = SCHEMAS / name
        text = render(doc)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"schemas out of date: {', '.join(stale)}; run `python -m ckptlog.events.schema`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
