"""`ckptlog fold`: the public VIEW document, rejections with line numbers, --apply."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptlog.cli.main import _register, app
from tests import factories as f

_register()
runner = CliRunner()


def fold(tmp_path: Path, lines: list[bytes], *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    result = runner.invoke(app, ["fold", str(log), *args])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def test_document_shape_and_rejections(tmp_path: Path) -> None:
    root = "file:///data/r"
    code, doc = fold(
        tmp_path,
        [
            f.started(root=root, keep=1, attr="acc"),
            f.report(metrics={"acc": 1}, path=f"{root}/a"),
            b"not json",
            f.report(metrics={"acc": math.nan}, path=f"{root}/b"),
            f.report(metrics={"acc": 3}, path=f"{root}/c"),
            f.report(path="file:///etc/passwd"),
        ],
    )
    assert code == 0
    view = doc["runs"]["r"]
    assert set(view) == {
        "checkpoints",
        "latest",
        "best",
        "committed",
        "validated",
        "generation",
        "index_in_generation",
        "checkpoint_config",
        "evicted",
    }
    assert view["checkpoint_config"] == {
        "num_to_keep": 1,
        "checkpoint_score_attribute": "acc",
        "checkpoint_score_order": "max",
    }
    assert [c["path"] for c in view["checkpoints"]] == [f"{root}/c"]
    assert set(view["checkpoints"][0]) == {"path", "metrics", "status", "report_index"}
    assert view["evicted"] == [f"{root}/b", f"{root}/a"]  # b (NaN) ranks below a; both leave when c lands
    assert view["latest"] == view["best"] == f"{root}/c"
    assert [(r["line"], r["reason"]) for r in doc["rejected"]] == [(3, "invalid_json"), (6, "path_outside_root")]


def test_defaults_flags_apply_to_runs_without_run_started(tmp_path: Path) -> None:
    root = (tmp_path / "store").as_uri()
    code, doc = fold(
        tmp_path,
        [f.report(metrics={"loss": x}, path=f"{root}/r/c{x}") for x in (3, 1, 2)],
        "--default-num-to-keep",
        "1",
        "--score-attribute",
        "loss",
        "--score-order",
        "min",
        "--storage-root",
        root,
    )
    assert code == 0
    assert [c["path"] for c in doc["runs"]["r"]["checkpoints"]] == [f"{root}/r/c2", f"{root}/r/c1"]


def test_invalid_flag_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["fold", "-", "--default-num-to-keep", "0"], input="")
    assert (
        result.exit_code == 2
        and "--default-num-to-keep" in result.output
        and "greater than or equal to 1" in result.output
    )
    empty = runner.invoke(app, ["fold", "-", "--score-attribute", ""], input="")
    assert empty.exit_code == 2 and "--score-attribute" in empty.output and "at least 1 character" in empty.output


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["fold", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "no such file" in result.output


def test_dry_run_deletes_nothing_apply_deletes_only_evicted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    names = ["a", "b", "c"]
    for name in names:
        (store / "r" / name).mkdir(parents=True)
        (store / "r" / name / "model.bin").write_bytes(b"w")
    root = (store / "r").as_uri()
    lines = [f.started(root=root, keep=1), *[f.report(path=f"{root}/{n}") for n in names]]
    code, _ = fold(tmp_path, lines)
    assert code == 0 and all((store / "r" / n).exists() for n in names)
    code, doc = fold(tmp_path, lines, "--apply", "--storage-root", store.as_uri())
    assert code == 0, doc
    assert not (store / "r" / "a").exists() and not (store / "r" / "b").exists()
    assert (store / "r" / "c" / "model.bin").exists()


def test_apply_needs_an_outer_bound(tmp_path: Path) -> None:
    root = (tmp_path / "r").as_uri()
    (tmp_path / "r" / "a").mkdir(parents=True)
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join([f.started(root=root, keep=1), f.report(path=f"{root}/a"), f.report(path=f"{root}/b")]))
    result = runner.invoke(app, ["fold", str(log), "--apply"])
    assert result.exit_code == 2 and "--apply deletes from storage, so it needs --storage-root" in result.stderr
    assert (tmp_path / "r" / "a").is_dir()


def test_apply_deletes_only_what_the_final_state_owes(tmp_path: Path) -> None:
    """A path evicted, deleted, reported again and kept at the end of the log is live: --apply once
    deleted every eviction in the file's history, this one included."""
    store = tmp_path / "store"
    for name in ("A", "B"):
        (store / "r" / name).mkdir(parents=True)
        (store / "r" / name / "model.bin").write_bytes(b"w")
    root = (store / "r").as_uri()
    lines = [
        f.started(root=root, keep=1, attr="acc"),
        f.report(metrics={"acc": 0.1}, path=f"{root}/A"),
        f.report(metrics={"acc": 0.5}, path=f"{root}/B"),  # evicts A (eviction 0)
        f.settled("r", deleted=[(f"{root}/A", 0)]),  # A deleted: the name is free again
        f.report(metrics={"acc": 0.9}, path=f"{root}/A"),  # A again, best and latest: evicts B
    ]
    code, doc = fold(tmp_path, lines, "--apply", "--storage-root", store.as_uri())
    assert code == 0, doc
    assert doc["runs"]["r"]["evicted"] == [f"{root}/A", f"{root}/B"]  # the history, as ever
    assert (store / "r" / "A" / "model.bin").exists(), "the kept, latest A was deleted"
    assert not (store / "r" / "B").exists()


