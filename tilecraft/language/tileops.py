"""Tile operations: copy, gemm, reductions, cumsum, fill/clear, atomics.

Operands are buffers, slices (`A[b, i*64:(i+1)*64, :]`) or start corners (`A[by*128, k*32]`,
meaning a tile of the other operand's shape). Shapes and dtypes are checked here, at the
user's line.
"""

from __future__ import annotations

import difflib

from tilecraft.diagnostics import TilecraftError, current_span
from tilecraft.frontend.builder import in_kernel
from tilecraft.frontend.expressions import tile_operand
from tilecraft.ir import (
    Allocate,
    Atomic,
    Buffer,
    BufferLoad,
    BufferRegion,
    Copy,
    CumSum,
    Expr,
    Fill,
    Gemm,
    GemmWarpPolicy,
    LetStmt,
    Reduce,
    Var,
    as_expr,
    cast,
)
from tilecraft.ir.buffer import _check_static_start
from tilecraft.ir.expr import Const
from tilecraft.ir.tileops import REDUCE_KINDS

from .surface import flag, int_arg


def _name(x) -> str:
    if isinstance(x, (BufferRegion, BufferLoad)):
        return x.buffer.name
    return getattr(x, "name", str(x))


def to_region(x, like=None, what: str = "operand") -> BufferRegion:
    """A Buffer, region or start corner as a region; a corner takes `like`'s shape. A Tilus
    register tensor is its fragment (its layout a strict constraint for inference)."""
    x = tile_operand(x)
    if isinstance(x, Buffer):
        return x.full_region()
    if isinstance(x, BufferRegion):
        return x
    if isinstance(x, BufferLoad):
        if like is None:
            raise TilecraftError("TC206", op=what, detail=f"`{x}` is a single element",
                                 hint="give a slice (`A[0:64, :]`) or a whole buffer on one side")
        shape = list(like.extents if isinstance(like, BufferRegion) else like.shape)
        rank = x.buffer.ndim
        while len(shape) > rank and shape[0] == 1:
            shape.pop(0)
        if len(shape) > rank:
            raise TilecraftError("TC204", src=_name(like), src_shape=list(shape), dst=x.buffer.name,
                                 dst_shape=list(x.buffer.shape))
        extents = (1,) * (rank - len(shape)) + tuple(shape)
        for d, s in enumerate(x.indices):
            _check_static_start(x.buffer, d, s)
        # a corner's tile may reach past the tensor (M < block_M, the last partial tile): the copy
        # clips it, reading zeros outside and dropping writes there
        return BufferRegion(x.buffer, x.indices, extents)
    raise TilecraftError("TC206", op=what, detail=f"expected a buffer or a slice, got {x!r}",
                         hint="pass a buffer, `A[i*64:(i+1)*64, :]` or a start corner `A[i*64, 0]`")


def _regions(a, b, what: str) -> tuple[BufferRegion, BufferRegion]:
    if isinstance(a, BufferLoad) and isinstance(b, BufferLoad):
        raise TilecraftError("TC206", op=what, detail="both sides are single elements",
                             hint="one side must be a buffer or a slice to give the tile shape")
    if isinstance(a, BufferLoad):
        rb = to_region(b, what=what)
        return to_region(a, rb, what), rb
    ra = to_region(a, what=what)
    return ra, to_region(b, ra, what)


def copy(src, dst, *, disable_tma: bool = False) -> None:
    """Copy a tile between any two of global / shared / fragment / local (casting the dtype).
    `disable_tma=True`: a global -> shared copy a T.Pipelined loop issues ahead moves by
    cp.async even where a TMA load could (sm_90a): for small tiles its lower latency can win."""
    b = in_kernel("T.copy")
    disable_tma = flag(disable_tma, "disable_tma")
    s, d = _regions(src, dst, "copy")
    ss, ds = s.squeezed_shape(), d.squeezed_shape()
    if _static(ss) and _static(ds) and ss != ds:
        raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                             dst=d.buffer.name, dst_shape=list(d.extents))
    b.emit(Copy(s, d, disable_tma=disable_tma))


def _static(shape) -> bool:
    return all(isinstance(x, int) for x in shape)


