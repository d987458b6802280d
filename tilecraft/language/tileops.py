"""Tile operations: copy, gemm, reductions, cumsum, fill/clear, atomics.

Operands are buffers, slices (`A[b, i*64:(i+1)*64, :]`) or start corners (`A[by*128, k*32]`,
meaning a tile of the other operand's shape). Shapes and dtypes are checked here, at the
user's line.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.ir import (Atomic, Buffer, BufferLoad, BufferRegion, Copy, CumSum, Expr, Fill, Gemm,
                          GemmWarpPolicy, Reduce, as_expr, cast)
from tilecraft.ir.buffer import _check_static_start
from tilecraft.ir.expr import Const


def _name(x) -> str:
    return x.buffer.name if isinstance(x, (BufferRegion, BufferLoad)) else getattr(x, "name", str(x))


def to_region(x, like=None, what: str = "operand") -> BufferRegion:
    """A Buffer, region or start corner as a region; a corner takes `like`'s shape."""
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


def copy(src, dst, **_ignored) -> None:
    """Copy a tile between any two of global / shared / fragment / local (casting the dtype)."""
    b = in_kernel("T.copy")
    s, d = _regions(src, dst, "copy")
    ss, ds = s.squeezed_shape(), d.squeezed_shape()
    if _static(ss) and _static(ds) and ss != ds:
        raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                             dst=d.buffer.name, dst_shape=list(d.extents))
    b.emit(Copy(s, d))


def _static(shape) -> bool:
    return all(isinstance(x, int) for x in shape)


def gemm(A, B, C, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
         policy=GemmWarpPolicy.Square, clear_accum: bool = False, k_pack: int = 1,
         wg_wait: int = 0, **_ignored) -> None:
    """C (+)= op(A) @ op(B) on tiles; `policy` says how warps split C (Square/FullRow/FullCol)."""
    bld = in_kernel("T.gemm")
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
    for nm, r, ok in (("A", a, ("shared", "fragment", "local")), ("B", bb, ("shared", "fragment", "local")),
                      ("C", c, ("fragment", "local"))):
        if r.buffer.scope not in ok:
            raise TilecraftError("TC207", buffer=r.buffer.name, scope=r.buffer.scope,
                                 detail=f"gemm operand {nm} must be in {' or '.join(ok)} memory",
                                 hint="T.copy it into a T.alloc_shared / T.alloc_fragment tile first")
    policy = getattr(policy, "name", policy)
    if policy not in GemmWarpPolicy.ALL:
        raise TilecraftError("TC206", op="gemm", detail=f"unknown policy {policy!r}",
                             hint="T.GemmWarpPolicy.Square, FullRow or FullCol")
    bld.emit(Gemm(a, bb, c, bool(transpose_A), bool(transpose_B), policy, bool(clear_accum),
                  int(k_pack)))


def _reduce(kind: str, src, dst, dim: int = -1, clear: bool = True) -> None:
    bld = in_kernel(f"T.reduce_{kind}")
    s, d = to_region(src, what=f"reduce_{kind}"), to_region(dst, what=f"reduce_{kind}")
    rank = len(s.extents)
    if not -rank <= dim < rank:
        raise TilecraftError("TC206", op=f"reduce_{kind}", detail=f"dim={dim} for a {rank}-D tile",
                             hint=f"dim is in [0, {rank})")
    dim %= rank
    expect = tuple(x for i, x in enumerate(s.extents) if i != dim)
    got = tuple(d.extents)
    if got != expect and d.squeezed_shape() != tuple(x for x in expect if x != 1):
        raise TilecraftError("TC206", op=f"reduce_{kind}",
                             detail=f"reducing `{s.buffer.name}` {list(s.extents)} over dim {dim} "
                             f"gives {list(expect)}, but `{d.buffer.name}` is {list(got)}",
                             hint="the destination has the source's shape without `dim`")
    bld.emit(Reduce(kind, s, d, dim, bool(clear)))


def reduce_sum(src, dst, dim: int = -1, clear: bool = True) -> None:
    """dst = sum of src over `dim` (added to dst's old value when clear=False)."""
    _reduce("sum", src, dst, dim, clear)


def reduce_max(src, dst, dim: int = -1, clear: bool = True) -> None:
    """dst = max of src over `dim` (combined with dst's old value when clear=False)."""
    _reduce("max", src, dst, dim, clear)


def reduce_min(src, dst, dim: int = -1, clear: bool = True) -> None:
    """dst = min of src over `dim`."""
    _reduce("min", src, dst, dim, clear)


def reduce_abssum(src, dst, dim: int = -1, clear: bool = True) -> None:
    """dst = sum of |src| over `dim`."""
    _reduce("abssum", src, dst, dim, clear)


def reduce_absmax(src, dst, dim: int = -1, clear: bool = True) -> None:
    """dst = max of |src| over `dim`."""
    _reduce("absmax", src, dst, dim, clear)


def reduce(src, dst, reduce_type: str = "sum", dim: int = -1, clear: bool = True) -> None:
    _reduce(reduce_type, src, dst, dim, clear)


def cumsum(src, dst=None, dim: int = 0, reverse: bool = False) -> None:
    """Inclusive prefix sum of `src` along `dim` into `dst` (in place when dst is omitted)."""
    bld = in_kernel("T.cumsum")
    s = to_region(src, what="cumsum")
    d = to_region(dst if dst is not None else src, s, "cumsum")
    if d.squeezed_shape() != s.squeezed_shape():
        raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                             dst=d.buffer.name, dst_shape=list(d.extents))
    rank = len(s.extents)
    bld.emit(CumSum(s, d, dim % rank, bool(reverse)))


def fill(buffer, value) -> None:
    """Set every element of a tile to `value`."""
    bld = in_kernel("T.fill")
    r = to_region(buffer, what="fill")
    bld.emit(Fill(r, cast(r.dtype, as_expr(value, r.dtype))))


def clear(buffer) -> None:
    """Set every element of a tile to zero."""
    fill(buffer, 0)


def _atomic(kind: str, dst, value) -> None:
    bld = in_kernel(f"T.atomic_{kind}")
    if isinstance(value, (Buffer, BufferRegion)) or (isinstance(value, BufferLoad) and
                                                     not isinstance(dst, BufferLoad)):
        s, d = _regions(value, dst, f"atomic_{kind}")
        if _static(s.squeezed_shape()) and _static(d.squeezed_shape()) and \
                s.squeezed_shape() != d.squeezed_shape():
            raise TilecraftError("TC204", src=s.buffer.name, src_shape=list(s.extents),
                                 dst=d.buffer.name, dst_shape=list(d.extents))
        bld.emit(Atomic(kind, d, s))
        return
    if isinstance(dst, BufferLoad):
        d = BufferRegion(dst.buffer, dst.indices, (1,) * dst.buffer.ndim)
    else:
        d = to_region(dst, what=f"atomic_{kind}")
    v = value if isinstance(value, Expr) else as_expr(value, d.dtype)
    bld.emit(Atomic(kind, d, cast(d.dtype, v) if not isinstance(v, Const) else cast(d.dtype, v)))


def atomic_add(dst, value, **_ignored) -> None:
    """dst += value atomically (dst an element or a tile; value a scalar or a tile)."""
    _atomic("add", dst, value)


def atomic_max(dst, value, **_ignored) -> None:
    """dst = max(dst, value) atomically."""
    _atomic("max", dst, value)


def atomic_min(dst, value, **_ignored) -> None:
    """dst = min(dst, value) atomically."""
    _atomic("min", dst, value)
