"""Lowering of reductions, T.cumsum, atomics, T.print, and the ops kept as Tile IR statements.

    T.reduce_max(acc, m, dim=1, clear=False)   ->  reduce_max(acc, out=m, dim=1, clear=False)
    T.cumsum(x, y, dim=0)                      ->  cumsum(x, out=y, dim=0)
    T.atomic_add(C[by * 64, bx * 64], acc)     ->  atomic_add_global(acc, C, offset=[...])
    T.print(acc, "acc")                        ->  print(acc, msg='acc')

Reductions and cumsums work on whole fragments. A tile atomic's source is a whole fragment or a
memory region (loaded into a register tile first); into global memory it is
`atomic_<kind>_global`, into shared memory a `parallel` over the source's layout applying the
scalar atomic to each element. Kept as Tile IR statements (the VM runs them as the interpreter
does): scalar atomics outside T.Parallel (once per block; global or shared memory), T.print of a
scalar or of a local array, T.device_assert, and the hints T.use_swizzle and T.annotate_layout
(they do not change results; the printer reads them).
"""

from __future__ import annotations

from tilecraft.block import Cast, Print, ReduceRegister, Synchronize
from tilecraft.block.parallel import AtomicGlobal, CumSumRegister, ParallelCompute
from tilecraft.ir import (
    AnnotateLayout,
    Atomic,
    BufferLoad,
    BufferRegion,
    CumSum,
    DeviceAssert,
    Reduce,
    UseSwizzle,
    Var,
)
from tilecraft.ir import Print as TilePrint
from tilecraft.ir.tileops import REDUCE_KINDS

from . import rule
from .context import LowerContext, not_lowered


def _whole(cx: LowerContext, region: BufferRegion, what: str, span):
    reg = cx.whole_fragment(region, span)
    if reg is None:
        raise not_lowered(span, f"{what} of `{region.buffer.name}` in {region.buffer.scope} "
                          "memory", hint="copy it into a fragment first")
    return reg


@rule(Reduce)
def lower_reduce(cx: LowerContext, op: Reduce) -> list:
    if op.kind not in REDUCE_KINDS:
        raise not_lowered(op.span, f"T.reduce of kind {op.kind!r}")
    src = _whole(cx, op.src, f"T.reduce_{op.kind}", op.span)
    dst = _whole(cx, op.dst, f"T.reduce_{op.kind}", op.span)
    return [ReduceRegister.create(src, dst, op.dim, op.kind, op.clear, span=op.span)]


@rule(CumSum)
def lower_cumsum(cx: LowerContext, op: CumSum) -> list:
    """On whole fragments: `cumsum`; a memory region goes through a register tile of the
    region's (unsqueezed) shape, as T.cumsum reads it."""
    span, out = op.span, []
    src = cx.whole_fragment(op.src, span)
    if src is None:
        shape = _memory_tile(cx, op.src, span)
        src = cx.temp(op.src.buffer.name, op.src.dtype, cx.copy_layout(shape, op.src.dtype),
                      span, out)
        out.append(cx.load(op.src, src, span))
    dst = cx.whole_fragment(op.dst, span)
    if dst is None:
        _memory_tile(cx, op.dst, span)
        res = cx.temp(op.dst.buffer.name, op.dst.dtype, src.layout, span, out)
        out.append(CumSumRegister.create(src, res, op.dim, op.reverse, span=span))
        out.append(cx.store(res, op.dst, span))
    else:
        if tuple(dst.shape) != tuple(src.shape) or dst.layout != src.layout:
            raise not_lowered(span, f"T.cumsum into `{dst.name}` of another shape or layout "
                              f"than its source")
        out.append(CumSumRegister.create(src, dst, op.dim, op.reverse, span=span))
    return out


