"""Regions of memory buffers as seen by a tile: squeezed tile coordinates -> buffer indices,
and the bounds guards that make partial tiles safe (reads give 0, writes are dropped)."""

from __future__ import annotations

from tilecraft.ir import BufferRegion, const_int
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
    """C condition that `index` (from region_index) lies inside the buffer, or None if always."""
    if r.buffer.scope != "global":
        return None
    conds = []
    for d, (ix, n, s, e) in enumerate(zip(index, r.buffer.shape, r.starts, r.extents)):
        if isinstance(n, int) and e == 1 and const_int(s) is not None:
            continue
        hi = bound(s, em.ranges)
        if isinstance(n, int) and isinstance(e, int) and hi is not None and hi[1] + e <= n:
            continue  # the whole tile is inside for every block and iteration
        conds.append(f"({ix}) < {em.dim(n)}")
    return " && ".join(conds) if conds else None


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
