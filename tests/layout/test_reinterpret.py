"""view() validity, the weight-loading layout, and the weight pre-transform (Tilus section 7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilecraft.layout import (
    LayoutError,
    can_view,
    check_view,
    local,
    pack_weight_tiles,
    spatial,
    unpack_weight_tiles,
    weight_load_layout,
)
from tilecraft.layout.atoms import MMA_M16N8K16_B
from tilecraft.layout.reinterpret import _pack_bits, _unpack_bits

# Tilus figure 2: int6 B tile in mma layout, 4 elements (24 bits) per thread
I6_TILE = local(2, 1).column_spatial(4, 8).local(2, 1)


def test_view_needs_equal_threads_and_bits_per_thread():
    assert I6_TILE == MMA_M16N8K16_B
    assert can_view(I6_TILE, 6, local(3).spatial(32), 8)
    assert not can_view(I6_TILE, 6, local(4).spatial(32), 8)
    assert not can_view(I6_TILE, 6, local(6).spatial(16), 8)
    check_view(I6_TILE, 6, local(3).spatial(32), 8)
    with pytest.raises(LayoutError, match="24 bits"):
        check_view(I6_TILE, 6, local(4).spatial(32), 8)
    with pytest.raises(LayoutError, match="threads"):
        check_view(I6_TILE, 6, local(6).spatial(16), 8)


def test_weight_load_layout_of_the_paper_example():
    assert weight_load_layout(32, 3) == local(3).spatial(32)


@pytest.mark.parametrize("n", range(1, 70))
def test_weight_load_layout_is_local_n2_spatial_t_local_n1(n):
    layout = weight_load_layout(32, n)
    n1 = math.gcd(n, 16)
    assert layout == local(n // n1).spatial(32).local(n1)
    assert layout.local_size == n and layout.num_threads == 32
    # thread t's bytes are n2 runs of n1 contiguous bytes; lanes read adjacent runs
    for t in (0, 1, 31):
        pos = [layout.map(t, j)[0] for j in range(n)]
        assert pos == [(j2 * 32 + t) * n1 + j1 for j2 in range(n // n1) for j1 in range(n1)]


def test_weight_load_layout_rejects_empty_sizes():
    with pytest.raises(LayoutError):
        weight_load_layout(0, 4)


def test_bit_packing_is_lsb_first_and_straddles_bytes():
    # three 3-bit codes 0b101, 0b011, 0b110 -> bits 101 | 110 | 011 (LSB first) -> 0b10_011_101
    packed = _pack_bits(np.array([0b101, 0b011, 0b110, 0, 0, 0, 0, 0]), 3)
    assert packed.tolist() == [0b10011101, 0b00000001, 0]
    np.testing.assert_array_equal(_unpack_bits(packed, 3, 8), [5, 3, 6, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("bits", range(1, 9))
def test_bit_packing_round_trips(bits):
    rng = np.random.default_rng(bits)
    codes = rng.integers(0, 1 << bits, size=(5, 16))
    packed = _pack_bits(codes, bits)
    assert packed.shape == (5, 2 * bits) and packed.dtype == np.uint8
    np.testing.assert_array_equal(_unpack_bits(packed, bits, 16), codes)


def test_bit_packing_agrees_with_tilecraft_dtypes_when_available():
    dtypes = pytest.importorskip("tilecraft.dtypes")
    pack = getattr(dtypes, "pack", None)
    lookup = getattr(dtypes, "uint4", None)
    if pack is None or lookup is None:
        pytest.skip("tilecraft.dtypes has no pack()/uint4 yet")
    codes = np.arange(16) % 16
    np.testing.assert_array_equal(np.asarray(pack(codes, lookup)), _pack_bits(codes, 4))


def simulated_load(packed_tile: np.ndarray, bits: int, layout) -> np.ndarray:
    """What the kernel does: every thread loads its bytes contiguously, unpacks, and places its
    elements at layout.map(t, i). Written without the library's load-position tables."""
    threads, n = layout.num_threads, layout.local_size * bits // 8
    n1 = math.gcd(n, 16)
    tile = np.full(layout.shape, -1, dtype=np.int64)
    for t in range(threads):
        chunks = [
            packed_tile[(j2 * threads + t) * n1 : (j2 * threads + t + 1) * n1]
            for j2 in range(n // n1)
        ]
        value = int.from_bytes(bytes(np.concatenate(chunks)), "little")
        for i in range(layout.local_size):
            tile[layout.map(t, i)] = (value >> (i * bits)) & ((1 << bits) - 1)
    return tile


TILE_LAYOUTS = [
    I6_TILE.local(1, 2),  # 16 x 16, 8 per thread: any bit width fills whole bytes
    local(2, 2).column_spatial(4, 8).local(2, 1),
    spatial(4, 8).local(4, 2),
    local(2, 1).spatial(8, 4).local(1, 2).local(2, 2),
]


@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("layout", TILE_LAYOUTS, ids=lambda l: "x".join(map(str, l.shape)))
def test_pretransform_then_contiguous_loads_reproduce_w(bits, layout):
    rng = np.random.default_rng(bits)
    shape = (layout.shape[0] * 3, layout.shape[1] * 2)
    w = rng.integers(0, 1 << bits, size=shape)
    packed = pack_weight_tiles(w, bits, layout)
    n = layout.local_size * bits // 8
    assert packed.shape == (3, 2, layout.num_threads * n) and packed.dtype == np.uint8
    for gk in range(3):
        for gn in range(2):
            tile = simulated_load(packed[gk, gn], bits, layout)
            block = w[
                gk * layout.shape[0] : (gk + 1) * layout.shape[0],
                gn * layout.shape[1] : (gn + 1) * layout.shape[1],
            ]
            np.testing.assert_array_equal(tile, block)
    np.testing.assert_array_equal(unpack_weight_tiles(packed, bits, layout), w)


def test_paper_int6_example_packs_24_bits_per_thread_into_3_bytes():
    w = np.random.default_rng(0).integers(0, 64, size=(32, 16))
    packed = pack_weight_tiles(w, 6, I6_TILE)
    assert packed.shape == (2, 2, 96)  # BK * BN * 6 / 8 = 96 bytes per 16 x 8 tile
    np.testing.assert_array_equal(simulated_load(packed[1, 0], 6, I6_TILE), w[16:, :8])


def test_signed_codes_are_stored_as_their_low_bits():
    w = np.array([[-1, 0], [1, -2]])
    packed = pack_weight_tiles(w, 4, local(2, 2))
    np.testing.assert_array_equal(unpack_weight_tiles(packed, 4, local(2, 2)), w & 0xF)


def test_pretransform_rejects_bad_inputs():
    with pytest.raises(LayoutError, match="whole bytes"):
        pack_weight_tiles(np.zeros((16, 8), dtype=int), 3, spatial(4, 8).local(4, 1))  # 12 bits
    with pytest.raises(LayoutError, match="divide"):
        pack_weight_tiles(np.zeros((10, 8), dtype=int), 6, I6_TILE)
    with pytest.raises(LayoutError):
        pack_weight_tiles(np.zeros((16, 8), dtype=int), 9, I6_TILE)
    with pytest.raises(LayoutError):
        unpack_weight_tiles(np.zeros((1, 1, 95), dtype=np.uint8), 6, I6_TILE)
