"""`SharedLayout`: shared/global memory layouts, logical index -> element offset.

A layout splits every dimension into modes (outer first), gives each mode a stride, and optionally
applies a `Swizzle` to the resulting linear offset:

    offset(idx) = swizzle(sum(digit_m * stride_m over the modes m of all dimensions))

Plain row-major (8, 64) is shape=(8, 64) mode_shape=(8, 64) mode_strides=(64, 1); a tile made of
column blocks of 64 elements, each block row-major, is mode_shape=(8, 2, 64) with strides
(64, 512, 1) (the column dimension split into (2, 64)). `tile_to_shape` builds such layouts.

`offset(*idx)` uses only `+ * // % ^ >> &`, so it accepts ints, numpy int arrays, and (later)
symbolic IR expressions that overload those operators; the swizzle's (bits, base, shift) are fields
so a code generator can also emit the XOR directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ._util import as_shape, group_modes, prod, unravel
from .errors import LayoutError


@dataclass(frozen=True)
class Swizzle:
    """CUTLASS `Swizzle<bits, base, shift>` on an element offset.

    `apply(x) = x ^ ((x >> shift) & (mask << base))` with `mask = 2**bits - 1`: the `bits` offset
    bits starting at `base` are XORed with the `bits` bits starting at `base + shift`. It is an
    involution (hence a bijection) when `shift >= bits`, and maps every aligned block of
    `2**(base + bits)` elements onto itself.
    """

    bits: int
    base: int
    shift: int

    def __post_init__(self) -> None:
        if self.bits < 0 or self.base < 0 or self.shift < self.bits:
            raise LayoutError(f"invalid swizzle {self}: need bits, base >= 0 and shift >= bits")

    @property
    def mask(self) -> int:
        """`2**bits - 1`."""
        return (1 << self.bits) - 1

    @property
    def period(self) -> int:
        """Elements after which the XOR pattern repeats (`2**(base + shift + bits)`)."""
        return 1 << (self.base + self.shift + self.bits)

    def apply(self, offset: Any) -> Any:
        """Swizzled offset (ints, numpy arrays or expressions)."""
        return offset ^ ((offset >> self.shift) & (self.mask << self.base))

    __call__ = apply


@dataclass(frozen=True)
class SharedLayout:
    """Logical index -> element offset in shared or global memory, in canonical form."""

    shape: tuple[int, ...]
    mode_shape: tuple[int, ...]
    mode_strides: tuple[int, ...]
    swizzle: Swizzle | None = None

    @classmethod
    def create(
        cls,
        shape: Sequence[int],
        mode_shape: Sequence[int] | None = None,
        mode_strides: Sequence[int] | None = None,
        swizzle: Swizzle | None = None,
    ) -> SharedLayout:
        """Validate and normalise: drop size-1 modes, merge contiguous adjacent modes.

        `mode_shape` defaults to `shape`; `mode_strides` defaults to row-major strides.
        """
        shape = as_shape(shape)
        modes = as_shape(shape if mode_shape is None else mode_shape, "mode_shape")
        strides = tuple(mode_strides) if mode_strides is not None else _row_major_strides(modes)
        if len(strides) != len(modes):
            raise LayoutError(f"{len(modes)} modes but {len(strides)} strides")
        try:
            groups = group_modes(shape, modes)
        except ValueError as err:
            raise LayoutError(str(err)) from None
        out_modes, out_strides = [], []
        for group in groups:
            merged: list[list[int]] = []
            for m in group:
                if modes[m] == 1:
                    continue
                if merged and merged[-1][1] == modes[m] * strides[m]:
                    merged[-1] = [merged[-1][0] * modes[m], strides[m]]
                else:
                    merged.append([modes[m], strides[m]])
            out_modes += [size for size, _ in merged]
            out_strides += [int(stride) for _, stride in merged]
        if swizzle is not None and swizzle.bits == 0:
            swizzle = None
        return cls(shape, tuple(out_modes), tuple(out_strides), swizzle)

    @cached_property
    def dim_modes(self) -> tuple[tuple[int, ...], ...]:
        """For each dimension, the indices of its modes (outer first)."""
        return tuple(tuple(g) for g in group_modes(self.shape, self.mode_shape))

    @property
    def ndim(self) -> int:
        """Rank."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of logical elements."""
        return prod(self.shape)

    @property
    def cosize(self) -> int:
        """One past the largest unswizzled offset (the allocation size in elements)."""
        return 1 + sum((n - 1) * s for n, s in zip(self.mode_shape, self.mode_strides))

    @property
    def strides(self) -> tuple[int, ...]:
        """Per-dimension strides; LayoutError when a dimension is split into several modes."""
        if any(len(g) > 1 for g in self.dim_modes):
            raise LayoutError(f"{self} is hierarchical; it has no per-dimension strides")
        return tuple(self.mode_strides[g[0]] if g else 0 for g in self.dim_modes)

    def linear(self, *idx: Any) -> Any:
        """Offset before swizzling (ints, numpy arrays or expressions)."""
        if len(idx) != self.ndim:
            raise LayoutError(f"expected {self.ndim} indices, got {len(idx)}")
        terms = []
        for x, group in zip(idx, self.dim_modes):
            sizes = [self.mode_shape[m] for m in group]
            digits = [x] if len(group) == 1 else unravel(x, sizes)
            for d, m in zip(digits, group):
                stride = self.mode_strides[m]
                if stride:
                    terms.append(d if stride == 1 else d * stride)
        out: Any = terms[0] if terms else 0
        for term in terms[1:]:
            out = out + term
        return out

    def offset(self, *idx: Any) -> Any:
        """Element offset of logical index `idx` (ints, numpy int arrays or expressions)."""
        out = self.linear(*idx)
        return out if self.swizzle is None else self.swizzle.apply(out)

    __call__ = offset

    def offsets(self) -> np.ndarray:
        """Array of `shape` holding every element's offset."""
        grids = np.meshgrid(*(np.arange(n) for n in self.shape), indexing="ij")
        return np.broadcast_to(np.asarray(self.offset(*grids)), self.shape).astype(np.int64)

    def is_bijective(self) -> bool:
        """True when the offsets are exactly 0 .. size-1 (a compact, one-to-one layout)."""
        return bool(np.array_equal(np.sort(self.offsets(), axis=None), np.arange(self.size)))

    def with_swizzle(self, swizzle: Swizzle | None) -> SharedLayout:
        """The same layout with another swizzle."""
        return SharedLayout.create(self.shape, self.mode_shape, self.mode_strides, swizzle)

    def show(self, group: int = 1) -> str:
        """Grid of offsets (with `group=g`: offset // g of each g-element column group)."""
        from .show import shared_grid

        return shared_grid(self, group)

    def plot(self, path: str, dtype_bits: int | None = None) -> None:
        """Draw the offsets to a PNG (coloured by 16-byte bank group when dtype_bits is given)."""
        from .show import plot_shared

        plot_shared(self, path, dtype_bits)


