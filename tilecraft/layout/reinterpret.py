"""Register-tensor reinterpretation (`view`) and the low-precision weight layout (Tilus section 7).

* `view`: a register tensor (layout L, b-bit elements) can be reinterpreted as (L', b') at no cost
  iff both span the same number of threads and every thread holds the same number of bits:
  `L.num_threads == L'.num_threads and L.local_size * b == L'.local_size * b'`.
* Weight loading: a tile whose threads hold n bytes each is read as uint8 with
  `weight_load_layout(T, n) = local(n2).spatial(T).local(n1)`, n1 = gcd(n, 16), n2 = n // n1: each
  thread issues n2 loads of n1 contiguous bytes (n1 <= 16: one vector load), and lanes read
  consecutive chunks (coalesced).
* `pack_weight_tiles` is the numpy reference of the pre-transform (Tilus figure 9): W[K, N] of any
  b-bit type (integer codes) is cut into tiles of the register layout's shape; thread t's elements,
  in local order, are bit-packed (element i in bits [i*b, (i+1)*b), least significant bit first,
  elements may straddle bytes) into n bytes, and the bytes are placed where
  `weight_load_layout(T, n)` makes thread t load them. `unpack_weight_tiles` inverts it.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import LayoutError
from .fragment import Fragment
from .primitives import local


def can_view(layout: Fragment, dtype_bits: int, new_layout: Fragment, new_dtype_bits: int) -> bool:
    """True when a register tensor (layout, dtype_bits) can be reinterpreted as the new one."""
    return layout.num_threads == new_layout.num_threads and (
        layout.local_size * dtype_bits == new_layout.local_size * new_dtype_bits
    )


def check_view(
    layout: Fragment, dtype_bits: int, new_layout: Fragment, new_dtype_bits: int
) -> None:
    """Raise `LayoutError` explaining why `can_view` is False; return None otherwise."""
    if layout.num_threads != new_layout.num_threads:
        raise LayoutError(
            f"cannot view a tensor spread over {layout.num_threads} threads as one spread over "
            f"{new_layout.num_threads} threads"
        )
    bits, new_bits = layout.local_size * dtype_bits, new_layout.local_size * new_dtype_bits
    if bits != new_bits:
        raise LayoutError(
            f"cannot view {layout.local_size} x {dtype_bits}-bit elements per thread ({bits} bits) "
            f"as {new_layout.local_size} x {new_dtype_bits}-bit elements ({new_bits} bits)"
        )


def weight_load_layout(num_threads: int, bytes_per_thread: int) -> Fragment:
    """uint8 layout `local(n2).spatial(T).local(n1)`, n1 = gcd(n, 16), n2 = n // n1."""
    if num_threads < 1 or bytes_per_thread < 1:
        raise LayoutError("weight_load_layout needs positive thread and byte counts")
    n1 = math.gcd(bytes_per_thread, 16)
    return local(bytes_per_thread // n1).spatial(num_threads).local(n1)


def _pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack the last axis of `codes` (values < 2**bits) into bytes, LSB first."""
    if codes.shape[-1] * bits % 8:
        raise LayoutError(f"{codes.shape[-1]} x {bits}-bit elements do not fill whole bytes")
    codes = np.asarray(codes, dtype=np.int64) & ((1 << bits) - 1)
    bit_planes = (codes[..., None] >> np.arange(bits)) & 1
    flat = bit_planes.reshape(codes.shape[:-1] + (codes.shape[-1] * bits,)).astype(np.uint8)
    return np.packbits(flat, axis=-1, bitorder="little")


def _unpack_bits(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of `_pack_bits`: the first `count` b-bit codes of the last axis of `data`."""
    flat = np.unpackbits(
        np.asarray(data, dtype=np.uint8), axis=-1, count=count * bits, bitorder="little"
    )
    planes = flat.reshape(flat.shape[:-1] + (count, bits)).astype(np.int64)
    return (planes << np.arange(bits)).sum(axis=-1)


def _bytes_per_thread(layout: Fragment, bits: int) -> int:
    if not 1 <= bits <= 8:
        raise LayoutError(f"weight packing handles 1..8-bit elements, not {bits}")
    if layout.local_size * bits % 8:
        raise LayoutError(
            f"threads of {layout} hold {layout.local_size} x {bits} bits, not whole bytes"
        )
    return layout.local_size * bits // 8


def _tile_grid(shape: tuple[int, ...], layout: Fragment) -> tuple[int, ...]:
    if len(shape) != layout.ndim or any(s % b for s, b in zip(shape, layout.shape)):
        raise LayoutError(f"tile shape {layout.shape} does not divide weight shape {shape}")
    return tuple(s // b for s, b in zip(shape, layout.shape))


def _load_positions(layout: Fragment, n: int) -> np.ndarray:
    """[T, n] byte position in a packed tile of thread t's j-th byte."""
    load = weight_load_layout(layout.num_threads, n)
    return load.index_table()[..., 0]


def pack_weight_tiles(codes: np.ndarray, bits: int, layout: Fragment) -> np.ndarray:
    """Pre-transform W (integer codes, shape tiled by `layout.shape`) into per-tile uint8 rows.

    Returns uint8 of shape (*grid, T * n) where grid = W.shape / layout.shape, T = threads and
    n = bytes per thread: thread t loads its n bytes of tile g from
    `out[g][weight_load_layout(T, n).map(t, j)]`, j = 0..n-1 (n2 vectors of n1 contiguous bytes).
    """
    codes = np.asarray(codes)
    n = _bytes_per_thread(layout, bits)
    grid = _tile_grid(codes.shape, layout)
    ndim = layout.ndim
    split = codes.reshape([x for g, b in zip(grid, layout.shape) for x in (g, b)])
    tiles = split.transpose([2 * d for d in range(ndim)] + [2 * d + 1 for d in range(ndim)])
    table = layout.index_table()
    per_thread = tiles[(Ellipsis, *(table[..., d] for d in range(ndim)))]  # (*grid, T, N)
    thread_bytes = _pack_bits(per_thread, bits)  # (*grid, T, n)
    out = np.zeros(grid + (layout.num_threads * n,), dtype=np.uint8)
    out[..., _load_positions(layout, n)] = thread_bytes
    return out


def unpack_weight_tiles(packed: np.ndarray, bits: int, layout: Fragment) -> np.ndarray:
    """Inverse of `pack_weight_tiles`: the integer codes of W, shape grid * layout.shape."""
    packed = np.asarray(packed, dtype=np.uint8)
    n = _bytes_per_thread(layout, bits)
    grid = packed.shape[:-1]
    if packed.shape[-1] != layout.num_threads * n:
        raise LayoutError(
            f"packed tiles hold {packed.shape[-1]} bytes, expected {layout.num_threads * n}"
        )
    thread_bytes = packed[..., _load_positions(layout, n)]  # (*grid, T, n)
    per_thread = _unpack_bits(thread_bytes, bits, layout.local_size)  # (*grid, T, N)
    ndim = layout.ndim
    tiles = np.zeros(grid + layout.shape, dtype=np.int64)
    table = layout.index_table()
    tiles[(Ellipsis, *(table[..., d] for d in range(ndim)))] = per_thread
    order = [x for d in range(ndim) for x in (d, ndim + d)]
    return tiles.transpose(order).reshape([g * b for g, b in zip(grid, layout.shape)])
