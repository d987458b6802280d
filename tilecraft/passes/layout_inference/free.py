"""The free layout: fewest registers per thread, 16-byte vectors, coalesced threads.

For a tile of shape (..., n) over T threads with e-byte elements: each thread holds v =
16 / e contiguous elements of the last dimension (fewer if n is small), consecutive threads
take consecutive v-chunks along the last dimension, then rows; what is left repeats in local
registers. When the tile has fewer elements than T * v, threads are replicated (each element is
held by several threads, all computing the same value).

    free_layout((128, 64), 128, 2)  = local(8, 1).spatial(16, 8).local(1, 8)
    free_layout((64,), 128, 4)      = replicate(8).spatial(16).local(4)
"""

from __future__ import annotations

import math

from tilecraft.layout import local, replicate, spatial


def free_layout(shape: tuple[int, ...], num_threads: int, elem_bytes: int):
    if len(shape) == 1:
        (n,) = shape
        v = math.gcd(n, max(1, 16 // elem_bytes))
        t = math.gcd(n // v, num_threads)
        rest = n // (v * t)
        lay = local(rest) * spatial(t) * local(v)
        return replicate(num_threads // t) * lay if num_threads // t > 1 else lay
    rows = math.prod(shape[:-1])
    n = shape[-1]
    v = math.gcd(n, max(1, 16 // elem_bytes))
    tc = math.gcd(n // v, num_threads)
    tr = math.gcd(rows, num_threads // tc)
    rep = num_threads // (tc * tr)
    lead = (1,) * (len(shape) - 2)
    # distribute tr over the leading dimensions, innermost first
    thr, loc, left = [], [], tr
    for d in reversed(shape[:-1]):
        g = math.gcd(d, left)
        thr.insert(0, g)
        loc.insert(0, d // g)
        left //= g
    lay = local(*loc, n // (v * tc)) * spatial(*thr, tc) * local(*lead, 1, v)
    if rep > 1:
        lay = replicate(rep, len(shape)) * lay
    return lay