Layout = SharedLayout


def _row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(prod(shape[k + 1 :]) for k in range(len(shape)))


def row_major(*shape: int) -> SharedLayout:
    """Row-major (C order) layout: the last index is contiguous."""
    return SharedLayout.create(shape, shape, _row_major_strides(shape))


def column_major(*shape: int) -> SharedLayout:
    """Column-major (Fortran order) layout: the first index is contiguous."""
    rev = _row_major_strides(shape[::-1])[::-1]
    return SharedLayout.create(shape, shape, rev)


def strided(shape: Sequence[int], strides: Sequence[int]) -> SharedLayout:
    """Layout with explicit per-dimension strides (in elements)."""
    if len(shape) != len(strides):
        raise LayoutError(f"shape {tuple(shape)} and strides {tuple(strides)} differ in rank")
    return SharedLayout.create(shape, shape, strides)


def stacked(layout: SharedLayout, n: int) -> SharedLayout:
    """`n` copies of `layout` one after another: shape `(n, *layout.shape)`, copy s at
    `s * stride` with `stride` the cosize rounded up to the swizzle period, so each copy is
    swizzled exactly as `layout` alone (the pipeline's stages of a shared tile)."""
    period = layout.swizzle.period if layout.swizzle is not None else 1
    stride = -(-layout.cosize // period) * period
    return SharedLayout.create((n, *layout.shape), (n, *layout.mode_shape),
                               (stride, *layout.mode_strides), layout.swizzle)


def tile_to_shape(atom: SharedLayout, shape: Sequence[int], order: str = "row") -> SharedLayout:
    """Repeat `atom` to cover `shape`: atom copies are placed one after another (each `cosize`
    elements), in row-major (`order="row"`) or column-major (`"col"`) order of the atom grid.

    The atom's swizzle is kept and applies to the whole linear offset (as TMA and CUTLASS do);
    it acts on each atom alone when the atom's cosize is a multiple of `swizzle.period`.
    """
    shape = as_shape(shape)
    if len(shape) < atom.ndim:
        raise LayoutError(f"cannot tile a rank-{atom.ndim} atom to shape {shape}")
    lead = len(shape) - atom.ndim
    atom_shape = (1,) * lead + atom.shape
    groups = [()] * lead + list(atom.dim_modes)
    if any(s % a for s, a in zip(shape, atom_shape)):
        raise LayoutError(f"atom shape {atom.shape} does not divide {shape}")
    grid = [s // a for s, a in zip(shape, atom_shape)]
    if order not in ("row", "col"):
        raise LayoutError(f"order must be 'row' or 'col', not {order!r}")
    dims = range(len(grid)) if order == "col" else reversed(range(len(grid)))
    grid_stride, step = [0] * len(grid), atom.cosize
    for d in dims:
        grid_stride[d] = step
        step *= grid[d]
    modes, strides = [], []
    for d, group in enumerate(groups):
        modes += [grid[d]] + [atom.mode_shape[m] for m in group]
        strides += [grid_stride[d]] + [atom.mode_strides[m] for m in group]
    return SharedLayout.create(shape, modes, strides, atom.swizzle)
