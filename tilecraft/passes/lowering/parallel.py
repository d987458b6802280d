"""Lowering of T.Parallel loops: one `parallel` instruction over the loop's inferred layout.

    for i, j in T.Parallel(128, 64):        ->  for i, j in parallel(128, 64, layout=<loop layout>):
        acc[i, j] = acc[i, j] * scale[i]            acc[i, j] = acc[i, j] * scale[i]

The body stays scalar Tile IR; the instruction lists the register and shared tensors it indexes.
Its layout is `state.loop_layouts[loop]` (layout inference maps every Parallel loop). The VM
runs the body per (thread, local element) and checks that every register element the body
touches belongs to that thread (TC610), the promise the CUDA printer relies on.

A shared tile the body only reads, at the loop's own variables (`X_s[i, j]`, or `g_s[j]` of a
subset of them, in order, covering the tile), is first loaded into registers in the loop's
layout (reduced over the variables it does not use), and the body reads those registers:

    for i, j in T.Parallel(4, 64):     ->  X_s_t1 = allocate_register(f16[4, 64], <loop>)
        y[i, j] = X_s[i, j] * g_s[j]       load_shared(X_s, offset=[0, 0], out=X_s_t1)
                                           g_s_t2 = allocate_register(f16[64], <loop>.reduce(0))
                                           load_shared(g_s, offset=[0], out=g_s_t2)
                                           for i, j in parallel(4, 64, layout=<loop>):
                                               y[i, j] = X_s_t1[i, j] * g_s_t2[j]

so the loads are vectors of whole 16 bytes (selection) instead of one element at a time.

A shared tile the body reads and writes only at the loop's own variables, in order, covering
the tile (element-private: `s[i, j] = s[i, j] * 2`) is loaded the same way, the body updates
the registers, and `store_shared` writes them back after the loop. Replicas of a replicated
layout all read the tile before any of them writes it (the barrier insert_barriers puts before
the store), where updating shared memory in the loop would let one replica read what another
already updated. A shared tile the body writes and reads at other indices (a dependence between
the loop's elements: the interpreter runs the body statement by statement over all elements)
is TC502 at the read: the loop has no barrier inside.

The body may hold stores, lets, `if`s, serial loops, `T.call_extern`s and scalar atomics on
global or shared memory (once per logical element of the loop, however replicated its layout);
a tile op (a tile-form atomic too) is TC108, as on the interpreter; anything else (a nested
T.Parallel, a while loop, an atomic on registers) is TC502.
"""

from __future__ import annotations

import dataclasses

from tilecraft.block.parallel import ParallelCompute
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (
    Atomic,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Evaluate,
    For,
    If,
    LetStmt,
    ParallelLoop,
    SeqStmt,
    TileOp,
)
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from . import rule
from .context import LowerContext, not_lowered

_BODY = (SeqStmt, BufferStore, LetStmt, If, For, Evaluate)


def _check_body(loop: ParallelLoop) -> None:
    for s in walk(loop.body):
        if isinstance(s, TileOp) and not (isinstance(s, Atomic)
                                          and not isinstance(s.src, BufferRegion)):
            raise TilecraftError("TC108", span=s.span, detail=f"T.{s.op_name} inside T.Parallel "
                                 "or a per-element `if`", hint="tile operations run on whole "
                                 "tiles; move it out of the element-wise loop")
        if isinstance(s, Atomic):
            if isinstance(s.src, BufferRegion) or s.dst.buffer.scope not in ("global", "shared"):
                raise not_lowered(s.span, f"T.atomic_{s.kind} on {s.dst.buffer.scope} memory "
                                  "inside T.Parallel")
        elif not isinstance(s, _BODY):
            raise not_lowered(s.span, f"{type(s).__name__} inside T.Parallel")


