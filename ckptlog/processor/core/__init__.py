"""The functional core: pure, deterministic, no aiokafka/fsspec/asyncio imports."""

from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Deletion, Effects, Output
from ckptlog.processor.core.state import FoldSettings, RunState
from ckptlog.processor.core.view import run_view

__all__ = ["Deletion", "Effects", "Fold", "FoldSettings", "Output", "RunState", "run_view"]
