"""Layout rules of T.copy and T.fill (common): a copy between two fragments keeps the layout.

    T.copy(acc_s, acc_s_cast)     acc_s: L  ->  acc_s_cast: L   (and back, whichever is known)
Copies with memory on one side constrain nothing here (the free level may choose for them).
"""

from __future__ import annotations

from tilecraft.ir import Copy


def copy_rule(ctx, op: Copy, level: str) -> None:
    if level != "common":
        return
    s, d = op.src.buffer, op.dst.buffer
    if s.scope != "fragment" or d.scope != "fragment":
        return
    if not (op.src.is_full() and op.dst.is_full()):
        return
    ls, ld = ctx.get(s), ctx.get(d)
    if ls is not None and ld is None and s.shape == d.shape:
        ctx.set(d, ls, op, "copied layout")
    elif ld is not None and ls is None and s.shape == d.shape:
        ctx.set(s, ld, op, "copied layout")
    elif ls is not None and ld is not None:
        ctx.set(d, ls, op, "copied layout")  # equal, or TC501 naming both ops
