"""The mutable working form of a register layout, used by `Fragment.create` and the algebra.

A `RawFragment` names modes by integer ids (not positions) so modes can be split, dropped and
merged freely; `canonical_fields()` turns it back into the canonical tuples a `Fragment` stores.

Encoding: `spatial` holds mode ids (>= 0) and replication entries (a negative number `-n` means
"n threads hold the same element"); `local` holds mode ids only.

Canonical form (what `canonical_fields` returns): no size-1 modes or replications; two modes that
are adjacent in their dimension *and* adjacent in the same order in `spatial` or `local` are merged
into one; adjacent replication entries are merged; modes are numbered dimension by dimension.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ._util import group_modes
from .errors import LayoutError


@dataclass
class RawFragment:
    """Working copy of a layout: per-dimension mode ids, mode sizes, thread and local orders."""

    shape: list[int]
    dims: list[list[int]]
    sizes: dict[int, int]
    spatial: list[int]
    local: list[int]

    @staticmethod
    def from_fields(shape, mode_shape, spatial_modes, local_modes) -> RawFragment:
        """Build from the unified form; modes are grouped into dimensions greedily by product."""
        try:
            dims = group_modes(shape, mode_shape)
        except ValueError as err:
            raise LayoutError(str(err)) from None
        if any(m < 0 for m in local_modes):
            raise LayoutError("replication entries (negative) are only allowed in spatial_modes")
        used = [m for m in spatial_modes if m >= 0] + list(local_modes)
        if sorted(used) != list(range(len(mode_shape))):
            raise LayoutError(
                f"spatial_modes {tuple(spatial_modes)} and local_modes {tuple(local_modes)} must "
                f"use each of the {len(mode_shape)} modes exactly once"
            )
        sizes = {m: int(s) for m, s in enumerate(mode_shape)}
        return RawFragment(list(shape), dims, sizes, list(spatial_modes), list(local_modes))

    def size_of(self, entry: int) -> int:
        """Extent of a spatial/local entry (a mode id or a replication entry)."""
        return -entry if entry < 0 else self.sizes[entry]

    def offset_ids(self, delta: int) -> RawFragment:
        """A copy whose mode ids are shifted by `delta` (to combine two layouts)."""

        def sh(e: int) -> int:
            return e if e < 0 else e + delta

        return RawFragment(
            list(self.shape),
            [[m + delta for m in g] for g in self.dims],
            {m + delta: s for m, s in self.sizes.items()},
            [sh(e) for e in self.spatial],
            [sh(e) for e in self.local],
        )

    def broadcast(self, ndim: int) -> RawFragment:
        """Prepend size-1 dimensions up to rank `ndim` (numpy-style broadcasting)."""
        extra = ndim - len(self.shape)
        if extra < 0:
            raise LayoutError(f"cannot broadcast a rank-{len(self.shape)} layout to rank {ndim}")
        return RawFragment(
            [1] * extra + self.shape,
            [[] for _ in range(extra)] + [list(g) for g in self.dims],
            dict(self.sizes),
            list(self.spatial),
            list(self.local),
        )

    def split(self, seq: list[int], k: int, inner: int) -> None:
        """Split entry `seq[k]` into (outer, inner) parts, the inner one of extent `inner`.

        A mode is split everywhere it appears (its dimension and its spatial/local order); a
        replication entry (which has no identity beyond its position) only at `seq[k]`.
        """
        entry = seq[k]
        size = self.size_of(entry)
        assert size % inner == 0 and 1 < inner < size
        if entry < 0:
            seq[k : k + 1] = [-(size // inner), -inner]
            return
        new = max(self.sizes, default=-1) + 1
        self.sizes[entry] = size // inner
        self.sizes[new] = inner
        for order in [*self.dims, self.spatial, self.local]:
            if entry in order:
                order.insert(order.index(entry) + 1, new)

    def cut(self, seq: list[int], target: int) -> bool:
        """Split entries of `seq` (in place) so its innermost entries multiply to `target`."""
        p, k = 1, len(seq) - 1
        while p < target:
            if k < 0 or target % p:
                return False
            need, size = target // p, self.size_of(seq[k])
            if need % size == 0:
                p *= size
                k -= 1
            elif size % need == 0:
                self.split(seq, k, need)
                return True
            else:
                return False
        return p == target

    def canonical_fields(self) -> tuple[tuple[int, ...], ...]:
        """(shape, mode_shape, spatial_modes, local_modes) in canonical form."""
        dims = [[m for m in g if self.sizes[m] != 1] for g in self.dims]
        sizes = dict(self.sizes)
        spatial = [e for e in self.spatial if e < -1 or (e >= 0 and sizes[e] != 1)]
        local = [e for e in self.local if sizes[e] != 1]
        spatial = _merge_replication(spatial)
        while _merge_once(dims, sizes, spatial, local):
            pass
        order = [m for g in dims for m in g]
        index = {m: k for k, m in enumerate(order)}
        return (
            tuple(self.shape),
            tuple(sizes[m] for m in order),
            tuple(e if e < 0 else index[e] for e in spatial),
            tuple(index[e] for e in local),
        )


def _merge_replication(spatial: list[int]) -> list[int]:
    out: list[int] = []
    for e in spatial:
        if e < 0 and out and out[-1] < 0:
            out[-1] = -(out[-1] * e)
        else:
            out.append(e)
    return out


def _merge_once(dims, sizes, spatial, local) -> bool:
    """Merge one pair of modes adjacent in a dimension and in a thread/local order."""
    for group in dims:
        for a, b in itertools.pairwise(group):
            for seq in (spatial, local):
                if a in seq and seq.index(a) + 1 < len(seq) and seq[seq.index(a) + 1] == b:
                    sizes[a] *= sizes[b]
                    group.remove(b)
                    seq.remove(b)
                    return True
    return False
