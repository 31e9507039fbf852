"""What must hold after every phase of a whole-system stream, each check against the log itself.

The input topic is exported per partition with `ckptlog export --partition P` and folded with
`ckptlog fold` (`--workers 1` and `--workers 2` must print the same); that fold is the model:
its views are what every reader must assemble, its rejections (by line, mapped back to offsets)
what the dead-letter topic must hold, its kept and evicted checkpoints what the tree must show.
Each check returns problems (strings); none raises.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from ckptlog.cli.export import as_line
from ckptlog.client import ids
from ckptlog.events.dead_letters import H_OFFSET, H_PARTITION, H_REASON, H_STAGE, H_TOPIC
from ckptlog.events.rejections import Reason
from ckptlog.events.view import PAGE_KEY_SEPARATOR
from ckptlog.kafka.reader import Record
from ckptlog.processor.core.view import View
from tests.reliability.system_tree import SystemTree, changes, under

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
DLQ_HEADERS = (H_TOPIC, H_PARTITION, H_OFFSET, H_STAGE, H_REASON)


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


@dataclass
class Model:
    """`ckptlog fold` of each partition's export: the views, evictions and expected dead letters."""

    views: dict[str, View] = field(default_factory=dict)  # without `evicted`
    evicted: dict[str, list[str]] = field(default_factory=dict)
    dead: dict[tuple[int, int], str] = field(default_factory=dict)  # (partition, offset) -> reason
    lines: int = 0
    # (partition, run id) of every root_refused fact the log holds: the run_started the processor found
    # behind a symlink has a dead letter of stage `storage` though the fold applied it (contract §9)
    linked: set[tuple[int, str]] = field(default_factory=set)


def exported_lines(records: Sequence[Record], partition: int) -> tuple[list[bytes], list[int], dict[int, str]]:
    """What `ckptlog export --partition P` must write (lines and their offsets), and the records it
    leaves out (tombstones, key mismatches: the processor dead-letters them)."""
    lines, offsets, left_out = [], [], {}
    for record in records:
        if record.partition != partition:
            continue
        tally: Counter[str] = Counter()
        try:
            line = as_line(record, tally)
        except RecursionError:  # too deep to parse: what export must write is the value, as it is
            line = (record.value or b"").replace(b"\r", b" ").replace(b"\n", b" ")
        if line is None:
            left_out[record.offset] = next(iter(tally))
        else:
            lines.append(line)
            offsets.append(record.offset)
    return lines, offsets, left_out


def model_of(
    partition: int,
    document: dict[str, Any],
    offsets: list[int],
    left_out: dict[int, str],
    into: Model,
    lines: Sequence[bytes] = (),
) -> None:
    for run_id, view in document["runs"].items():
        into.evicted[run_id] = view.get("evicted", [])
        into.views[run_id] = {k: v for k, v in view.items() if k != "evicted"}
    for rejected in document["rejected"]:
        into.dead[(partition, offsets[int(rejected["line"]) - 1])] = rejected["reason"]
    for offset, why in left_out.items():
        into.dead[(partition, offset)] = "invalid_envelope" if why == "tombstone" else why
    into.lines += len(offsets)
    for line in lines:
        if b'"ckptlog.root_refused.v1"' in line:
            try:
                into.linked.add((partition, str(json.loads(line)["subject"])))
            except (ValueError, KeyError, TypeError):
                continue


def check_export(exported: bytes, lines: list[bytes], partition: int) -> list[str]:
    got = exported.split(b"\n")
    if got and got[-1] == b"":
        got.pop()
    if got == lines:
        return []
    first = next((i for i, (a, b) in enumerate(zip(got, lines, strict=False)) if a != b), min(len(got), len(lines)))
    return [
        f"`ckptlog export --partition {partition}` wrote {len(got)} lines, the topic holds {len(lines)}; "
        f"first difference at line {first + 1}"
    ]


def fold_difference(one: bytes, two: bytes) -> str:
    """Which runs (and rejected lines) two `ckptlog fold` documents disagree on."""
    try:
        a, b = json.loads(one), json.loads(two)
    except ValueError:
        return "one of them is not JSON"
    runs = sorted(r for r in a["runs"].keys() | b["runs"].keys() if not same(a["runs"].get(r), b["runs"].get(r)))
    lines = sorted({r["line"] for r in a["rejected"]} ^ {r["line"] for r in b["rejected"]})
    return f"runs {runs[:5]}, rejected lines {lines[:8]}" if runs or lines else "the same documents, other bytes"


