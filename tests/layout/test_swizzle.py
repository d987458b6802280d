"""Swizzled layouts are bijections and bank-conflict free for the accesses they are made for."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from tilecraft.layout import (
    LayoutError,
    choose_swizzle_bytes,
    dtype_bits,
    make_swizzled_layout,
    row_major,
    swizzle_for,
)

BANKS, BANK_BYTES, PHASE_BYTES = 32, 4, 128


def wavefronts(byte_addrs: list[int], vector_bytes: int = 16) -> int:
    """Shared-memory wavefronts for one warp-wide access of `vector_bytes` per lane.

    Lanes are served a phase at a time (128 bytes: 8 lanes of 16 B); within a phase, a bank
    accessed at two different 4-byte words needs one more wavefront per extra word.
    """
    per_phase = PHASE_BYTES // vector_bytes
    total = 0
    for start in range(0, len(byte_addrs), per_phase):
        words: dict[int, set[int]] = {}
        for addr in byte_addrs[start : start + per_phase]:
            for w in range(addr // BANK_BYTES, (addr + vector_bytes) // BANK_BYTES):
                words.setdefault(w % BANKS, set()).add(w)
        total += max(len(ws) for ws in words.values())
    return total


def byte_addr(layout, bits: int, *idx: int) -> int:
    return layout.offset(*idx) * bits // 8


CASES = [  # (dtype bits, rows, row bytes)
    (bits, rows, row_bytes)
    for bits in (4, 8, 16, 32)
    for rows in (8, 16)
    for row_bytes in (32, 64, 128, 256, 192, 96)
]


def _layout(bits: int, rows: int, row_bytes: int):
    return make_swizzled_layout((rows, row_bytes * 8 // bits), bits)


@pytest.mark.parametrize("bits,rows,row_bytes", CASES)
def test_swizzled_layout_is_a_bijection(bits, rows, row_bytes):
    layout = _layout(bits, rows, row_bytes)
    assert layout.swizzle is not None
    assert layout.is_bijective()


@pytest.mark.parametrize("bits,rows,row_bytes", CASES)
def test_16_byte_vectors_stay_contiguous(bits, rows, row_bytes):
    layout = _layout(bits, rows, row_bytes)
    vec = 128 // bits
    offsets = layout.offsets().reshape(rows, -1, vec)
    np.testing.assert_array_equal(
        offsets - offsets[..., :1], np.broadcast_to(np.arange(vec), offsets.shape)
    )
    assert (offsets[..., 0] % vec == 0).all()


@pytest.mark.parametrize("bits,rows,row_bytes", CASES)
def test_ldmatrix_style_reads_of_8_rows_are_conflict_free(bits, rows, row_bytes):
    layout = _layout(bits, rows, row_bytes)
    vec = 128 // bits
    for r0, c in itertools.product(range(0, rows, 8), range(0, layout.shape[1], vec)):
        addrs = [byte_addr(layout, bits, r0 + k, c) for k in range(8)]
        assert wavefronts(addrs) == 1, (r0, c)


@pytest.mark.parametrize("bits,rows,row_bytes", CASES)
def test_row_vector_accesses_within_a_swizzle_block_are_conflict_free(bits, rows, row_bytes):
    # a warp copies one swizzle block (rows x sw bytes) row by row, 16 bytes per lane
    layout = _layout(bits, rows, row_bytes)
    vec, sw = 128 // bits, choose_swizzle_bytes(row_bytes)
    block = sw * 8 // bits
    for c0 in range(0, layout.shape[1], block):
        order = [(r, c) for r in range(rows) for c in range(c0, c0 + block, vec)]
        for warp in range(0, len(order), 32):
            addrs = [byte_addr(layout, bits, r, c) for r, c in order[warp : warp + 32]]
            assert wavefronts(addrs) == len(addrs) * 16 // PHASE_BYTES


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("width", [128, 256, 512])
def test_power_of_two_rows_are_conflict_free_in_plain_row_major_order(bits, width):
    layout = _layout(bits, 16, width)
    vec = 128 // bits
    order = [(r, c) for r in range(16) for c in range(0, layout.shape[1], vec)]
    for warp in range(0, len(order), 32):
        addrs = [byte_addr(layout, bits, r, c) for r, c in order[warp : warp + 32]]
        assert wavefronts(addrs) == 4


def test_unswizzled_row_major_has_the_conflicts_the_swizzle_removes():
    plain = row_major(8, 64)
    assert wavefronts([plain.offset(r, 0) * 2 for r in range(8)]) == 8


@pytest.mark.parametrize("sw,bits_field,row_shift", [(128, 3, 0), (64, 2, 1), (32, 1, 2)])
@pytest.mark.parametrize("bits", [8, 16, 32])
def test_one_block_rows_use_the_row_xor_formula(sw, bits_field, row_shift, bits):
    # offset = row * stride + (col ^ (((row >> s) & mask) << b)), b = log2(elements per 16 B)
    cols = sw * 8 // bits
    layout = make_swizzled_layout((16, cols), bits)
    swz = layout.swizzle
    assert (swz.bits, swz.base, swz.shift) == (bits_field, (128 // bits).bit_length() - 1, 3)
    mask, b = (1 << bits_field) - 1, (128 // bits).bit_length() - 1
    for r, c in itertools.product(range(16), range(cols)):
        assert layout.offset(r, c) == r * cols + (c ^ (((r >> row_shift) & mask) << b))


@pytest.mark.parametrize("sw", [32, 64, 128])
@pytest.mark.parametrize("bits", [4, 8, 16, 32])
def test_matches_cutlass_byte_swizzle_as_tma_writes_it(sw, bits):
    # CUTLASS Swizzle<log2(sw/16), 4, 3> on byte addresses of the row-major tile (rows = sw B)
    cols = sw * 8 // bits
    layout = make_swizzled_layout((8, cols), bits)
    field = (sw // 16).bit_length() - 1
    vec = 128 // bits
    for r, c in itertools.product(range(8), range(0, cols, vec)):
        addr = (r * cols + c) * bits // 8
        assert byte_addr(layout, bits, r, c) == addr ^ ((addr >> 3) & (((1 << field) - 1) << 4))


def test_swizzle_width_follows_the_row_width():
    assert [choose_swizzle_bytes(w) for w in (16, 32, 48, 64, 96, 128, 192, 256)] == [
        0,
        32,
        0,
        64,
        32,
        128,
        64,
        128,
    ]
    assert make_swizzled_layout((8, 32), 16).swizzle == swizzle_for(64, 16)
    assert make_swizzled_layout((8, 128), 8).swizzle == swizzle_for(128, 8)


def test_falls_back_to_row_major_when_no_swizzle_fits():
    assert make_swizzled_layout((8, 8), 16) == row_major(8, 8)  # 16-byte rows
    assert make_swizzled_layout((64,), 16) == row_major(64)
    assert make_swizzled_layout((8, 64), 6) == row_major(8, 64)  # 6-bit elements


def test_forced_swizzle_width():
    assert make_swizzled_layout((8, 64), 16, swizzle_bytes=32).swizzle == swizzle_for(32, 16)
    assert make_swizzled_layout((8, 64), 16, swizzle_bytes=0) == row_major(8, 64)
    with pytest.raises(LayoutError):
        make_swizzled_layout((8, 16), 16, swizzle_bytes=64)


def test_leading_dimensions_are_outermost():
    layout = make_swizzled_layout((3, 8, 64), "float16")
    one = make_swizzled_layout((8, 64), "float16")
    for s, r, c in itertools.product(range(3), range(8), range(0, 64, 5)):
        assert layout.offset(s, r, c) == s * 512 + one.offset(r, c)
    assert layout.is_bijective()


def test_accepts_a_buffer_with_shape_and_dtype():
    by_name = make_swizzled_layout(SimpleNamespace(shape=(16, 64), dtype="float16"))
    assert by_name == make_swizzled_layout((16, 64), 16)
    by_np = make_swizzled_layout(SimpleNamespace(shape=(16, 64), dtype=np.dtype("float16")))
    assert by_np == by_name
    by_obj = make_swizzled_layout(SimpleNamespace(shape=(16, 64), dtype=SimpleNamespace(bits=16)))
    assert by_obj == by_name
    with pytest.raises(LayoutError):
        make_swizzled_layout((16, 64))


@pytest.mark.parametrize(
    "name,bits",
    [
        ("float16", 16),
        ("bfloat16", 16),
        ("float32", 32),
        ("int8", 8),
        ("uint4", 4),
        ("int2", 2),
        ("float8_e4m3", 8),
        ("float6_e3m2", 6),
        ("float4_e2m1", 4),
        ("bool", 8),
        ("f16", 16),
    ],
)
def test_dtype_bits_reads_type_names(name, bits):
    assert dtype_bits(name) == bits


def test_dtype_bits_rejects_unknown_names():
    with pytest.raises(LayoutError):
        dtype_bits("complex_thing")


def test_dtype_bits_falls_back_to_its_own_parser_without_tilecraft_dtypes(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tilecraft.dtypes", None)  # makes the import fail
    assert dtype_bits("float6_e3m2") == 6 and dtype_bits("uint3") == 3 and dtype_bits("half") == 16
    assert dtype_bits(np.dtype("float32")) == 32
    with pytest.raises(LayoutError):
        dtype_bits("complex_thing")
