"""Shared-memory matrix descriptors of Hopper's wgmma (PTX ISA 9.7.15.5.1), from a tile's layout.

A wgmma reads a 64 x 16 slab of A and an N x 16 slab of B (16-bit elements) straight from shared
memory through a 64-bit descriptor: start address, two byte strides (LBO, SBO) and a swizzle
mode. The hardware computes each element's address in a *canonical* layout and then applies the
32/64/128-byte swizzle to the address bits (so the tile must start at a multiple of the swizzle
period; the arena aligns swizzled tiles to 1024 bytes). With W = the swizzle width in bytes and
16-bit elements, element (mn, k) of the slab is at

    K-major  (rows mn, K contiguous):  start + (mn // 8) * SBO + (mn % 8) * W + 2 k
    MN-major (rows k, MN contiguous):  start + (mn // (W/2)) * LBO + 2 (mn % (W/2))
                                             + (k // 8) * SBO + (k % 8) * W

then swizzled: a ^ (((a >> 7) & (W/16 - 1)) << 4). tilecraft's swizzled tiles are exactly this
form (column blocks of W bytes, `make_swizzled_layout`), so a descriptor needs no data movement:
`operand_descriptor` derives the strides from the layout and checks the formula element by
element for every slab the gemm reads; None when some slab does not fit (the gemm then uses
mma.sync).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .shared import SharedLayout

MODE = {128: 1, 64: 2, 32: 3}  # descriptor bits 62-63


@dataclass(frozen=True)
class WgmmaOperand:
    """Descriptor fields of one operand; `starts[(tile, kk)]` is the byte offset, from the
    tile's base, of the slab of MN tile `tile` and k16 step `kk`."""

    k_major: bool
    width: int  # swizzle width in bytes
    lbo: int
    sbo: int
    starts: dict[tuple[int, int], int]

    @property
    def mode(self) -> int:
        return MODE[self.width]

    def base_word(self) -> int:
        """The descriptor without its start address (LBO, SBO, swizzle mode)."""
        return ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (self.mode << 62)


def _hardware(start: int, mn: np.ndarray, k: np.ndarray, d: WgmmaOperand) -> np.ndarray:
    w = d.width
    if d.k_major:
        a = start + (mn // 8) * d.sbo + (mn % 8) * w + 2 * k
    else:
        half = w // 2
        a = start + (mn // half) * d.lbo + 2 * (mn % half) + (k // 8) * d.sbo + (k % 8) * w
    return a ^ (((a >> 7) & (w // 16 - 1)) << 4)


def operand_descriptor(layout: SharedLayout, k_major: bool, mn0: int, tile: int, tiles: int,
                       k16: int) -> WgmmaOperand | None:
    """Descriptor of a 16-bit operand stored with `layout` (2-D: (MN, K) when `k_major`, else
    (K, MN)), for the slabs of MN tiles `mn0 + t * tile` (t < tiles, `tile` rows each) and k16
    steps 0..k16-1; None when the layout is not a canonical wgmma layout there."""
    sw = layout.swizzle
    if sw is None or layout.ndim != 2 or sw.base != 3 or sw.shift != 3:
        return None
    width = 16 << sw.bits
    if width not in MODE:
        return None

    def at(mn, k):
        return (mn, k) if k_major else (k, mn)

    def lin(mn, k) -> int:
        return 2 * int(layout.linear(*at(mn, k)))

    sbo = lin(8, 0) - lin(0, 0) if k_major else lin(0, 8) - lin(0, 0)
    half = width // 2
    lbo = 16 if k_major else (lin(half, 0) - lin(0, 0) if tile > half else 16)
    if min(sbo, lbo) <= 0 or sbo % 16 or lbo % 16 or max(sbo, lbo) >= 1 << 18:
        return None
    d = WgmmaOperand(k_major, width, lbo, sbo, {})
    mn, k = np.meshgrid(np.arange(tile), np.arange(16), indexing="ij")
    for t in range(tiles):
        for kk in range(k16):
            o_mn, o_k = mn0 + t * tile, 16 * kk
            if not k_major and o_mn % half:
                return None  # an MN-major slab starting inside a swizzle atom: not relied on
            start = lin(o_mn, o_k)
            if start % 16 or start >= 1 << 18:
                return None
            want = 2 * np.asarray(layout.offset(*at(o_mn + mn, o_k + k)))
            if not np.array_equal(_hardware(start, mn, k, d), want):
                return None
            d.starts[(t, kk)] = start
    return d
