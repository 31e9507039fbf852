"""A plain training loop that reports to ckptlog (no framework): save, report, let ckptlog keep the best.

    ckptlog run --storage-root file:///tmp/ckptlog-example &       # the processor (or `ckptlog demo`)
    ckptlog evaluate --fn examples.train_loop:evaluate &             # optional: validates checkpoints
    python examples/train_loop.py --run-id my-run --steps 20
    ckptlog watch my-run --score-attribute val_acc

The loop owns nothing but its checkpoints directory: which checkpoints to keep, which one is
best and when an evicted one may be deleted is decided by the processor, durably.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from ckptlog import Reporter


def evaluate(checkpoint_path: str, *, split: str = "val") -> dict[str, Any]:
    """The validation function for `ckptlog evaluate --fn examples.train_loop:evaluate`."""
    state = json.loads((Path(checkpoint_path.removeprefix("file://")) / "state.json").read_text())
    return {"val_acc": round(state["quality"] - 0.01, 4), "split": split}


def save(directory: Path, step: int, quality: float) -> Path:
    """Stands in for torch.save / trainer.save_checkpoint: one new directory per checkpoint."""
    directory.mkdir(parents=True)
    (directory / "state.json").write_text(json.dumps({"step": step, "quality": quality}))
    return directory


def train(run_id: str, storage: Path, steps: int, validate_every: int, bootstrap: str | None, topic: str) -> None:
    rng = random.Random(run_id)
    with Reporter(run_id, bootstrap_servers=bootstrap, topic=topic) as reporter:
        reporter.run_started(
            storage,
            num_to_keep=3,
            checkpoint_score_attribute="val_acc",
            validation={"fn_kwargs": {"split": "val"}, "timeout_s": 60},
        )
        quality = 0.5
        for step in range(steps):
            quality = min(0.99, quality + rng.uniform(-0.01, 0.04))  # "training"
            checkpoint = save(storage / f"checkpoint_{step:05d}", step, quality)
            validate = validate_every > 0 and step % validate_every == 0
            sent = reporter.report(
                {"step": step, "loss": round(1 - quality, 4), "val_acc": round(quality, 4)},
                checkpoint,
                validation=validate,
            )
            print(f"step {step}: reported {checkpoint.name} (event {sent.event_id})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-id", default="example-run")
    parser.add_argument("--storage", type=Path, default=Path("/tmp/ckptlog-example"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--validate-every", type=int, default=0, help="0: never (needs `ckptlog evaluate`)")
    parser.add_argument("--bootstrap-servers", default=None)
    parser.add_argument("--topic", default="ckptlog.events")
    args = parser.parse_args()
    train(
        args.run_id,
        args.storage.resolve() / args.run_id,
        args.steps,
        args.validate_every,
        args.bootstrap_servers,
        args.topic,
    )


if __name__ == "__main__":
    main()
