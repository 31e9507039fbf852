"""Runnable examples (importable from the repo root: `--fn examples.train_loop:evaluate`)."""
