"""`ckptlog fold --override-*` (issue 38 item 8): the README promised "what-if: fold it with other
settings", but --default-num-to-keep and --score-* reach only runs without run_started. The
overrides apply to every run, and never delete."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ckptlog.cli.main import _register, app
from ckptlog.processor.whatif import Override
from tests import factories as f

_register()
ROOT = "file:///data"


def _log(tmp_path: Path) -> Path:
    lines = [f.started("s", root=f"{ROOT}/s", keep=1, attr="acc", order="max")]
    for i, (acc, loss) in enumerate([(0.9, 0.5), (0.5, 0.1), (0.7, 0.3)]):
        lines.append(f.report("s", metrics={"acc": acc, "loss": loss}, path=f"{ROOT}/s/c{i}"))
        lines.append(f.report("implicit", metrics={"acc": acc, "loss": loss}, path=f"{ROOT}/implicit/c{i}"))
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    return log


def _kept(tmp_path: Path, *args: str) -> dict[str, list[str]]:
    result = CliRunner().invoke(app, ["fold", str(_log(tmp_path)), "--storage-root", ROOT, *args])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)["runs"]
    return {run: sorted(c["path"].rsplit("/", 1)[1] for c in view["checkpoints"]) for run, view in runs.items()}


def test_without_overrides_the_run_keeps_its_own_retention(tmp_path: Path) -> None:
    kept = _kept(tmp_path)
    assert kept["s"] == ["c0", "c2"]  # keep 1 by acc (c0) and the latest (c2)
    assert kept["implicit"] == ["c0", "c1", "c2"]  # no run_started, no defaults: every one


def test_overrides_reach_runs_that_sent_run_started_and_those_that_did_not(tmp_path: Path) -> None:
    kept = _kept(tmp_path, "--override-num-to-keep", "1", "--override-score-attribute", "loss")
    kept_min = _kept(tmp_path, "--override-num-to-keep", "1", "--override-score-attribute", "loss",
                     "--override-score-order", "min")  # fmt: skip
    assert kept == {"s": ["c0", "c2"], "implicit": ["c0", "c2"]}  # max loss: c0, plus the latest
    assert kept_min == {"s": ["c1", "c2"], "implicit": ["c1", "c2"]}  # min loss: c1
    assert _kept(tmp_path, "--override-num-to-keep", "3")["s"] == ["c0", "c1", "c2"]  # run_started said 1


def test_an_override_never_deletes(tmp_path: Path) -> None:
    argv = ["fold", str(_log(tmp_path)), "--storage-root", ROOT, "--apply", "--override-num-to-keep", "1"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "deletes nothing" in result.stderr


def test_the_rewrite_keeps_the_line_but_the_config_and_leaves_other_lines_alone() -> None:
    started = f.started("s", root=f"{ROOT}/s", keep=1, attr="acc")
    rewritten = json.loads(Override(num_to_keep=4).line(started))
    original = json.loads(started)
    assert rewritten["data"]["checkpoint_config"] == {**original["data"]["checkpoint_config"], "num_to_keep": 4}
    assert {k: v for k, v in rewritten.items() if k != "data"} == {k: v for k, v in original.items() if k != "data"}
    report = f.report("s", metrics={"note": "ckptlog.run_started.v1"}, path=f"{ROOT}/s/c0")
    assert Override(num_to_keep=4).line(report) == report and Override(num_to_keep=4).line(b"not json") == b"not json"
