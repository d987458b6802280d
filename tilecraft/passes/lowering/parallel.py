"""Lowering of T.Parallel loops: one `parallel` instruction over the loop's inferred layout.

    for i, j in T.Parallel(128, 64):        ->  for i, j in parallel(128, 64, layout=<loop layout>):
        acc[i, j] = acc[i, j] * scale[i]            acc[i, j] = acc[i, j] * scale[i]

The body stays scalar Tile IR; the instruction lists the register and shared tensors it indexes.
Its layout is `state.loop_layouts[id(loop)]` (layout inference maps every Parallel loop). The VM
runs the body per (thread, local element) and checks that every register element the body
touches belongs to that thread (TC610), the promise the CUDA printer relies on.

The body may hold stores, lets, `if`s, serial loops, `T.call_extern`s and scalar atomics on
global or shared memory (once per logical element of the loop, however replicated its layout);
anything else (a tile op, a nested T.Parallel, a while loop, an atomic on registers) is TC502.
"""

from __future__ import annotations

from tilecraft.block.parallel import ParallelCompute
from tilecraft.ir import (
    Atomic,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    If,
    LetStmt,
    ParallelLoop,
    SeqStmt,
)
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from . import rule
from .context import LowerContext, not_lowered

_BODY = (SeqStmt, BufferStore, LetStmt, If, For, Evaluate)


def _check_body(loop: ParallelLoop) -> None:
    for s in walk(loop.body):
        if isinstance(s, Atomic):
            if isinstance(s.src, BufferRegion) or s.dst.buffer.scope not in ("global", "shared"):
                raise not_lowered(s.span, f"T.atomic_{s.kind} on {s.dst.buffer.scope} memory "
                                  "inside T.Parallel")
        elif not isinstance(s, _BODY):
            raise not_lowered(s.span, f"{type(s).__name__} inside T.Parallel")


@rule(ParallelLoop)
def lower_parallel(cx: LowerContext, loop: ParallelLoop) -> list:
    _check_body(loop)
    bufs = []
    for s in walk(loop.body):
        found = [s.buffer] if isinstance(s, BufferStore) else \
            [s.dst.buffer] if isinstance(s, Atomic) else []
        found += [x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                  if isinstance(x, BufferLoad)]
        bufs += [b for b in found if b.scope in ("fragment", "shared") and b not in bufs]
    tensors = [cx.tensor(b, loop.span) for b in bufs]
    layout = cx.state.loop_layouts[id(loop)]
    return [ParallelCompute.create(loop.vars, layout, loop.body, tensors, span=loop.span)]
