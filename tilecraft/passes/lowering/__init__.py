"""Lowering rules of `lower_tile_ops` (passes/lower_tile_ops.py), registered per Tile IR op class,
one small file per op family: copy.py (T.copy, T.fill), gemm.py (T.gemm), parallel.py
(T.Parallel), misc.py (reductions, cumsum, atomics, print and the ops kept as they are).

A rule is `fn(cx: LowerContext, op) -> list[Stmt]`: the block instructions (and kept Tile IR
statements) that mean what `op` means, each with `op.span`.
"""

from __future__ import annotations

from collections.abc import Callable

RULES: dict[type, Callable] = {}


def rule(*classes: type):
    """Register the lowering of Tile IR statement classes `classes`."""

    def deco(fn):
        for c in classes:
            RULES[c] = fn
        return fn

    return deco


from . import copy, gemm, misc, parallel  # noqa: F401  (registration)
from .context import LowerContext

__all__ = ["RULES", "LowerContext", "rule"]