def gemm(A, B, C, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
         policy=GemmWarpPolicy.Square, clear_accum: bool = False) -> None:
    """C (+)= op(A) @ op(B) on tiles; `policy` says how warps split C (Square/FullRow/FullCol).

    `clear_accum=True` overwrites C instead of adding to it."""
    bld = in_kernel("T.gemm")
    transpose_A, transpose_B = flag(transpose_A, "transpose_A"), flag(transpose_B, "transpose_B")
    clear_accum = flag(clear_accum, "clear_accum")
    a, bb, c = (to_region(x, what="gemm") for x in (A, B, C))
    sa, sb, sc = a.squeezed_shape(), bb.squeezed_shape(), c.squeezed_shape()
    for nm, s, r in (("A", sa, a), ("B", sb, bb), ("C", sc, c)):
        if len(s) != 2 or not _static(s):
            raise TilecraftError("TC202", detail=f"{nm} = `{r.buffer.name}` has shape "
                                 f"{list(r.extents)}, expected a static 2-D tile")
    m, ka = (sa[1], sa[0]) if transpose_A else sa
    kb, n = (sb[1], sb[0]) if transpose_B else sb
    if ka != kb:
        raise TilecraftError("TC202", detail=f"K of A (`{a.buffer.name}`, {ka}) != K of B "
                             f"(`{bb.buffer.name}`, {kb})")
    if tuple(sc) != (m, n):
        raise TilecraftError("TC202", detail=f"C (`{c.buffer.name}`) is {list(sc)}, but "
                             f"op(A) @ op(B) is [{m}, {n}]")
    if a.dtype != bb.dtype:
        raise TilecraftError("TC203", detail=f"A is {a.dtype} but B is {bb.dtype}")
    if not (c.dtype.is_float or c.dtype.kind == "int"):
        raise TilecraftError("TC203", detail=f"C is {c.dtype}")
    operand = ("shared", "fragment", "local")
    for nm, r, ok in (("A", a, operand), ("B", bb, operand), ("C", c, ("fragment", "local"))):
        if r.buffer.scope not in ok:
            raise TilecraftError("TC207", buffer=r.buffer.name, scope=r.buffer.scope,
                                 detail=f"gemm operand {nm} must be in {' or '.join(ok)} memory",
                                 hint="T.copy it into a T.alloc_shared / T.alloc_fragment tile "
                                 "first")
    policy = getattr(policy, "name", policy)
    if policy not in GemmWarpPolicy.ALL:
        raise TilecraftError("TC206", op="gemm", detail=f"unknown policy {policy!r}",
                             hint="T.GemmWarpPolicy.Square, FullRow or FullCol")
    bld.emit(Gemm(a, bb, c, transpose_A, transpose_B, policy, clear_accum))


def _reduce(kind: str, src, dst, dim: int = -1, clear: bool = True) -> None:
    bld = in_kernel(f"T.reduce_{kind}")
    s, d = to_region(src, what=f"reduce_{kind}"), to_region(dst, what=f"reduce_{kind}")
    clear = flag(clear, "clear")
    dim = _dim(dim, len(s.extents), f"reduce_{kind}", s)
    expect = tuple(x for i, x in enumerate(s.extents) if i != dim)
    got = tuple(d.extents)
    if got != expect and d.squeezed_shape() != tuple(x for x in expect if x != 1):
        raise TilecraftError("TC206", op=f"reduce_{kind}",
                             detail=f"reducing `{s.buffer.name}` {list(s.extents)} over dim {dim} "
                             f"gives {list(expect)}, but `{d.buffer.name}` is {list(got)}",
                             hint="the destination has the source's shape without `dim`")
    bld.emit(Reduce(kind, s, d, dim, clear))


def _dim(dim, rank: int, op: str, region: BufferRegion) -> int:
    """`dim` of a `rank`-D tile as an index in [0, rank) (negative dims count from the end)."""
    dim = int_arg(dim, f"dim of T.{op}", device=False)
    if not -rank <= dim < rank:
        raise TilecraftError("TC206", op=op, detail=f"dim={dim} for the {rank}-D tile "
                             f"`{region.buffer.name}` {list(region.extents)}",
                             hint=f"dim is in [{-rank}, {rank})")
    return dim % rank


def reduce_sum(buffer, out, dim: int = -1, clear: bool = True) -> None:
    """out = sum of buffer over `dim` (added to out's old value when clear=False)."""
    _reduce("sum", buffer, out, dim, clear)


def reduce_max(buffer, out, dim: int = -1, clear: bool = True) -> None:
    """out = max of buffer over `dim` (combined with out's old value when clear=False)."""
    _reduce("max", buffer, out, dim, clear)


def reduce_min(buffer, out, dim: int = -1, clear: bool = True) -> None:
    """out = min of buffer over `dim`."""
    _reduce("min", buffer, out, dim, clear)


def reduce_abssum(buffer, out, dim: int = -1, clear: bool = True) -> None:
    """out = sum of |buffer| over `dim`."""
    _reduce("abssum", buffer, out, dim, clear)


def reduce_absmax(buffer, out, dim: int = -1, clear: bool = True) -> None:
    """out = max of |buffer| over `dim`."""
    _reduce("absmax", buffer, out, dim, clear)


def reduce(buffer, out, reduce_type: str = "sum", dim: int = -1, clear: bool = True) -> None:
    """out = the `reduce_type` (sum, max, min, abssum or absmax) of buffer over `dim`."""
    if reduce_type not in REDUCE_KINDS:
        close = difflib.get_close_matches(str(reduce_type), REDUCE_KINDS, n=1)
        raise TilecraftError("TC206", op="reduce", detail=f"unknown reduce_type {reduce_type!r}",
                             hint=(f"did you mean {close[0]!r}? " if close else "")
                             + "reduce_type is one of " + ", ".join(map(repr, REDUCE_KINDS)))
    _reduce(reduce_type, buffer, out, dim, clear)


