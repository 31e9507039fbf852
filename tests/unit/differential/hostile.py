"""Seeded hostile event logs (raw JSON text: tokens no encoder writes, such as NaN, 1e400 and 400-digit ints) for
the compiled-versus-sources differential test (test_compiled_alike.py)."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.unit.corpus.encoding import ROOT

NUMBERS = [
    "0", "-0", "-0.0", "0.0", "1", "2", "2.0", "-3", "1.5", "1E5", "1e-400", "1e308", "-1e308", "5e-324",
    "4.9e-324", "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9007199254740993", "9007199254740992.0",
    str(2**63), str(2**63 - 1), str(-(2**63)), str(-(2**63) - 1), str(2**64), str(2**64 + 1), "1" + "0" * 400,
    "-" + "9" * 300, "123456789012345678901234567890.5",
]  # fmt: skip
OTHERS = ["true", "false", "null", '"5"', '"nan"', '"1e400"', "[1]", '{"x":1}', '""', "[]", "{}", '"\\u00e9"']
SCORES = NUMBERS + OTHERS
RUNS = ["a", "b", "\u00fc", "r/1", "\U0001f600", "a "]
ATTRS = ["null", '"acc"', '"val/acc"', '"loss"', '"a/b/c"', '"\u00e9"', "5", '""']


def _number(rng: random.Random) -> str:
    return rng.choice(SCORES) if rng.random() < 0.7 else str(rng.randint(-5, 50))


def _metrics(rng: random.Random, depth: int = 0) -> str:
    keys = rng.sample(["acc", "loss", "val", "val/acc", "step", "a", "\u00e9", "a/b", "acc"], rng.randint(0, 4))
    if "step" not in keys and rng.random() < 0.5:
        keys.append("step")
    parts = []
    for key in keys:
        nested = depth < 6 and rng.random() < 0.25
        parts.append(f"{json.dumps(key)}:{_metrics(rng, depth + 1) if nested else _number(rng)}")
    return "{" + ",".join(parts) + "}"


def _config(rng: random.Random) -> str:
    fields = [
        f'"num_to_keep":{rng.choice(["1", "2", "3", "null", "0", "-1", "true", "2.0", str(2**64), "1" + "0" * 40])}',
        f'"checkpoint_score_attribute":{rng.choice(ATTRS)}',
        '"checkpoint_score_order":' + rng.choice(['"max"', '"min"', '"max"', '"MAX"', "1"]),
    ]
    if rng.random() < 0.4:
        fields.append(f'"keep_every_n_steps":{rng.choice(["1", "2", "3", str(2**63), str(2**64 + 1), "0", "1.0"])}')
        fields.append('"step_attribute":' + rng.choice(["null", '"step"', '"acc"', '"val/acc"']))
    if rng.random() < 0.3:
        interval = rng.choice(["1", "0.5", "5e-324", "1e308", "60", str(2**64 + 1), "1" + "0" * 400, "NaN", "1e400"])
        fields.append(f'"keep_time_interval_s":{interval}')
    rng.shuffle(fields)
    return "{" + ",".join(fields) + "}"


def _path(rng: random.Random, run: str) -> str:
    return f"{ROOT}/{run}/c{rng.randint(0, 7)}"


def _data(rng: random.Random, kind: str, run: str) -> str:
    path = json.dumps(_path(rng, run))
    if kind == "run_started":
        return f'{{"storage_path":{json.dumps(f"{ROOT}/{run}")},"checkpoint_config":{_config(rng)}}}'
    if kind == "report":
        validation = rng.choice(["false"] * 6 + ["true"] * 3 + ["null", "1", '{"timeout_s":5}', '{"timeout_s":1e400}'])
        return f'{{"metrics":{_metrics(rng)},"checkpoint":{{"path":{path}}},"validation":{validation}}}'
    if kind == "validation_result":
        status = rng.choice(['"VALIDATED"'] * 3 + ['"VALIDATION_FAILED"', '"VALIDATION_TIMEOUT"', "1", '"validated"'])
        return f'{{"checkpoint_path":{path},"status":{status},"metrics":{_metrics(rng)}}}'
    if kind == "worker_group_restart":
        return f'{{"num_workers":{_number(rng)}}}'
    if kind == "run_finished":
        return rng.choice(["{}", '{"keep":"best"}', '{"keep":"all"}', '{"keep":1}'])
    if kind == "deletion_completed":
        eviction = rng.choice(["0", "1", "2", "-1", "true", "1.0", str(2**64), "1e400", "null"])
        return f'{{"deleted":[{{"checkpoint_path":{path},"eviction":{eviction}}}],"refused":[]}}'
    if kind == "root_refused":
        return f'{{"storage_path":{json.dumps(f"{ROOT}/{run}")},"reason":"link"}}'
    return "{}"


KINDS = ["report"] * 40 + ["validation_result"] * 12 + ["run_started"] * 8 + [
    "worker_group_restart", "run_finished", "run_reopened", "run_forgotten", "deletion_completed"
] * 4 + ["root_refused"]  # fmt: skip


def line(rng: random.Random, number: int, ids: list[str]) -> bytes:
    kind, run = rng.choice(KINDS), rng.choice(RUNS)
    event_id = rng.choice(ids) if ids and rng.random() < 0.15 else f"e{number}"
    ids.append(event_id)
    version = 3 if kind == "deletion_completed" else 1
    time = rng.choice(["", f',"time":"2026-01-01T00:{rng.randint(0, 59):02d}:00Z"'] * 9 + [',"time":"bogus"'])
    text = (
        f'{{"specversion":"1.0","id":{json.dumps(event_id)},"source":"s","type":"ckptlog.{kind}.v{version}",'
        f'"subject":{json.dumps(run)}{time},"data":{_data(rng, kind, run)}}}'
    )
    return text.encode() + b"\n"


def log(seed: int, length: int = 80) -> tuple[bytes, dict[str, Any]]:
    """A log of `length` lines and the fold settings (`tests.unit.corpus.generated.fold_settings` arguments)."""
    rng, ids = random.Random(seed), []
    settings = {"keep": rng.choice([None, 1, 2]), "attr": rng.choice([None, "acc", "val/acc"])}
    settings["order"] = rng.choice(["max", "min"])
    settings["dedup_window"] = rng.choice([1, 2, 3, 1000])  # the compiled dedup's eviction
    settings["finished_runs_kept"] = rng.choice([1, 2, 10000])  # retired runs expiring
    settings["max_depth"] = rng.choice([4, 8, 64])
    return b"".join(line(rng, n, ids) for n in range(length)), settings
