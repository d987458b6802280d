"""Layout rule of T.Parallel loops (common).

A loop `for i, j in T.Parallel(M, N)` runs where a fragment indexed `[i, j]` lives: it takes
that fragment's layout L. Every other fragment indexed by the loop's variables in order must
then have L (all variables) or L reduced over the missing ones (`x[i]` -> L.reduce(1)); a
fragment without a layout gets it. Fragments indexed any other way are a TC502.

    for i, j in T.Parallel(128, 64):          loop: layout of acc_s
        acc_s[i, j] = exp2(acc_s[i, j] - m[i])     m: acc_s.reduce(1)
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import BufferLoad, BufferStore, ParallelLoop, Var
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr


def parallel_accesses(loop: ParallelLoop):
    """(buffer, indices) of every load and store in the loop body."""
    out = []
    for s in walk(loop.body):
        if isinstance(s, BufferStore):
            out.append((s.buffer, s.indices))
        for e in stmt_exprs(s):
            for x in walk_expr(e):
                if isinstance(x, BufferLoad):
                    out.append((x.buffer, x.indices))
    return out


def loop_dims(loop: ParallelLoop, buf, indices) -> tuple[int, ...]:
    """Which loop dimensions a fragment access uses, in order; TC502 if not plain loop vars."""
    dims = []
    for ix in indices:
        if not (isinstance(ix, Var) and ix in loop.vars):
            raise TilecraftError("TC502", span=loop.span, detail=f"fragment `{buf.name}` "
                                 f"indexed by `{ix}` inside T.Parallel",
                                 hint="index fragments with the loop variables themselves")
        dims.append(loop.vars.index(ix))
    if dims != sorted(set(dims)):
        raise TilecraftError("TC502", span=loop.span, detail=f"fragment `{buf.name}` indexed "
                             "with loop variables out of order", hint="")
    return tuple(dims)


def sub_layout(layout, ndim: int, dims: tuple[int, ...]):
    for d in reversed(range(ndim)):
        if d not in dims:
            layout = layout.reduce(d, keepdim=False)
    return layout


def parallel_rule(ctx, loop: ParallelLoop, level: str) -> None:
    if level != "common":
        return
    n = len(loop.vars)
    frags = [(b, loop_dims(loop, b, idx)) for b, idx in parallel_accesses(loop)
             if b.scope == "fragment"]
    lay = ctx.state.loop_layouts.get(loop)
    if lay is None:
        for b, dims in frags:
            if len(dims) == n and ctx.get(b) is not None and tuple(b.shape) == tuple(loop.extents):
                lay = ctx.get(b)
                ctx.set_loop(loop, lay)
                break
    if lay is None:
        return
    for b, dims in frags:
        ctx.set(b, sub_layout(lay, n, dims), loop, "layout of the T.Parallel loop")