def test_progress_goes_to_stderr_and_leaves_the_document_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptlog.processor import foldfile

    monkeypatch.setattr(foldfile, "GC_FREEZE_MASK", 1)  # report every 2 lines instead of every 64k
    root = "file:///data/r"
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join([f.started(root=root, keep=1)] + [f.report(path=f"{root}/c{i}") for i in range(6)]))
    quiet = runner.invoke(app, ["fold", str(log), "--no-progress"])
    for workers in ("1", "2"):
        shown = runner.invoke(app, ["fold", str(log), "--progress", "--workers", workers])
        assert shown.exit_code == 0 and shown.stdout == quiet.stdout
        if workers == "1":  # (a forked worker writes to the real stderr, which the runner does not capture)
            assert "ckptlog fold: 6 lines read (" in shown.stderr and "every line read" in shown.stderr
    assert "lines read" not in quiet.stderr


ATTACKS = ["implicit takes another run's root", "started takes an implicit run's path", "refused root goes on"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_fold_apply_never_deletes_another_runs_checkpoints(tmp_path: Path, attack: str) -> None:
    """Issue 20 #2 offline: runs without run_started shared --storage-root as their root, so one
    run could report another run's root (or kept checkpoint) as its own and evict it."""
    store = tmp_path / "store"
    victim = store / "victim"
    for name in ("k1", "k2"):
        (victim / name).mkdir(parents=True)
        (victim / name / "model.bin").write_bytes(b"victim's")
    root = store.as_uri()
    lines = [f.report("victim", {"acc": 1}, f"{root}/victim/k1"), f.report("victim", {"acc": 2}, f"{root}/victim/k2")]
    if attack == ATTACKS[0]:  # both implicit: the thief's checkpoint is the victim's whole directory
        lines += [f.report("thief", {"acc": 0}, f"{root}/victim")]
    elif attack == ATTACKS[1]:
        lines += [f.started("thief", root=root, keep=1, attr="acc")]
        lines += [f.report("thief", {"acc": 0}, f"{root}/victim/k2")]
    else:  # its run_started is refused (nested in the started victim's root), then it goes on
        lines.insert(0, f.started("victim", root=f"{root}/victim"))
        lines += [f.started("thief", root=f"{root}/victim/sub", keep=1, attr="acc")]
        lines += [f.report("thief", {"acc": 0}, f"{root}/victim/k1")]
    lines += [f.report("thief", {"acc": a}, f"{root}/thief/{a}") for a in (1, 2, 3)]  # evicts the worst
    flags = ["--apply", "--storage-root", root, "--default-num-to-keep", "2", "--score-attribute", "acc"]
    code, doc = fold(tmp_path, lines, *flags)
    assert code == 0, doc
    assert (victim / "k1/model.bin").read_bytes() == b"victim's" and (victim / "k2/model.bin").exists()
    reasons = {r["reason"] for r in doc["rejected"]}
    assert reasons & {"path_outside_root", "run_refused", "unsafe_storage_root"}, doc["rejected"]
