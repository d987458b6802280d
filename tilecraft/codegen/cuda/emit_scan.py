"""T.cumsum: inclusive prefix sums along one dimension of a tile (reverse: from the end).

The sum runs in float (double for float64 tiles, 64-bit integers for integer tiles) and is
rounded once per stored element, as the interpreter rounds its float64 sums (interp/ops/reduce.py).
Where the tiles live decides who scans:

* global / shared (any mix): rows (the tile without `dim`) go round-robin to threads, each
  summing its row serially; when there are fewer rows than threads and rows of 32 or more, a
  warp takes each row instead, 32 elements per step (tc::warp_inclusive_scan + a carry). The
  KernelEmitter puts barriers around it (it writes shared memory, see emitter.py).

      T.cumsum(A_s, B_s, dim=1)  ->  for (int c = tid; c < 64; c += 128) {      // 64 rows
                                       float acc = 0.f;
                                       for (int kk = 0; kk < 16; ++kk) {
                                         acc += A_s[c * 16 + kk]; B_s[c * 16 + kk] = acc; } }

* local (T.alloc_local): every thread scans its own copy, fully unrolled (registers).
* fragment: when every thread holds whole rows along `dim` (no thread mode in `dim`), each
  thread scans its registers in straight-line code; other layouts need values from other
  threads: TC502, copy the tile to shared memory and scan it there.
"""

from __future__ import annotations

import math

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import CumSum

from .cexpr import ctype, zero
from .emit_copy import _coords
from .regions import in_bounds, region_index, tile_dims, tile_shape

_MEMORY = ("global", "shared")


def _acc_type(op: CumSum) -> str:
    s, d = op.src.dtype, op.dst.dtype
    if s.name == "float64" or d.name == "float64":
        return "double"
    if s.is_float or d.is_float:
        return "float"
    return "tc::u64" if s.name == "uint64" else "tc::i64"


def emit_cumsum(em, op: CumSum) -> None:
    s, d = op.src.buffer, op.dst.buffer
    em.comment(op, f"T.cumsum {s.name} ({s.scope}) -> {d.name} ({d.scope}) over dim {op.dim}"
               + (", reversed" if op.reverse else ""))
    shape = tile_shape(op.src)
    if not all(isinstance(n, int) for n in shape) or tile_shape(op.dst) != shape:
        raise TilecraftError("TC502", span=op.span, detail="T.cumsum over regions of different "
                             "or dynamic shapes", hint="scan tiles of one constant shape")
    if s.scope in _MEMORY and d.scope in _MEMORY:
        return _memory_scan(em, op, shape)
    if s.scope == "local" and d.scope == "local":
        return _local_scan(em, op, shape)
    if s.scope == "fragment" and d.scope == "fragment":
        return _fragment_scan(em, op)
    raise TilecraftError("TC502", span=op.span, detail=f"T.cumsum from {s.scope} to {d.scope}",
                         hint="scan shared (or global) tiles into shared or global memory, "
                         "fragments into fragments of the same layout")


def _scan_axis(op: CumSum, shape: tuple[int, ...]) -> tuple[int | None, int]:
    """Position of `dim` among the tile's (squeezed) dimensions, and the scan length; a scan
    over a dimension of extent 1 is a copy (position None, length 1)."""
    dims = tile_dims(op.src)
    if op.dim not in dims:
        return None, 1
    k = dims.index(op.dim)
    return k, shape[k]


def _element_coords(shape, k, row: str, kk: str, length: int, reverse: bool) -> list[str]:
    """Tile coordinates of element `kk` of row `row` (the tile without axis k, row-major)."""
    rest = tuple(n for i, n in enumerate(shape) if i != k)
    coords = _coords(rest, row) if rest else []
    if k is not None:
        coords.insert(k, f"({length - 1} - {kk})" if reverse else kk)
    return coords


def _load(em, region, coords: list[str], t: str) -> str:
    """The element at tile coordinates `coords` as type t (0 outside a global tensor)."""
    idx = region_index(em, region, coords)
    ref = em.ref(region.buffer, idx)
    x = f"tc::cast<{t}>({ref})"
    g = in_bounds(em, region, idx)
    return f"(({g}) ? {x} : {zero(t)})" if g else x


def _store(em, region, coords: list[str], value: str, extra_guard: str | None = None) -> None:
    idx = region_index(em, region, coords)
    ref = em.ref(region.buffer, idx)
    conds = [c for c in (extra_guard, in_bounds(em, region, idx)) if c]
    st = f"{ref} = tc::cast<{ctype(region.dtype)}>({value});"
    em.w(f"if ({' && '.join(conds)}) {st}" if conds else st)