def _memory_tile(cx: LowerContext, r: BufferRegion, span) -> tuple[int, ...]:
    if r.buffer.scope not in ("global", "shared"):
        raise not_lowered(span, f"a tile op on the {r.buffer.scope} buffer `{r.buffer.name}`")
    if not all(isinstance(e, int) for e in r.extents):
        raise not_lowered(span, f"a region of `{r.buffer.name}` with a dynamic extent")
    return tuple(r.extents)


@rule(Atomic)
def lower_atomic(cx: LowerContext, op: Atomic) -> list:
    span, dst = op.span, op.dst
    if dst.buffer.scope not in ("global", "shared"):
        raise not_lowered(span, f"T.atomic_{op.kind} on {dst.buffer.scope} memory",
                          hint="atomics act on global or shared memory")
    if not isinstance(op.src, BufferRegion):  # a scalar atomic, once per block: as it is
        if op.order == "relaxed":
            return [op]
        # ordered: every thread's earlier accesses before it (release: thread 0 fences after
        # the barrier, codegen), every thread's later ones after it (acquire: after the fence)
        return [Synchronize.create(span=span), op, Synchronize.create(span=span)]
    out: list = []
    value = cx.whole_fragment(op.src, span)
    if value is None:
        shape = cx.region_tile(op.src, span)
        value = cx.temp(op.src.buffer.name, op.src.dtype,
                        cx.copy_layout(shape, op.src.dtype), span, out)
        out.append(cx.load(op.src, value, span))
    if dst.buffer.scope == "shared":
        return out + [_shared_tile_atomic(cx, op, value)]
    if value.dtype != dst.dtype:  # converted first, as on the GPU
        conv = cx.temp(dst.buffer.name, dst.dtype, value.layout, span, out)
        out.append(Cast.create(value, conv, span=span))
        value = conv
    store = cx.store(value, dst, span)  # checks the tile against the region
    out.append(AtomicGlobal.create(op.kind, value, store.dst, offset=store.offset,
                                   dims=store.dims, span=span))
    return out


def _shared_tile_atomic(cx: LowerContext, op: Atomic, value) -> ParallelCompute:
    """A tile atomic into shared memory as a `parallel` over the source's layout whose body is
    the scalar atomic of each element (once per logical element; converted to dst's dtype
    first, as the tile form does): `for i, j in parallel(...): atomic_add(S[r + i, c + j],
    v[i, j])`."""
    dst = op.dst
    dims = cx.dims_of(dst, value.shape, op.span)
    vars = tuple(Var.create(f"i{k}") for k in range(value.ndim))
    starts = list(dst.starts)
    for d, v in zip(dims, vars):
        starts[d] = starts[d] + v
    scalar = Atomic(op.kind, BufferRegion(dst.buffer, tuple(starts), (1,) * len(starts)),
                    BufferLoad.create(value.buffer, vars), op.span)
    return ParallelCompute.create(vars, value.layout, scalar,
                                  (value, cx.tensor(dst.buffer, op.span)), span=op.span)


@rule(TilePrint)
def lower_print(cx: LowerContext, op: TilePrint) -> list:
    if not isinstance(op.value, BufferRegion) or op.value.buffer.scope in ("local", "var"):
        return [op]  # a scalar, or thread 0's own copy of a local array: scalar code
    r = op.value  # the interpreter's header names the region: `label`
    if r.is_full():
        return [Print.create(cx.tensor(r.buffer, op.span), op.msg, span=op.span, label=str(r))]
    out: list = []
    whole = cx.whole_fragment(r, op.span)  # a part of a fragment: TC502
    assert whole is None
    shape = cx.region_tile(r, op.span)
    tile = cx.temp(r.buffer.name, r.dtype, cx.copy_layout(shape, r.dtype), op.span, out)
    out.append(cx.load(r, tile, op.span))
    out.append(Print.create(tile, op.msg, span=op.span, label=str(r), gather=True))
    return out


@rule(DeviceAssert, UseSwizzle, AnnotateLayout)
def keep(cx: LowerContext, op) -> list:
    return [op]
