"""Primitive register layouts (Tilus section 4.1) and replication.

* `local(2, 3)`          one thread holds all 6 elements; local i -> (i // 3, i % 3)
* `spatial(2, 3)`        6 threads hold one element each; thread t -> (t // 3, t % 3)
* `column_local(2, 3)`   like local, local index column-major: i -> (i % 2, i // 2)
* `column_spatial(2, 3)` like spatial, thread index column-major: t -> (t % 2, t // 2)
* `replicate(n)`         a single element (shape (1,)*ndim) held by n threads

Each accepts the extents as arguments or as one sequence: `local(2, 3) == local((2, 3))`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .fragment import Fragment


def _extents(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        return tuple(shape[0])
    return tuple(shape)


def local(*shape: int) -> Fragment:
    """All elements in one thread, local index row-major over `shape`."""
    s = _extents(shape)
    return Fragment.create(s, s, (), tuple(range(len(s))))


def spatial(*shape: int) -> Fragment:
    """One element per thread, thread index row-major over `shape`."""
    s = _extents(shape)
    return Fragment.create(s, s, tuple(range(len(s))), ())


def column_local(*shape: int) -> Fragment:
    """All elements in one thread, local index column-major (first dimension fastest)."""
    s = _extents(shape)
    return Fragment.create(s, s, (), tuple(reversed(range(len(s)))))


def column_spatial(*shape: int) -> Fragment:
    """One element per thread, thread index column-major (first dimension fastest)."""
    s = _extents(shape)
    return Fragment.create(s, s, tuple(reversed(range(len(s)))), ())


def replicate(n: int, ndim: int = 1) -> Fragment:
    """One element of a rank-`ndim` tile of shape (1, ..., 1), held by `n` threads."""
    if n < 1:
        raise ValueError(f"replicate needs n >= 1, got {n}")
    return Fragment.create((1,) * ndim, (), (-n,) if n > 1 else (), ())
