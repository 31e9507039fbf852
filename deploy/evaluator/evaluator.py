"""The sample evaluator deploy/docker-compose.yml runs: `ckptlog evaluate --fn evaluator:evaluate`.

Replace it with yours: put your module in a directory, point `CKPTLOG_EVAL_DIR` at it (it is
mounted read-only at /opt/evaluator, on the PYTHONPATH) and name the function with
`CKPTLOG_EVAL_FN=module:function`. The function is called as `fn(checkpoint_path, **fn_kwargs)`
and returns the metrics to merge into the checkpoint's (a raise makes it VALIDATION_FAILED).

This one reads the checkpoint through fsspec — in the compose file `FSSPEC_S3_ENDPOINT_URL` and the
`AWS_*` variables point `s3://` at MinIO — and returns what it found. A real evaluator loads the
model from there and scores it.
"""

from __future__ import annotations

from typing import Any

import fsspec


def evaluate(checkpoint_path: str, **fn_kwargs: Any) -> dict[str, Any]:
    """{"eval": {"files": n, "bytes": total}} of the checkpoint directory; raises if it is empty or gone."""
    fs, path = fsspec.core.url_to_fs(checkpoint_path)
    sizes = {name: info.get("size") or 0 for name, info in fs.find(path, detail=True).items()}
    if not sizes:
        raise FileNotFoundError(f"checkpoint {checkpoint_path} has no files (was it uploaded completely?)")
    return {"eval": {"files": len(sizes), "bytes": sum(sizes.values())}}