def _memory_scan(em, op: CumSum, shape: tuple[int, ...]) -> None:
    k, length = _scan_axis(op, shape)
    rows = math.prod(shape) // length
    nt = em.state.num_threads
    t = _acc_type(op)
    em.open("")
    if length >= 32 and rows < nt:
        _warp_rows(em, op, shape, k, length, rows, t)
    else:
        _serial_rows(em, op, shape, k, length, t, f"for (int c = tid; c < {rows}; c += {nt})")
    em.close()


def _serial_rows(em, op: CumSum, shape, k, length: int, t: str, rows_loop: str,
                 unroll: bool = False) -> None:
    """Each row `c` of `rows_loop` scanned element by element, the running sum in `acc`."""
    if unroll:
        em.w("#pragma unroll")
    em.open(rows_loop)
    em.w(f"{t} acc = {zero(t)};")
    if unroll:
        em.w("#pragma unroll")
    em.open(f"for (int kk = 0; kk < {length}; ++kk)")
    coords = _element_coords(shape, k, "c", "kk", length, op.reverse)
    em.w(f"acc += {_load(em, op.src, coords, t)};")
    _store(em, op.dst, coords, "acc")
    em.close()
    em.close()


def _warp_rows(em, op: CumSum, shape, k, length: int, rows: int, t: str) -> None:
    """A warp per row, 32 elements per step: lane `lane` takes element it + lane, the warp scan
    gives the prefix inside the step, `acc` carries the sum of the steps before."""
    warps = em.state.num_threads // 32
    em.w("const int lane = tid % 32;")
    em.open(f"for (int c = tid / 32; c < {rows}; c += {warps})")
    em.w(f"{t} acc = {zero(t)};")
    em.open(f"for (int it = 0; it < {length}; it += 32)")
    em.w("const int kk = it + lane;")
    coords = _element_coords(shape, k, "c", "kk", length, op.reverse)
    em.w(f"{t} val = {zero(t)};")
    em.w(f"if (kk < {length}) val = {_load(em, op.src, coords, t)};")
    em.w("val = tc::warp_inclusive_scan(val) + acc;")
    _store(em, op.dst, coords, "val", f"kk < {length}")
    em.w("acc = __shfl_sync(0xffffffffu, val, 31);")
    em.close()
    em.close()


def _local_scan(em, op: CumSum, shape: tuple[int, ...]) -> None:
    k, length = _scan_axis(op, shape)
    rows = math.prod(shape) // length
    t = _acc_type(op)
    em.open("")
    _serial_rows(em, op, shape, k, length, t, f"for (int c = 0; c < {rows}; ++c)", unroll=True)
    em.close()


def _fragment_scan(em, op: CumSum) -> None:
    s, d = op.src.buffer, op.dst.buffer
    ls, ld = em.state.layouts[s], em.state.layouts[d]
    if not (op.src.is_full() and op.dst.is_full()):
        raise TilecraftError("TC502", span=op.span, detail="T.cumsum of part of a fragment",
                             hint="scan whole fragments, or copy the part to shared memory")
    if ls != ld:
        raise TilecraftError("TC502", span=op.span, detail=f"T.cumsum from fragment `{s.name}` "
                             f"({ls}) into `{d.name}` of another layout ({ld})",
                             hint="scan in place, or into a fragment only written by this scan")
    if any(m in ls.spatial_modes for m in ls.dim_modes[op.dim]):
        raise TilecraftError("TC502", span=op.span, detail=f"T.cumsum of fragment `{s.name}` "
                             f"over dim {op.dim}, which its layout {ls} spreads over threads",
                             hint="T.copy the tile to shared memory and T.cumsum it there")
    # Registers of one row differ only in `dim`; group thread 0's registers by the rest.
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for li in range(ls.local_size):
        idx = ls.map(0, li)
        rest = tuple(x for i, x in enumerate(idx) if i != op.dim)
        groups.setdefault(rest, []).append((idx[op.dim], li))
    t, dt = _acc_type(op), ctype(d.dtype)
    em.open("")
    em.w(f"{t} acc;")
    for row in groups.values():
        row.sort(reverse=op.reverse)
        em.w(f"acc = {zero(t)};  // a row of {len(row)} registers")
        for _, li in row:
            em.w(f"acc += tc::cast<{t}>({em.name_buf(s)}[{li}]); {em.name_buf(d)}[{li}] = tc::cast<{dt}>(acc);")
    em.close()