def _hoisted_reads(cx: LowerContext, loop: ParallelLoop, layout, out: list) -> dict:
    """Shared buffer -> the register tile its reads in the body become (see the module doc)."""
    from tilecraft.block import LoadShared

    stored = {s.buffer: s for s in walk(loop.body) if isinstance(s, BufferStore)}
    atomics = {s.dst.buffer for s in walk(loop.body) if isinstance(s, Atomic)}
    uses: dict = {}
    first_read: dict = {}
    remote = set()  # (T.remote reads another block's memory at the element's address)
    for s in walk(loop.body):
        for e in stmt_exprs(s):
            inner = {id(c.args[1]) for c in walk_expr(e)
                     if isinstance(c, Call) and c.op == "remote_load"}
            for x in walk_expr(e):
                if isinstance(x, Call) and x.op == "remote_load":
                    remote.add(x.args[1].buffer)
                if id(x) in inner:  # (another block's element: not this block's form)
                    continue
                if isinstance(x, BufferLoad) and x.buffer.scope == "shared":
                    uses.setdefault(x.buffer, set()).add(tuple(x.indices))
                    first_read.setdefault(x.buffer, s)
    for s in walk(loop.body):
        if isinstance(s, BufferStore) and s.buffer in uses:
            uses[s.buffer].add(tuple(s.indices))
    hoisted = {}
    for buf, forms in uses.items():
        if buf in atomics:
            continue
        (idx,) = forms if len(forms) == 1 else (None,)
        pos = [] if idx is None else \
            [next((k for k, v in enumerate(loop.vars) if v is i), None) for i in idx]
        if (idx is None or None in pos or pos != sorted(set(pos)) or buf.static_shape is None
                or tuple(buf.static_shape) != tuple(loop.extents[k] for k in pos)
                or buf in stored and len(pos) != len(loop.vars)):
            if buf in stored:
                raise not_lowered(first_read[buf].span, f"a read of the shared tile `{buf.name}` "
                                  "that other elements of the T.Parallel loop write (the loop "
                                  "has no barrier inside)", hint="split the loop in two where "
                                  "the elements' writes must land before the reads")
            continue
        if buf in remote:  # read by address (mapa): it stays in shared memory
            continue
        lay = layout
        for d in reversed(range(len(loop.vars))):
            if d not in pos:
                lay = lay.reduce(d, keepdim=False)
        t = cx.temp(buf.name, buf.dtype, lay, loop.span, out)
        out.append(LoadShared.create(cx.tensor(buf, loop.span), t, span=loop.span))
        hoisted[buf] = t
    return hoisted


def _write_backs(cx: LowerContext, loop: ParallelLoop, hoisted: dict) -> list:
    """The store_shared of each hoisted tile the loop body writes, after the loop."""
    from tilecraft.block import StoreShared

    stored = {s.buffer for s in walk(loop.body) if isinstance(s, BufferStore)}
    return [StoreShared.create(t, cx.tensor(buf, loop.span), span=loop.span)
            for buf, t in hoisted.items() if buf in stored]


@rule(ParallelLoop)
def lower_parallel(cx: LowerContext, loop: ParallelLoop) -> list:
    _check_body(loop)
    out: list = []
    layout = cx.state.loop_layouts[loop]
    hoisted = _hoisted_reads(cx, loop, layout, out)
    after = _write_backs(cx, loop, hoisted)
    if hoisted:
        loop = dataclasses.replace(loop, body=_read_registers(loop.body, hoisted))
    bufs = []
    for s in walk(loop.body):
        found = [s.buffer] if isinstance(s, BufferStore) else \
            [s.dst.buffer] if isinstance(s, Atomic) else []
        found += [x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                  if isinstance(x, BufferLoad)]
        bufs += [b for b in found if b.scope in ("fragment", "shared") and b not in bufs]
    registers = {t.buffer: t for t in hoisted.values()}
    tensors = [registers[b] if b in registers else cx.tensor(b, loop.span) for b in bufs]
    return out + [ParallelCompute.create(loop.vars, layout, loop.body, tensors, span=loop.span),
                  *after]


def _read_registers(body, hoisted: dict):
    """`body` with the loads (and stores) of hoisted shared buffers on their register tiles."""
    from tilecraft.ir.rewrite import map_exprs, replace_stmt

    while True:
        s = next((s for s in walk(body) if isinstance(s, BufferStore) and s.buffer in hoisted),
                 None)
        if s is None:
            break
        body = replace_stmt(body, s, dataclasses.replace(s, buffer=hoisted[s.buffer].buffer))

    def swap(e):
        if isinstance(e, BufferLoad) and e.buffer in hoisted:
            return dataclasses.replace(e, buffer=hoisted[e.buffer].buffer)
        return None

    return map_exprs(body, swap)
