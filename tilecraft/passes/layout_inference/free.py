"""The free layout: every thread busy, 16-byte vectors where the shape allows, coalesced.

For a tile of shape (..., n) over T threads with e-byte elements: each thread holds v
contiguous elements of the last dimension, consecutive threads take consecutive v-chunks along
the last dimension, then rows (innermost leading dimension first); what is left repeats in
local registers. A row takes at most one warp's threads while other rows could fill the other
warps (a 4 x 4096 tile on 4 warps: a row per warp), so row reductions stay in warp shuffles.

v starts at 16 / e (a 16-byte vector) and halves while that lets more threads hold elements of
a tile too small for all of them at full vectors: a thread idling as a replica costs more than
a narrower access (a warp still moves whole 32-byte sectors). Only a tile with fewer elements
than threads, or whose shape does not split over them, stays replicated (each element held by
several threads, all computing the same value).

    free_layout((128, 64), 128, 2)  = local(8, 1).spatial(16, 8).local(1, 8)
    free_layout((256,), 128, 2)     = spatial(128).local(2)        (was replicate(4) at v = 8)
    free_layout((64,), 128, 4)      = replicate(2).spatial(64)
    free_layout((5, 40), 128, 8)    = local(5, 5).replicate(16).spatial(1, 8)  (was 50 registers)
"""

from __future__ import annotations

import math

from tilecraft.layout import local, replicate, spatial


def _split(shape: tuple[int, ...], num_threads: int, v: int):
    """(threads over each leading dim, threads over the last dim) for vector width v."""
    n = shape[-1]
    tc = math.gcd(n // v, num_threads)
    rows = math.prod(shape[:-1])
    while tc > 32 and math.gcd(rows, num_threads // tc) < math.gcd(rows, 2 * num_threads // tc):
        tc //= 2  # whole rows per warp while rows are left for the other warps
    thr, left = [], num_threads // tc
    for d in reversed(shape[:-1]):  # rows, innermost leading dimension first
        g = math.gcd(d, left)
        thr.insert(0, g)
        left //= g
    return thr, tc


def _vector(shape: tuple[int, ...], num_threads: int, elem_bytes: int, narrow: bool) -> int:
    """The widest v <= 16 / e dividing the last dim that keeps the most threads busy (with
    `narrow`; else the 16-byte vector)."""
    v = math.gcd(shape[-1], max(1, 16 // elem_bytes))
    if not narrow:
        return v

    def busy(w: int) -> int:
        thr, tc = _split(shape, num_threads, w)
        return math.prod(thr) * tc

    while v > 1 and busy(v) < num_threads and busy(v // 2) > busy(v):
        v //= 2
    return v


def free_layout(shape: tuple[int, ...], num_threads: int, elem_bytes: int, narrow: bool = True):
    """The free layout of a tile; `narrow=False` keeps whole 16-byte vectors (rows of a
    fragment T.cumsum scans stay in one thread where they fit one)."""
    v = _vector(shape, num_threads, elem_bytes, narrow)
    thr, tc = _split(shape, num_threads, v)
    n = shape[-1]
    rep = num_threads // (math.prod(thr) * tc)
    loc = [d // t for d, t in zip(shape[:-1], thr)]
    lead = (1,) * (len(shape) - 1)
    lay = local(*loc, n // (v * tc)) * spatial(*thr, tc) * local(*lead, v)
    return replicate(rep, len(shape)) * lay if rep > 1 else lay
