"""Compiler passes over Tile IR (DESIGN 2.3). `pipeline.py` holds the one ordered list.

    from tilecraft.passes import lower
    state = lower(prim_func, target)   # -> KernelState with layouts, pipelines, smem plan
"""

from .context import KernelState
from .pipeline import PASSES, Pass, lower

__all__ = ["PASSES", "KernelState", "Pass", "lower"]
