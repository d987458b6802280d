"""Shared helpers for the layout tests: small layout universes, hypothesis strategies, references."""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
from hypothesis import strategies as st

from tilecraft.layout import (
    Fragment,
    column_local,
    column_spatial,
    local,
    replicate,
    spatial,
)

KINDS = (local, spatial, column_local, column_spatial)


@cache
def primitives_2d(sizes: tuple[int, ...] = (1, 2, 3, 4)) -> tuple[Fragment, ...]:
    """Distinct rank-2 primitives with extents from `sizes`, plus replications by 2 and 3."""
    prims = {k(a, b) for a, b in itertools.product(sizes, sizes) for k in KINDS}
    prims |= {replicate(2, 2), replicate(3, 2)}
    return tuple(sorted(prims, key=repr))


def weight(layout: Fragment) -> int:
    """Threads x locals: the size of the layout's domain."""
    return layout.num_threads * layout.local_size


@cache
def universe(max_factors: int = 2, max_weight: int = 32) -> tuple[Fragment, ...]:
    """Distinct layouts that are products of up to `max_factors` small rank-2 primitives."""
    prims = primitives_2d()
    out: set[Fragment] = set()
    for n in range(1, max_factors + 1):
        for combo in itertools.product(prims, repeat=n):
            if np.prod([weight(p) for p in combo]) > max_weight:
                continue
            layout = combo[0]
            for p in combo[1:]:
                layout = layout * p
            out.add(layout)
    return tuple(sorted(out, key=repr))


def table(layout: Fragment) -> np.ndarray:
    """[T, N, ndim] logical index of every (thread, local) pair, computed pointwise with map()."""
    out = np.zeros((layout.num_threads, layout.local_size, layout.ndim), dtype=np.int64)
    for t in range(layout.num_threads):
        for i in range(layout.local_size):
            out[t, i] = layout.map(t, i)
    return out


def kron_reference(f: Fragment, g: Fragment) -> np.ndarray:
    """h(t, i) = f(t // Tg, i // Ng) * Sg + g(t % Tg, i % Ng), as a [T, N, ndim] table."""
    tf, tg = f.index_table(), g.index_table()
    t_n, l_n = f.num_threads * g.num_threads, f.local_size * g.local_size
    t, i = np.meshgrid(np.arange(t_n), np.arange(l_n), indexing="ij")
    outer = tf[t // g.num_threads, i // g.local_size]
    inner = tg[t % g.num_threads, i % g.local_size]
    return outer * np.array(g.shape) + inner


def signature(layout: Fragment) -> tuple:
    """Everything that defines the layout as a function."""
    return (layout.shape, layout.num_threads, layout.local_size, layout.index_table().tobytes())


@st.composite
def primitive(draw, ndim: int = 2, max_extent: int = 4) -> Fragment:
    """A random primitive of rank `ndim`, or a replication."""
    if draw(st.integers(0, 9)) == 0:
        return replicate(draw(st.integers(2, 4)), ndim)
    kind = draw(st.sampled_from(KINDS))
    shape = draw(st.lists(st.integers(1, max_extent), min_size=ndim, max_size=ndim))
    return kind(*shape)


@st.composite
def fragments(draw, ndim: int = 2, max_factors: int = 3, max_weight: int = 256) -> Fragment:
    """A random product of 1..max_factors primitives whose domain stays below max_weight."""
    layout = draw(primitive(ndim))
    for _ in range(draw(st.integers(0, max_factors - 1))):
        nxt = draw(primitive(ndim))
        if weight(layout) * weight(nxt) <= max_weight:
            layout = layout * nxt
    return layout
