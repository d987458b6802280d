"""Layout rule of T.reduce_* (common): the output is the input with the reduced dimension
folded away; threads that held different parts of one row now hold copies of its result.

    acc_s: spatial(4, 1) * local(2, 8) * mma_c   (128 x 64)
    T.reduce_max(acc_s, m, dim=1)  ->  m: acc_s.reduce(1)   (128,), each row on 4 lanes
"""

from __future__ import annotations

from tilecraft.ir import Reduce


def reduce_rule(ctx, op: Reduce, level: str) -> None:
    if level != "common":
        return
    s, d = op.src.buffer, op.dst.buffer
    if s.scope != "fragment" or d.scope != "fragment":
        return
    ls = ctx.get(s)
    if ls is None:
        return
    keep = len(d.shape) == len(s.shape)
    ctx.set(d, ls.reduce(op.dim, keepdim=keep), op, "reduced layout")
