"""The functional core: pure, deterministic, no aiokafka/fsspec/asyncio imports."""

from processor.core.fold import Fold
from processor.core.outputs import Deletion, Effects, Output
from processor.core.state import FoldSettings, RunState
from processor.core.view import run_view

__all__ = ["Deletion", "Effects", "Fold", "FoldSettings", "Output", "RunState", "run_view"]