def cumsum(src, dst=None, dim: int = 0, reverse: bool = False) -> None:
    """Inclusive prefix sum of `src` along `dim` into `dst` (in place when dst is omitted)."""
    bld = in_kernel("T.cumsum")
    s = to_region(src, what="cumsum")
    d = to_region(dst if dst is not None else src, s, "cumsum")
    if d.squeezed_shape() != s.squeezed_shape():
        raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                             dst=d.buffer.name, dst_shape=list(d.extents))
    dim = _dim(dim, len(s.extents), "cumsum", s)
    bld.emit(CumSum(s, d, dim, flag(reverse, "reverse")))


def fill(buffer, value) -> None:
    """Set every element of a tile to `value`."""
    bld = in_kernel("T.fill")
    r = to_region(buffer, what="fill")
    bld.emit(Fill(r, cast(r.dtype, as_expr(value, r.dtype))))


def clear(buffer) -> None:
    """Set every element of a tile to zero."""
    fill(buffer, 0)


#: memory_order -> the order tilecraft gives (C++'s "consume" is "acquire", as compilers do)
MEMORY_ORDERS = {None: "relaxed", "relaxed": "relaxed", "consume": "acquire",
                 "acquire": "acquire", "release": "release", "acq_rel": "acq_rel",
                 "seq_cst": "seq_cst"}


def _atomic(kind: str, dst, value, memory_order=None, return_prev=False):
    bld = in_kernel(f"T.atomic_{kind}")
    name = f"T.atomic_{kind}"
    if not isinstance(memory_order, (str, type(None))) or memory_order not in MEMORY_ORDERS:
        raise TilecraftError("TC112", func=name, detail=f"memory_order={memory_order!r}",
                             signature=f"(dst, value, memory_order=one of "
                             f"{[k for k in MEMORY_ORDERS if k]}, return_prev=False)")
    order = MEMORY_ORDERS[memory_order]
    return_prev = flag(return_prev, "return_prev")
    dst, value = tile_operand(dst), tile_operand(value)
    if isinstance(value, (Buffer, BufferRegion)) or (isinstance(value, BufferLoad) and
                                                     not isinstance(dst, BufferLoad)):
        _scalar_only(name, order, return_prev, "the tile form (a tile of values)")
        s, d = _regions(value, dst, f"atomic_{kind}")
        if _static(s.squeezed_shape()) and _static(d.squeezed_shape()) and \
                s.squeezed_shape() != d.squeezed_shape():
            raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                                 dst=d.buffer.name, dst_shape=list(d.extents))
        bld.emit(Atomic(kind, d, s))
        return None
    if isinstance(dst, BufferLoad):
        d = BufferRegion(dst.buffer, dst.indices, (1,) * dst.buffer.ndim)
    else:
        d = to_region(dst, what=f"atomic_{kind}")
    if bld.parallel_depth:
        _scalar_only(name, order, return_prev, "an atomic inside T.Parallel (once per element)")
    v = value if isinstance(value, Expr) else as_expr(value, d.dtype)
    if not return_prev:
        bld.emit(Atomic(kind, d, cast(d.dtype, v), order=order))
        return None
    # thread 0's result, for every thread to read (docs/language.md, Atomics): a shared element
    # allocated with the kernel's, read once into a name right after the atomic
    prev_buf = Buffer.create(bld.unique_name(f"{d.buffer.name}_prev"), (1,), d.dtype, "shared",
                             current_span())
    bld.frames[bld.kernel.frame_depth].insert(0, Allocate(prev_buf, current_span()))
    zero = (Const.create(0),)
    bld.emit(Atomic(kind, d, cast(d.dtype, v), prev=BufferRegion(prev_buf, zero, (1,)),
                    order=order))
    old = Var.create(bld.unique_name(f"{d.buffer.name}_old"), d.dtype)
    bld.emit(LetStmt(old, BufferLoad.create(prev_buf, list(zero))))
    return old


def _scalar_only(name: str, order: str, return_prev: bool, where: str) -> None:
    """return_prev and ordered atomics: one element, outside T.Parallel (TC113 otherwise)."""
    for keyword, value, default in (("return_prev", return_prev, False),
                                    ("memory_order", order, "relaxed")):
        if value != default:
            raise TilecraftError(
                "TC113", func=name, keyword=keyword, value=repr(value),
                hint=f"tilecraft takes {keyword} on a scalar atomic outside T.Parallel (once per "
                f"block), not on {where}: make the ordered atomic its own statement at block "
                "level")


def atomic_add(dst, value, memory_order=None, return_prev=False):
    """dst += value atomically (dst an element or a tile; value a scalar or a tile). A scalar
    atomic outside T.Parallel runs once per block; there `return_prev=True` returns dst's old
    value to every thread, and `memory_order` ("acquire", "release", "acq_rel", "seq_cst")
    orders the whole block's memory accesses before / after it at GPU scope (docs/language.md,
    "Atomics")."""
    return _atomic("add", dst, value, memory_order, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False):
    """dst = max(dst, value) atomically (as atomic_add for return_prev and memory_order)."""
    return _atomic("max", dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False):
    """dst = min(dst, value) atomically (as atomic_add for return_prev and memory_order)."""
    return _atomic("min", dst, value, memory_order, return_prev)

