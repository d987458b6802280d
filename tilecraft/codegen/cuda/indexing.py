"""Index arithmetic shared by the emitters: fragment layouts, shared-memory swizzles, strides.

* `frag_coords(layout, "tid", "li")`: C expressions of the logical index that local element
  `li` of thread `tid` holds (from the layout's modes: digits of tid and li, raveled per dim).
* `local_map(src, dst, keep, span)`: the local index in `dst` of the element a thread holds at
  local `li` of `src`, projected onto the dims `keep`, as a C expression in `li` (affine in the
  digits of li, so it folds to a constant once the loop over li is unrolled).
* `swizzled_offset(rows, cols, r, c)`: element offset in a 16-bit swizzled tile, the canonical
  32/64/128-byte swizzle of TMA and wgmma: column blocks of 16, 32 or 64 elements, each
  row-major, 16-byte chunk k of row r stored at chunk k ^ ((r >> s) & (p - 1)) of its block
  (p = chunks per block row, s = log2(8 / p)); 8 consecutive rows reading the same logical
  chunk (ldmatrix, cp.async) then touch 8 distinct 16-byte bank groups.
"""

from __future__ import annotations

import math

import numpy as np

from tilecraft.diagnostics import TilecraftError


def _digit(var: str, stride: int, size: int, total: int) -> str:
    if size == 1:
        return "0"
    e = var if stride == 1 else f"({var} / {stride})"
    return e if stride * size >= total else f"({e} % {size})"


def frag_coords(layout, tid: str, li: str) -> list[str]:
    digit: dict[int, str] = {}
    ss, ls = layout.spatial_sizes, layout.local_sizes
    nt, nl = layout.num_threads, layout.local_size
    for k, m in enumerate(layout.spatial_modes):
        if m >= 0:
            digit[m] = _digit(tid, math.prod(ss[k + 1:]), ss[k], nt)
    for k, m in enumerate(layout.local_modes):
        digit[m] = _digit(li, math.prod(ls[k + 1:]), ls[k], nl)
    out = []
    for group in layout.dim_modes:
        terms, stride = [], 1
        for m in reversed(group):
            d = digit.get(m, "0")
            if d != "0":
                terms.append(d if stride == 1 else f"{d} * {stride}")
            stride *= layout.mode_shape[m]
        out.append(" + ".join(reversed(terms)) if terms else "0")
    return out


def replica_index(layout, tid: str) -> str | None:
    """C expression that is 0 on exactly one thread of each replica group (None if none)."""
    ss = layout.spatial_sizes
    terms = []
    for k, m in enumerate(layout.spatial_modes):
        if m < 0:
            terms.append(_digit(tid, math.prod(ss[k + 1:]), ss[k], layout.num_threads))
    return " + ".join(terms) if terms else None


def _register_table(src, dst, keep: tuple[int, ...], span) -> list[int]:
    """For each local index of `src`, the local index in `dst` of the same element on the same
    thread (numpy over all threads at once: one lookup per (thread, register) pair)."""
    nt = src.num_threads
    st = src.index_table()[..., list(keep)]          # [threads, src locals, dims]
    dt = dst.index_table()                           # [threads, dst locals, dims]
    size = math.prod(dst.shape)
    rows = np.arange(nt)[:, None]
    key_d = (rows * size + np.ravel_multi_index(np.moveaxis(dt, -1, 0), dst.shape)).ravel()
    loc_d = np.broadcast_to(np.arange(dst.local_size), (nt, dst.local_size)).ravel()
    order = np.argsort(key_d, kind="stable")
    key_d, loc_d = key_d[order], loc_d[order]
    key_s = rows * size + np.ravel_multi_index(np.moveaxis(st, -1, 0), dst.shape)
    pos = np.minimum(np.searchsorted(key_d, key_s), len(key_d) - 1)
    loc = np.where(key_d[pos] == key_s, loc_d[pos], -1)  # [threads, src locals]
    if (loc < 0).any():
        t, li = (int(x[0]) for x in np.nonzero(loc < 0))
        raise TilecraftError("TC501", span=span, buffer="(fragment)",
                             detail=f"thread {t} needs element {tuple(st[t, li])} of a {dst} "
                             "fragment it does not hold", hint="")
    if (loc != loc[0]).any():
        raise TilecraftError("TC502", span=span, detail="a fragment access whose register "
                             "depends on the thread", hint="")
    return loc[0].tolist()


def local_map(src, dst, keep: tuple[int, ...], span=None) -> str:
    """`dst` local index of the element at local `li` of `src` (same thread), as C in `li`."""
    if src.num_threads != dst.num_threads:
        raise TilecraftError("TC501", span=span, buffer="(fragment)",
                             detail=f"layouts over {src.num_threads} and {dst.num_threads} "
                             "threads", hint="")
    table = _register_table(src, dst, keep, span)
    if table == list(range(src.local_size)):
        return "li"
    sizes = src.local_sizes
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
    base = table[0]
    coeffs = [table[s] - base if n > 1 else 0 for s, n in zip(strides, sizes)]
    for li in range(src.local_size):
        pred = base + sum(((li // s) % n) * c for s, n, c in zip(strides, sizes, coeffs))
        if pred != table[li]:
            raise TilecraftError("TC502", span=span, detail="a fragment access that is not "
                                 "affine in the registers", hint="")
    terms = [str(base)] if base else []
    for s, n, c in zip(strides, sizes, coeffs):
        if c:
            d = _digit("li", s, n, src.local_size)
            terms.append(d if c == 1 else f"{d} * {c}")
    return " + ".join(terms) if terms else "0"


def swizzle_params(cols: int) -> tuple[int, int]:
    """(p, s) of a 16-bit tile with rows of `cols` elements: within each column block
    (`swizzle_block`), 16-byte chunk k of row r is stored at chunk k ^ ((r >> s) & (p - 1));
    p = 1 means no swizzle."""
    block = swizzle_block(cols)
    p = block // 8 if block else 1
    return p, int(math.log2(8 // p))


def swizzle_block(cols: int) -> int:
    """Elements per row of one swizzle atom: the widest of 128, 64, 32 bytes dividing a row of
    16-bit elements (0 when none does)."""
    for width in (64, 32, 16):
        if cols % width == 0:
            return width
    return 0


def swizzled_offset(rows: int, cols: int, r: str, c: str) -> str:
    """Element offset of (r, c) in the canonical swizzled layout of a 16-bit (rows, cols) tile
    (the TMA / wgmma 32/64/128-byte swizzle, `tilecraft.layout.make_swizzled_layout`): column
    blocks of `swizzle_block(cols)` elements one after another, each row-major with its chunks
    XOR-permuted per row."""
    p, s = swizzle_params(cols)
    if p == 1:
        return f"({r}) * {cols} + ({c})"
    block = swizzle_block(cols)
    row = f"({r})" if s == 0 else f"(({r}) >> {s})"
    if block == cols:
        return f"({r}) * {cols} + (((({c}) >> 3) ^ ({row} & {p - 1})) << 3) + (({c}) & 7)"
    shift = block.bit_length() - 1
    return (f"(({c}) >> {shift}) * {rows * block} + ({r}) * {block} + ((((({c}) >> 3) & "
            f"{p - 1}) ^ ({row} & {p - 1})) << 3) + (({c}) & 7)")
