"""`ckptlog demo`: the processor, a simulated training job and an evaluator, end to end, checked."""

from ckptlog.demo.runner import DemoOptions, DemoResult, run_demo

__all__ = ["DemoOptions", "DemoResult", "run_demo"]
