"""Lowering of T.copy and T.fill.

    T.copy(A[by * 64, k * 32], A_s)    ->  A_s_t1 = allocate_register(f16[64, 32], layout=<copy>)
                                           load_global(A, offset=[by * 64, k * 32], out=A_s_t1)
                                           store_shared(A_s_t1, A_s, offset=[0, 0])
    T.copy(A_s, a_frag)                ->  load_shared(A_s, offset=[0, 0], out=a_frag)
    T.copy(acc, C[by * 64, bx * 64])   ->  (cast(acc, out=acc_t2) when C has another dtype)
                                           store_global(acc, C, offset=[by * 64, bx * 64])
    T.copy(acc, acc_f16)               ->  cast(acc, out=acc_f16)      (equal layouts)

Memory -> memory copies go through a register tile in the copy layout (16-byte vectors on
consecutive threads, `LowerContext.copy_layout`). A global -> whole shared tile copy of one
dtype becomes an asynchronous copy, complete at once, when it is a producer of a T.Pipelined
loop (plan_pipeline) or (switch `async_copies`) lies outside the pipelined loops of more than
one iteration (`LowerContext.lands_async`; block/merge_waits.py then waits once for copies
issued together):

    T.copy(A[by * 64, k * 32], A_s)    ->  copy_async(A_s, A, offset=[by * 64, k * 32])
                                           copy_async_commit_group()
                                           copy_async_wait_group(0)

and passes/pipeline_copies.py turns a pipelined loop into stages. A global -> shared copy whose
destination still holds the tile (a second pass over a row: passes/copy_reuse.py) lowers to
nothing. A dtype change is a `cast`
in registers (moving data never converts). Region starts are the instructions' offsets, and the
region's non-unit dims the tile's `dims`.
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import Cast, CopyAsync, CopyAsyncCommitGroup, CopyAsyncWaitGroup, Fill
from tilecraft.block.select import select_copy_async
from tilecraft.ir import Copy
from tilecraft.ir import Fill as TileFill

from . import rule
from .context import LowerContext, match_dims, not_lowered


@rule(Copy)
def lower_copy(cx: LowerContext, op: Copy) -> list:
    src, dst, span = op.src, op.dst, op.span
    if cx.is_reused(op):
        return []  # the destination still holds the tile (passes/copy_reuse.py)
    if cx.lands_async(op) and dst.is_full() and src.dtype == dst.dtype:
        shape = cx.region_tile(src, span)
        tile = cx.tensor(dst.buffer, span)
        dims = None
        if tuple(tile.shape) == shape:
            dims = cx.dims_of(src, shape, span)
        elif tuple(e for e in tile.shape if e != 1) == shape:  # a shared tile with unit dims
            dims = match_dims(tuple(src.extents), tuple(tile.shape))  # None: more dims than src
        copy = None if dims is None else CopyAsync.create(
            tile, cx.tensor(src.buffer, span), offset=src.starts, dims=dims, span=span)
        # (outside a pipeline only as 16-byte cp.async; registers vectorize the other forms)
        if copy is not None and (cx.is_producer(op) or select_copy_async(copy) is not None):
            if op.disable_tma:
                copy = dataclasses.replace(copy, bulk_ok=False)
            return [copy,
                    CopyAsyncCommitGroup.create(span=span), CopyAsyncWaitGroup.create(0, span=span)]
    s_reg, d_reg = cx.whole_fragment(src, span), cx.whole_fragment(dst, span)
    if d_reg is not None:
        shape = tuple(d_reg.shape)
    elif s_reg is not None:
        shape = tuple(s_reg.shape)
    else:
        shape = cx.region_tile(src, span)
    if s_reg is not None and d_reg is not None and s_reg.layout != d_reg.layout:
        raise not_lowered(span, f"T.copy between the fragments `{s_reg.name}` and "
                          f"`{d_reg.name}` of different layouts ({s_reg.layout!r} and "
                          f"{d_reg.layout!r})", hint="copy through shared memory")
    if s_reg is None and d_reg is None and cx.region_tile(dst, span) != shape:
        raise not_lowered(span, f"T.copy of a {list(shape)} tile into a region of extents "
                          f"{list(dst.extents)}")
    same = src.dtype == dst.dtype
    out: list = []
    # the value in registers, in src's dtype
    if s_reg is not None:
        value = s_reg
    else:
        if d_reg is not None and same:
            value = d_reg  # straight into the destination fragment
        else:
            layout = d_reg.layout if d_reg is not None else \
                cx.copy_layout(shape, src.dtype, dst.dtype)
            value = cx.temp(src.buffer.name, src.dtype, layout, span, out)
        out.append(cx.load(src, value, span))
    # in dst's dtype (a cast also copies between two fragments of one dtype)
    if not same or (d_reg is not None and value is not d_reg):
        conv = d_reg if d_reg is not None else \
            cx.temp(dst.buffer.name, dst.dtype, value.layout, span, out)
        out.append(Cast.create(value, conv, span=span))
        value = conv
    if d_reg is None:
        out.append(cx.store(value, dst, span))
    return out


@rule(TileFill)
def lower_fill(cx: LowerContext, op: TileFill) -> list:
    reg = cx.whole_fragment(op.dst, op.span)
    if reg is not None:
        return [Fill.create(reg, op.value, span=op.span)]
    out: list = []
    shape = cx.region_tile(op.dst, op.span)
    tile = cx.temp(op.dst.buffer.name, op.dst.dtype, cx.copy_layout(shape, op.dst.dtype),
                   op.span, out)
    out.append(Fill.create(tile, op.value, span=op.span))
    out.append(cx.store(tile, op.dst, op.span))
    return out
