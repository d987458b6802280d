"""Buffers (tensors at one memory scope) and rectangular regions of them.

    A = Buffer.create("A", (M, K), "float16", "global")
    A[by * 128, k * 32]        -> BufferLoad (a point; T.copy reads it as a start corner)
    A[b, i*64:(i+1)*64, h, :]  -> BufferRegion(starts=(b, i*64, h, 0), extents=(1, 64, 1, dim))
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tilecraft import dtypes as dt
from tilecraft.diagnostics import Span, TilecraftError, current_span

from .expr import BufferLoad, Const, Expr, as_expr, const_int
from .simplify import const_difference, simplify

SCOPES = ("global", "shared", "fragment", "local", "var")
_uid = itertools.count(1)

Dim = Any  # int | Expr


@dataclass(frozen=True)
class Buffer:
    """A named tensor at a memory scope: global, shared, fragment (registers, spread over the
    block's threads), local (per-thread registers) or var (a mutable scalar)."""

    name: str
    shape: tuple[Dim, ...]
    dtype: dt.DataType
    scope: str
    uid: int = 0
    span: Span | None = field(default=None, compare=False)

    @classmethod
    def create(cls, name: str, shape, dtype, scope: str, span: Span | None = None) -> "Buffer":
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        if isinstance(shape, (int, Expr)):
            shape = (shape,)
        dims = []
        for d in shape:
            c = const_int(d)
            if c is not None:
                if c <= 0:
                    raise TilecraftError("TC108", detail=f"buffer `{name}` has a dimension of size {c}",
                                         hint="every dimension must be positive")
                dims.append(c)
            elif isinstance(d, Expr):
                dims.append(d)
            else:
                raise TilecraftError("TC108", detail=f"shape entry {d!r} of `{name}` is not an integer",
                                     hint="shapes are ints or T.dynamic dimensions")
        return cls(name, tuple(dims), dt.resolve(dtype), scope, next(_uid), span or current_span())

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        return tuple(self.shape) if all(isinstance(d, int) for d in self.shape) else None

    def numel(self) -> int | None:
        s = self.static_shape
        if s is None:
            return None
        n = 1
        for d in s:
            n *= d
        return n

    def __getitem__(self, idx) -> "BufferLoad | BufferRegion":
        return index_buffer(self, idx)

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash(self.uid)

    def full_region(self) -> "BufferRegion":
        return BufferRegion(self, tuple(Const.create(0) for _ in self.shape), tuple(self.shape))


@dataclass(frozen=True)
class BufferRegion:
    """A rectangular region of a buffer: per-dimension start (Expr) and extent (int or Expr)."""

    buffer: Buffer
    starts: tuple[Expr, ...]
    extents: tuple[Dim, ...]

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.extents

    @property
    def dtype(self) -> dt.DataType:
        return self.buffer.dtype

    def squeezed_shape(self) -> tuple[Dim, ...]:
        """Extents with the size-1 dimensions dropped."""
        return tuple(e for e in self.extents if e != 1)

    def is_full(self) -> bool:
        return all(const_int(s) == 0 for s in self.starts) and tuple(self.extents) == tuple(
            self.buffer.shape)

    def __str__(self) -> str:
        from .printer import region_str

        return region_str(self)


def _check_static_bounds(buf: Buffer, dim: int, start: Expr, extent: Dim) -> None:
    size = buf.shape[dim]
    if not isinstance(size, int):
        return
    s = const_int(start)
    if s is not None and isinstance(extent, int) and (s < 0 or s + extent > size):
        raise TilecraftError("TC201", buffer=buf.name, shape=list(buf.shape),
                             detail=f"dimension {dim} covers [{s}, {s + extent}) of {size}")
    if isinstance(extent, int) and extent > size:
        raise TilecraftError("TC201", buffer=buf.name, shape=list(buf.shape),
                             detail=f"dimension {dim} takes {extent} elements of {size}")


def _check_static_start(buf: Buffer, dim: int, start: Expr) -> None:
    """A start corner's constant start must lie inside the tensor (its tile may run past)."""
    size, s = buf.shape[dim], const_int(start)
    if isinstance(size, int) and s is not None and not 0 <= s < size:
        raise TilecraftError("TC201", buffer=buf.name, shape=list(buf.shape),
                             detail=f"dimension {dim} starts at {s}, outside [0, {size})")


def index_buffer(buf: Buffer, idx) -> "BufferLoad | BufferRegion":
    """`buf[idx]`: a BufferLoad when every index is a point, a BufferRegion when any is a slice."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if buf.scope == "var" and idx in ((), (0,)):
        idx = (0,)
    if len(idx) != buf.ndim:
        raise TilecraftError("TC205", buffer=buf.name, got=len(idx), rank=buf.ndim)
    if not any(isinstance(i, slice) for i in idx):
        indices = tuple(as_expr(i) for i in idx)
        for d, i in enumerate(indices):
            c, size = const_int(i), buf.shape[d]
            if c is not None and isinstance(size, int) and not 0 <= c < size:
                raise TilecraftError("TC201", buffer=buf.name, shape=list(buf.shape),
                                     detail=f"index {c} in dimension {d} (size {size})")
        return BufferLoad.create(buf, indices)
    starts, extents = [], []
    for d, i in enumerate(idx):
        if isinstance(i, slice):
            if i.step not in (None, 1):
                raise TilecraftError("TC208", buffer=buf.name, detail="slices with a step")
            start = as_expr(0 if i.start is None else i.start)
            stop = buf.shape[d] if i.stop is None else i.stop
            extent = const_difference(stop, start)
            if extent is None:
                if isinstance(stop, Expr) or isinstance(start, Expr):
                    extent = simplify(as_expr(stop) - start)
                    if const_int(extent) is None and i.start is not None:
                        raise TilecraftError("TC208", buffer=buf.name, detail=f"[{start}:{stop}]")
            if isinstance(extent, int) and extent <= 0:
                raise TilecraftError("TC201", buffer=buf.name, shape=list(buf.shape),
                                     detail=f"empty slice in dimension {d}")
            starts.append(simplify(start))
            extents.append(extent)
        else:
            starts.append(simplify(as_expr(i)))
            extents.append(1)
        _check_static_bounds(buf, d, starts[-1], extents[-1])
    return BufferRegion(buf, tuple(starts), tuple(extents))