def check_dead_letters(dlq: Sequence[Record], model: Model, input_topic: str) -> list[str]:
    """Every input record folded or dead-lettered, once, with the fold's reason."""
    problems, seen = [], Counter[tuple[int, int]]()
    reasons: dict[tuple[int, int], str] = {}
    linked: set[tuple[int, int]] = set()  # a run_started found behind a link: applied by the fold, told by the shell
    for record in dlq:
        headers = {k: v.decode(errors="replace") for k, v in record.headers}
        if headers.get(H_TOPIC) != input_topic:
            continue
        where = (int(headers[H_PARTITION]), int(headers[H_OFFSET]))
        seen[where] += 1
        reasons[where] = headers.get(H_REASON, "")
        run = (record.key or b"").decode(errors="replace")
        storage = headers.get(H_STAGE) == "storage" and reasons[where] == Reason.ROOT_BEHIND_SYMLINK
        if storage and (where[0], run) in model.linked and where not in model.dead:
            linked.add(where)
    missing = sorted(set(model.dead) - set(seen))
    extra = sorted(set(seen) - set(model.dead) - linked)
    twice = sorted(k for k, n in seen.items() if n > 1)
    differ = sorted(k for k in set(seen) & set(model.dead) if reasons[k] != model.dead[k])
    if missing:
        problems.append(f"{len(missing)} records the fold rejects have no dead letter: {_show(missing, model.dead)}")
    if extra:
        problems.append(f"{len(extra)} dead letters of records the fold applies or skips: {_show(extra, reasons)}")
    if twice:
        problems.append(f"{len(twice)} records dead-lettered more than once: {twice[:5]}")
    if differ:
        problems.append(
            f"dead-letter reasons differ from the fold's: {[(k, reasons[k], model.dead[k]) for k in differ[:5]]}"
        )
    return problems


def _show(keys: list[tuple[int, int]], reasons: dict[tuple[int, int], str]) -> str:
    return ", ".join(f"p{p}@{o} ({reasons.get((p, o), '?')})" for p, o in keys[:6])


