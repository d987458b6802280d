"""`Fragment`: a register layout in the unified form of Tilus (section 5).

A fragment maps (thread t, local index i) to the logical index of a tile element. It is stored as

* `shape`          the tile shape;
* `mode_shape`     every dimension split into sub-dimensions ("modes"), concatenated, outer first;
* `spatial_modes`  the modes that make up the thread index, most significant first; a negative
                   entry `-n` is a *replication*: n threads (that digit of t) hold the same element;
* `local_modes`    the modes that make up the local (register) index, most significant first.

`map(t, i)`: unravel t over the spatial extents and i over the local extents, give each mode its
digit, ravel each dimension's digits. Example, the mma.m16n8k16 accumulator
`local(2, 1).spatial(8, 4).local(1, 2)`:

    shape=(16, 8) mode_shape=(2, 8, 4, 2) spatial_modes=(1, 2) local_modes=(0, 3)
    map(t, i) = (8 * (i // 2) + t // 4, 2 * (t % 4) + i % 2)

Always build fragments with the primitives (`local`, `spatial`, ...), the algebra, or
`Fragment.create`, which normalises to the canonical form (see `_raw.py`); equality and hashing
are structural on that form, so `spatial(2).spatial(4) == spatial(8)`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ._raw import RawFragment
from ._util import as_shape, prod, ravel, unravel
from .errors import LayoutError


@dataclass(frozen=True, repr=False)
class Fragment:
    """A register layout (thread, local) -> logical index, in canonical unified form."""

    shape: tuple[int, ...]
    mode_shape: tuple[int, ...]
    spatial_modes: tuple[int, ...]
    local_modes: tuple[int, ...]

    @classmethod
    def create(
        cls,
        shape: Sequence[int],
        mode_shape: Sequence[int],
        spatial_modes: Sequence[int],
        local_modes: Sequence[int],
    ) -> Fragment:
        """Validate and normalise the unified form (drop size-1 modes, merge adjacent modes)."""
        shape = as_shape(shape)
        mode_shape = as_shape(mode_shape, "mode_shape")
        raw = RawFragment.from_fields(shape, mode_shape, tuple(spatial_modes), tuple(local_modes))
        return cls(*raw.canonical_fields())

    @classmethod
    def from_raw(cls, raw: RawFragment) -> Fragment:
        """Canonical fragment of a working form (used by the algebra)."""
        return cls(*raw.canonical_fields())

    def raw(self) -> RawFragment:
        """A mutable working copy (mode ids = positions in `mode_shape`)."""
        return RawFragment.from_fields(
            self.shape, self.mode_shape, self.spatial_modes, self.local_modes
        )

    def __repr__(self) -> str:
        """The layout as a chain of primitives when one is found, else its unified form."""
        from ._describe import describe

        text = describe(self)
        if text is not None:
            return text
        return (
            f"Fragment.create(shape={self.shape}, mode_shape={self.mode_shape}, "
            f"spatial_modes={self.spatial_modes}, local_modes={self.local_modes})"
        )

    # ---- derived sizes ----------------------------------------------------------------------

    @cached_property
    def dim_modes(self) -> tuple[tuple[int, ...], ...]:
        """For each dimension, the indices of its modes in `mode_shape` (outer first)."""
        return tuple(tuple(g) for g in self.raw().dims)

    @cached_property
    def spatial_sizes(self) -> tuple[int, ...]:
        """Extent of each spatial entry (replications included)."""
        return tuple(-m if m < 0 else self.mode_shape[m] for m in self.spatial_modes)

    @cached_property
    def local_sizes(self) -> tuple[int, ...]:
        """Extent of each local mode."""
        return tuple(self.mode_shape[m] for m in self.local_modes)

    @property
    def ndim(self) -> int:
        """Rank of the tile."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of logical elements of the tile."""
        return prod(self.shape)

    @property
    def num_threads(self) -> int:
        """Number of threads the layout spans (replicated threads included)."""
        return prod(self.spatial_sizes)

    @property
    def local_size(self) -> int:
        """Number of elements each thread holds."""
        return prod(self.local_sizes)

    @property
    def replication(self) -> int:
        """How many threads hold each element (1 when nothing is replicated)."""
        return prod(-m for m in self.spatial_modes if m < 0)

    @property
    def is_replicated(self) -> bool:
        """True when some element is held by more than one thread."""
        return self.replication > 1

    # ---- the mapping --------------------------------------------------------------------------

    def map(self, t: Any, i: Any) -> tuple[Any, ...]:
        """Logical index of local element `i` of thread `t` (ints or numpy int arrays)."""
        if isinstance(t, int) and not 0 <= t < self.num_threads:
            raise LayoutError(f"thread {t} out of range for a layout of {self.num_threads} threads")
        if isinstance(i, int) and not 0 <= i < self.local_size:
            raise LayoutError(f"local index {i} out of range (local_size {self.local_size})")
        digit: dict[int, Any] = {}
        for m, d in zip(self.spatial_modes, unravel(t, self.spatial_sizes)):
            if m >= 0:
                digit[m] = d
        for m, d in zip(self.local_modes, unravel(i, self.local_sizes)):
            digit[m] = d
        return tuple(
            ravel([digit[m] for m in group], [self.mode_shape[m] for m in group])
            for group in self.dim_modes
        )

    __call__ = map

    def inverse(self, index: Sequence[int]) -> list[tuple[int, int]]:
        """All (thread, local) pairs holding logical `index` (several when replicated)."""
        index = tuple(int(x) for x in index)
        if len(index) != self.ndim or not all(0 <= x < n for x, n in zip(index, self.shape)):
            raise LayoutError(f"index {index} out of range for shape {self.shape}")
        digit: dict[int, int] = {}
        for x, group in zip(index, self.dim_modes):
            for m, d in zip(group, unravel(x, [self.mode_shape[m] for m in group])):
                digit[m] = d
        local = ravel([digit[m] for m in self.local_modes], self.local_sizes)
        choices = [range(-m) if m < 0 else (digit[m],) for m in self.spatial_modes]
        threads = [ravel(ds, self.spatial_sizes) for ds in itertools.product(*choices)]
        return [(t, local) for t in sorted(threads)]

    def thread_elements(self, t: int) -> list[tuple[int, ...]]:
        """Logical indices thread `t` holds, in local order."""
        return [self.map(t, i) for i in range(self.local_size)]

    def index_table(self) -> np.ndarray:
        """Array [num_threads, local_size, ndim] of the logical index of every (t, i)."""
        t, i = np.meshgrid(np.arange(self.num_threads), np.arange(self.local_size), indexing="ij")
        cols = [np.broadcast_to(np.asarray(x), t.shape) for x in self.map(t, i)]
        return np.stack(cols, axis=-1) if cols else np.zeros(t.shape + (0,), dtype=np.int64)

    # ---- algebra (implemented in algebra.py / primitives.py) ----------------------------------

    def __mul__(self, other: Fragment) -> Fragment:
        from .algebra import kron

        return kron(self, other)

    def __truediv__(self, other: Fragment) -> Fragment:
        from .algebra import divide

        return divide(self, other)

    def divisible_by(self, other: Fragment) -> bool:
        """True when `self / other` exists (`other` is a suffix factor of `self`)."""
        from .algebra import divides

        return divides(self, other)

    def left_divide(self, other: Fragment) -> Fragment:
        """The g with `other * g == self` (`other` is a prefix factor); LayoutError otherwise."""
        from .algebra import left_divide

        return left_divide(self, other)

    def reduce(self, dim: int, keepdim: bool = True) -> Fragment:
        """Layout of a reduction over `dim`: threads that shared the dimension become replicas."""
        from .algebra import reduce

        return reduce(self, dim, keepdim)

    def local(self, *shape: int) -> Fragment:
        """`self * local(*shape)`."""
        from .primitives import local

        return self * local(*shape)

    def spatial(self, *shape: int) -> Fragment:
        """`self * spatial(*shape)`."""
        from .primitives import spatial

        return self * spatial(*shape)

    def column_local(self, *shape: int) -> Fragment:
        """`self * column_local(*shape)`."""
        from .primitives import column_local

        return self * column_local(*shape)

    def column_spatial(self, *shape: int) -> Fragment:
        """`self * column_spatial(*shape)`."""
        from .primitives import column_spatial

        return self * column_spatial(*shape)

    def replicate(self, n: int) -> Fragment:
        """`self * replicate(n)`: each thread's elements are also held by n-1 neighbour threads."""
        from .primitives import replicate

        return self * replicate(n, self.ndim)

    # ---- pictures ----------------------------------------------------------------------------

    def show(self) -> str:
        """Grid of `thread:local` per cell (Tilus figure 4); returned as a str that prints itself."""
        from .show import fragment_grid

        return fragment_grid(self)

    def plot(self, path: str) -> None:
        """Draw the `show()` grid to a PNG at `path` (needs matplotlib)."""
        from .show import plot_fragment

        plot_fragment(self, path)
