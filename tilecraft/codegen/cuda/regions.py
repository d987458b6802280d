"""Regions of memory buffers as seen by a tile: squeezed tile coordinates -> buffer indices,
and the bounds guards that make partial tiles safe (reads give 0, writes are dropped)."""

from __future__ import annotations

from tilecraft.ir import BufferRegion, const_int
from tilecraft.ir.expr import BinOp, Cast, Var
from tilecraft.ir.ranges import bound
from tilecraft.ir.simplify import linear_form


def tile_dims(r: BufferRegion) -> list[int]:
    """Buffer dimensions that the tile spans (extent != 1)."""
    return [d for d, e in enumerate(r.extents) if e != 1]


def tile_shape(r: BufferRegion) -> tuple[int, ...]:
    return tuple(r.extents[d] for d in tile_dims(r))


def region_index(em, r: BufferRegion, coords: list[str]) -> list[str]:
    out, k = [], 0
    dims = set(tile_dims(r))
    starts = em.index_exprs(r.buffer, r.starts)
    for d, s in enumerate(r.starts):
        base = starts[d]
        if d in dims:
            c = coords[k]
            k += 1
            out.append(c if base == "0" else f"{base} + {c}")
        else:
            out.append(base)
    return out


def in_bounds(em, r: BufferRegion, index: list[str], last_vec: int = 1) -> str | None:
    """C condition that `index` (from region_index) lies inside the buffer, or None if always.
    Both ends are checked: a start that may be negative (`bx * 40 - 8`) puts the tile's first
    elements before the tensor, where the interpreter reads 0 and drops writes (in a row-major
    tensor they would otherwise land in the previous row)."""
    if r.buffer.scope != "global":
        return None
    conds = []
    for d, (ix, n, s, e) in enumerate(zip(index, r.buffer.shape, r.starts, r.extents)):
        if isinstance(n, int) and e == 1 and const_int(s) is not None:
            continue  # a constant start outside the tensor is TC201
        rng = bound(s, em.ranges)
        if not _nonneg(em, s):
            conds.append(f"({ix}) >= 0")
        if isinstance(n, int) and isinstance(e, int) and rng is not None and rng[1] + e <= n:
            continue  # the whole tile ends inside for every block and iteration
        conds.append(f"({ix}) < {em.dim(n)}")
    return " && ".join(conds) if conds else None


def _nonneg(em, e) -> bool:
    """`e` is >= 0 for every block, thread and iteration. Needs only a lower bound, so that a
    dynamic grid (block indices without an upper bound) still proves `bx * 1024 + ...` >= 0."""
    rng = bound(e, em.ranges)
    if rng is not None:
        return rng[0] >= 0
    if isinstance(e, int):
        return e >= 0
    dtype = getattr(e, "dtype", None)
    if dtype is None or not dtype.is_integer:
        return False
    if dtype.kind == "uint":
        return True
    if isinstance(e, Var):
        k = em.state.kernel
        return k is not None and (e in k.block_vars or e in k.thread_vars)
    if isinstance(e, Cast):
        src = getattr(e.value, "dtype", None)
        wide = src is not None and src.is_integer and (
            dtype.bits > src.bits or dtype.bits == src.bits and src.kind == "int")
        return wide and _nonneg(em, e.value)  # (a uint32 >= 2^31 cast to int32 is negative)
    if isinstance(e, BinOp) and e.op in ("+", "*", "min", "max"):
        return _nonneg(em, e.a) and _nonneg(em, e.b)
    if isinstance(e, BinOp) and e.op in ("//", "%"):
        d = bound(e.b, em.ranges)
        return d is not None and d[0] > 0 and (e.op == "%" or _nonneg(em, e.a))
    return False


def _multiple_of(s, m: int) -> bool:
    form = linear_form(s)
    if form is None:
        return False
    terms, c = form
    return c % m == 0 and all(v % m == 0 for v in terms.values())


def vector_aligned(r: BufferRegion, v: int) -> bool:
    """The region's last dimension can be read in aligned chunks of v elements."""
    if r.extents[-1] == 1 or not isinstance(r.extents[-1], int) or r.extents[-1] % v:
        return False
    n = r.buffer.shape[-1]
    if not isinstance(n, int) or n % v:
        return False
    return _multiple_of(r.starts[-1], v)