def unanswered(validations: Sequence[Record], inputs: Sequence[Record]) -> list[str]:
    """The validation requests with no result event on the input topic."""
    ids_seen = set()
    for record in inputs:
        try:
            ids_seen.add(json.loads(record.value or b"")["id"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
            continue
    missing = []
    for record in validations:
        body = json.loads(record.value or b"")
        requested = body.get("type") == "ckptlog.validation_requested.v1"
        if requested and ids.validation_result_id(body["subject"], body["id"]) not in ids_seen:
            missing.append(f"{body['subject']}:{body['data']['checkpoint_path']} {body['data']['fn_kwargs']}")
    return missing


def check_views(source: str, views: dict[str, Any], model: Model, finished: Set[str] = frozenset()) -> list[str]:
    """`views` (run id -> VIEW) equal the fold's, run by run; a run in `finished` that the fold no
    longer holds (retired, contract §3) shows its final VIEW, marked finished."""
    gone = {r for r in finished - model.views.keys() if (views.get(r) or {}).get("finished") is True}
    differ = sorted(r for r in model.views.keys() | views.keys() - gone if not same(views.get(r), model.views.get(r)))
    if not differ:
        return []
    details = [_view_difference(r, views.get(r), model.views.get(r)) for r in differ[:4]]
    return [f"{source}: {len(differ)} runs' views differ from `ckptlog fold`: " + "; ".join(details)]


def _view_difference(run_id: str, got: Any, want: Any) -> str:
    if got is None or want is None:
        return f"{run_id} {'missing' if got is None else 'not in the fold'}"
    keys = [k for k in want.keys() | got.keys() if not same(got.get(k), want.get(k))]
    kept = f"kept {len(got.get('checkpoints', []))} vs fold {len(want.get('checkpoints', []))}"
    return f"{run_id} differs in {sorted(keys)} ({kept})"


def check_tree(tree: SystemTree, before: dict[str, str], model: Model, deleted_now: set[str]) -> list[str]:
    """Kept, latest, pending and preserved checkpoints intact; settled evictions gone; nothing else
    changed but the files below checkpoints their own run wrote and evicted."""
    problems = []
    kept = {c["path"] for v in model.views.values() for c in v["checkpoints"]}
    kept |= {v["latest"] for v in model.views.values() if v["latest"]}
    damaged = sorted(p for p in kept if not tree.intact(p))
    if damaged:
        shown = [f"{p} ({_keepers(p, model)}{_evicters(p, model)})" for p in damaged[:5]]
        problems.append(f"{len(damaged)} kept/latest/pending checkpoints deleted or damaged: {shown}")
    remaining = sorted(p for p in deleted_now - kept if not tree.gone(p))
    if remaining:
        problems.append(
            f"{len(remaining)} checkpoints reported deleted (checkpoints_deleted) still exist: {remaining[:5]}"
        )
    own = {p for run_id, paths in model.evicted.items() for p in paths if tree.written.get(p) == run_id}
    changed = changes(before, tree.snapshot(), own, str(tree.storage))
    if changed:
        shown = [f"{c}{_evicters(c.split(': ')[0], model)}" for c in changed[:6]]
        problems.append(f"{len(changed)} files changed that no eviction of their own run covers: {shown}")
    return problems


def _keepers(path: str, model: Model) -> str:
    return "kept by " + ",".join(r for r, v in model.views.items() if any(c["path"] == path for c in v["checkpoints"]))


def _evicters(path: str, model: Model) -> str:
    """Which runs evicted this path or a directory above it (the likely deleters)."""
    found = sorted({f"{r} evicted {p}" for r, paths in model.evicted.items() for p in paths if under(path, {p})})
    return f"; {', '.join(found[:2])}" if found else ""


def _validator(name: str) -> Any:
    schema = json.loads((SCHEMAS / name).read_text())
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def check_schemas(outputs: Mapping[str, Sequence[Record]], state: Sequence[Record], dlq: Sequence[Record]) -> list[str]:
    """Every output record validates against schemas/; every dead letter has its headers."""
    event, view, page = (
        _validator("output-event.schema.json"),
        _validator("view.schema.json"),
        _validator("view_page.schema.json"),
    )
    bad: list[str] = []
    for topic, records in outputs.items():
        bad += [f"{topic}@{r.partition}:{r.offset}: {e}" for r in records for e in _errors(event, r.value)]
    for r in state:  # a head's tombstone: a run refused for a link to its root (contract §9) or forgotten
        paged = r.key is not None and PAGE_KEY_SEPARATOR.encode() in r.key
        if r.value is not None:
            bad += [f"state@{r.partition}:{r.offset}: {e}" for e in _errors(page if paged else view, r.value)]
    reasons = {str(reason) for reason in Reason}
    for r in dlq:
        headers = {k: v.decode(errors="replace") for k, v in r.headers}
        lacking = [h for h in DLQ_HEADERS if h not in headers]
        if lacking or headers.get(H_REASON) not in reasons:
            bad.append(f"dlq@{r.partition}:{r.offset}: headers {lacking or headers.get(H_REASON)}")
    return [f"{len(bad)} output records do not validate: {bad[:4]}"] if bad else []


def _errors(validator: Any, value: bytes | None) -> list[str]:
    try:
        body = json.loads(value or b"")
    except (ValueError, RecursionError) as exc:
        return [f"not JSON ({exc})"]
    return [str(e.message)[:200] for e in validator.iter_errors(body)][:1]


def check_inspect(out: bytes, model: Model, dlq_count: int, finished: Set[str] = frozenset()) -> list[str]:
    try:
        document = json.loads(out)
    except ValueError as exc:
        return [f"`ckptlog inspect --json` printed no JSON: {exc}"]
    problems = check_views("ckptlog inspect --json", document.get("runs", {}), model, finished)
    counted = sum(document.get("rejections", {}).values())
    if counted > dlq_count:
        problems.append(f"`ckptlog inspect --json` counts {counted} rejections, the DLQ holds {dlq_count}")
    return problems


def check_rejections(out: bytes, dlq_count: int) -> list[str]:
    lines = [line for line in out.split(b"\n") if line.strip()]
    try:
        parsed = [json.loads(line) for line in lines]
    except ValueError as exc:
        return [f"`ckptlog rejections --json` printed a line that is not JSON: {exc}"]
    if len(parsed) != dlq_count:
        return [f"`ckptlog rejections --json` listed {len(parsed)} dead letters, the DLQ holds {dlq_count}"]
    return []


def deleted_by_outputs(records: Sequence[Record], after: dict[int, int]) -> tuple[set[str], dict[str, list[str]]]:
    """Paths in `checkpoints_deleted` outputs past `after` (per partition), and all of them per run."""
    new, per_run = set(), dict[str, list[str]]()
    for record in records:
        body = json.loads(record.value or b"")
        if body.get("type") != "ckptlog.checkpoints_deleted.v1":
            continue
        per_run.setdefault(body["subject"], []).extend(body["data"]["checkpoint_paths"])
        if record.offset >= after.get(record.partition, 0):
            new.update(body["data"]["checkpoint_paths"])
    return new, per_run


def check_reopened(records: Sequence[Record], reopened: Set[str]) -> list[str]:
    """No deletion of a reopened run is refused by a finished run's retired claim naming the run
    itself (contract §3 "Reopened runs": the processor removes it once the reopen committed)."""
    barred = []
    for record in records:
        body = json.loads(record.value or b"")
        data = body.get("data") or {}
        if body.get("type") != "ckptlog.warning.v1" or data.get("code") != "deletion_refused":
            continue
        run = body.get("subject")
        if run in reopened and f"run {run!r} (" in data.get("message", "") and "(finished)" in data["message"]:
            barred.append(f"{run}: {data.get('checkpoint_path')}")
    if not barred:
        return []
    return [f"{len(barred)} evictions of reopened runs refused by their own retired claim: {barred[:4]}"]


def alive(processes: Sequence[tuple[str, Any]]) -> list[str]:
    return [f"{what} exited {p.proc.poll()}; see {p.log}" for what, p in processes if p.proc.poll() is not None]


def tracebacks(logs: Sequence[Path]) -> list[str]:
    found = []
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        for needle in ("Traceback", "event=fatal", "event=fold_failed", "Task exception was never retrieved"):
            if needle in text:
                found.append(f"{log.name} logged {needle!r}")
    return found


def env_list(name: str) -> set[str]:
    return {item.strip() for item in os.environ.get(name, "").split(",") if item.strip()}
