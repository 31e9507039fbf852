"""A mutation fuzzer for the input path: bytes -> decode -> fold (contract §8: never a crash).

Seeds are the hand-written corpus logs (every decode path and fold rule), the benchmark's
workload and a few factory events; each input is a seed mutated 1-4 times (byte flips,
insertions of JSON tokens and hostile values, deletions, duplications, splices with another
seed, truncations, numbers swapped for huge ones). Every input must be decoded into an event
or a rejection, and every event folded, without an exception escaping. Seeded, so a failure
is reproducible from its seed and index.

    python -m tests.reliability.fuzz --inputs 1000000 [--seed 1]

prints the count of inputs run, applied, rejected at decode and rejected by the fold; the
quick version runs in CI (tests/reliability/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.workload import events as bench_events
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.state import FoldSettings
from tests import factories as f
from tests.unit.corpus.golden import logs

TOKENS = [
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\x00",
    b"\xff",
    b"\xc3\x28",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"-0",
    b"123456789012345678901234567890",
    b"1.7976931348623157e309",
    b"null",
    b"true",
    b'"::"',
    b'"../x"',
    b'"%2e%2e"',
    b'"file:///"',
    b'"s3://b"',
    b'"type":"ckptlog.report.v1"',
    b'"type":"ckptlog.run_started.v1"',
    b'"type":"ckptlog.validation_result.v1"',
    b'"type":"ckptlog.worker_group_restart.v1"',
    b'"type":"ckptlog.deletion_completed.v2"',
    b'"generation":99',
    b'"validation":true',
    b'"validation":{"fn_kwargs":{},"timeout_s":0}',
    b'"num_to_keep":0',
    b'"checkpoint":null',
    b'"metrics":{"a":{"b":{"c":[[[[[[[[[[1]]]]]]]]]]}}}',
]
NUMBERS = [b"0", b"1", b"-1", b"9007199254740993", b"1e308", b"-1e308", b"99999999999999999999999", b"0.5"]


def seeds() -> list[bytes]:
    """Lines of the corpus logs, the benchmark workload and factory events, deduplicated."""
    lines: set[bytes] = set()
    for case in logs().values():
        lines.update(line for line in case.content.splitlines()[:400] if line.strip())
    lines.update(bench_events(reports=50, keep=2, validation_share=0.3))
    lines.update(
        [
            f.started("r", root="file:///data/r", keep=2, attr="acc"),
            f.report("r", {"acc": 0.5}, "file:///data/r/c1", validation=True),
            f.result("r", "file:///data/r/c1", "VALIDATED", {"acc": 0.9}),
            f.restart("r", num_workers=2),
        ]
    )
    return sorted(line.rstrip(b"\n") for line in lines)


VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**53 + 1,
    10**400,
    -(10**400),
    1e308,
    float("nan"),
    float("inf"),
    "",
    "::",
    "file:///data/r/../x",
    "file:///data/r/a::memory",
    "file:///data/r/x",
    "file:///data/r/x/y",
    "data/r/rel",
    "/",
    "s3://bucket",
    "file:///data/r/%2e%2e",
    "\u0000",
    [],
    {},
    {"fn_kwargs": {}, "timeout_s": 1},
    {"path": "file:///data/r/c9"},
    {"a": {"b": 1}, "a/b": 2},
    "VALIDATED",
    "ckptlog.report.v1",
    "ckptlog.worker_group_restart.v1",
]


def mutate_json(rng: random.Random, body: Any) -> Any:
    """Replace, drop or add one value somewhere in a parsed event: valid JSON, odd meaning."""
    node, key = body, None
    while isinstance(node, dict | list) and node and rng.random() < 0.7:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        if not isinstance(node[key], dict | list) or not node[key]:
            break
        node = node[key]
    if isinstance(node, dict):
        op = rng.randrange(3)
        if op == 0 and node:
            del node[rng.choice(list(node))]
        elif op == 1 and node:
            node[rng.choice(list(node))] = copy.deepcopy(rng.choice(VALUES))
        else:
            node[rng.choice(["generation", "validation", "checkpoint", "x", "reason", "error"])] = copy.deepcopy(
                rng.choice(VALUES)
            )
    elif isinstance(node, list) and node:
        node[rng.randrange(len(node))] = copy.deepcopy(rng.choice(VALUES))
    return body


def mutate(rng: random.Random, seed: bytes, pool: list[bytes]) -> bytes:
    """A seed as it is (a tenth: the state moves on), mutated as JSON (two fifths, mostly inside
    `data`) or as bytes."""
    choice = rng.random()
    if choice < 0.1:
        return seed
    if choice < 0.5:
        try:
            body = json.loads(seed)
        except ValueError:
            body = None
        if isinstance(body, dict):
            target = body["data"] if isinstance(body.get("data"), dict) and rng.random() < 0.8 else body
            for _ in range(rng.randint(1, 3)):
                mutate_json(rng, target)
            return json.dumps(body).encode()
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(data))
        op = rng.randrange(8)
        if op == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[at:at] = rng.choice(TOKENS)
        elif op == 2:
            del data[at : at + rng.randint(1, 16)]
        elif op == 3:
            end = min(len(data), at + rng.randint(1, 64))
            data[end:end] = data[at:end]
        elif op == 4:
            other = rng.choice(pool)
            cut = rng.randint(0, len(other))
            data[at:] = other[cut:]
        elif op == 5:
            del data[at:]
        elif op == 6:
            digit = next((i for i in range(at, len(data)) if 0x30 <= data[i] <= 0x39), None)
            if digit is not None:
                data[digit : digit + 1] = rng.choice(NUMBERS)
        else:
            data[at:at] = rng.choice(pool)[: rng.randint(0, 80)]
    return bytes(data)


@dataclass
class Tally:
    inputs: int = 0
    applied: int = 0
    rejected_decode: int = 0
    rejected_fold: int = 0
    failures: list[str] = field(default_factory=list)


def fold_one(fold: Fold, raw: bytes, key: bytes | None) -> str:
    """What the input path does with one record: 'applied', 'decode' or 'fold' (rejected)."""
    event = decode_event(raw, key)
    if isinstance(event, Rejection):
        return "decode"
    effects = fold.apply(event)
    return "fold" if effects.rejection is not None else "applied"


def run(inputs: int, seed: int = 1, step: Callable[[Fold, bytes, bytes | None], str] = fold_one) -> Tally:
    """Fuzz `inputs` inputs through `step` over one long-lived fold (state accumulates, as in
    the processor); exceptions are collected, not raised."""
    rng = random.Random(seed)
    pool = seeds()
    tally = Tally()
    fold = Fold(FoldSettings(default_root="file:///data"))
    for index in range(inputs):
        raw = mutate(rng, rng.choice(pool), pool)
        key = rng.choice([None, None, b"r", raw[:8]])
        tally.inputs += 1
        try:
            outcome = step(fold, raw, key)
        except Exception:  # the very thing this fuzzer looks for
            tally.failures.append(f"seed {seed} input {index}: {raw!r}\n{traceback.format_exc()}")
            if len(tally.failures) >= 20:
                break
            continue
        tally.applied += outcome == "applied"
        tally.rejected_decode += outcome == "decode"
        tally.rejected_fold += outcome == "fold"
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    tally = run(args.inputs, args.seed)
    seconds = time.perf_counter() - started
    print(
        f"decoder fuzz, seed {args.seed}: {tally.inputs:,} inputs in {seconds:.0f} s; applied {tally.applied:,}, "
        f"rejected at decode {tally.rejected_decode:,}, rejected by the fold {tally.rejected_fold:,}; "
        f"exceptions {len(tally.failures)}"
    )
    for failure in tally.failures[:3]:
        print(failure, file=sys.stderr)
    sys.exit(1 if tally.failures else 0)


if __name__ == "__main__":
    main()
