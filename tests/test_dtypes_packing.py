"""Compact packing: element i of a b-bit type in stream bits [i*b, (i+1)*b), LSB first."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft import dtypes

WIDTH_TYPES = [
    dtypes.uint1,
    *(dtypes.int_type(b) for b in range(2, 9)),
    dtypes.float3_e1m1,
    dtypes.float6_e3m2,
    dtypes.float16,
    dtypes.int32,
    dtypes.uint64,
]
LENGTHS = [1, 3, 7, 13, 101]


def reference_pack(codes: list[int], bits: int) -> bytes:
    """The stream as one big little-endian integer: element i shifted by i * bits."""
    stream = sum(int(c) << (i * bits) for i, c in enumerate(codes))
    return stream.to_bytes((len(codes) * bits + 7) // 8, "little")


@pytest.mark.parametrize("dt", WIDTH_TYPES, ids=str)
@pytest.mark.parametrize("n", LENGTHS)
def test_pack_places_element_i_at_bits_i_times_width(dt, n):
    rng = np.random.default_rng(n * 64 + dt.bits)
    codes = rng.integers(0, 2**dt.bits, n, dtype=np.uint64).astype(dt.code_dtype)
    packed = dtypes.pack(codes, dt)
    assert packed.dtype == np.uint8
    assert packed.size == dtypes.packed_nbytes(n, dt) == (n * dt.bits + 7) // 8
    assert packed.tobytes() == reference_pack(codes.tolist(), dt.bits)


@pytest.mark.parametrize("dt", WIDTH_TYPES, ids=str)
@pytest.mark.parametrize("n", LENGTHS)
def test_unpack_inverts_pack(dt, n):
    rng = np.random.default_rng(n + dt.bits)
    codes = rng.integers(0, 2**dt.bits, n, dtype=np.uint64).astype(dt.code_dtype)
    unpacked = dtypes.unpack(dtypes.pack(codes, dt), dt, n)
    assert unpacked.dtype == dt.code_dtype
    np.testing.assert_array_equal(unpacked, codes)


def test_three_bit_element_straddles_two_bytes():
    # element 2 of a uint3 stream is bits 6..8: bits 6, 7 of byte 0 and bit 0 of byte 1
    assert dtypes.pack([0, 0, 7], dtypes.uint3).tolist() == [0b11000000, 0b00000001]
    assert dtypes.pack([1, 2], dtypes.uint3).tolist() == [0b010001]
    assert dtypes.unpack(np.array([0b11000000, 1], np.uint8), "uint3", 3).tolist() == [0, 0, 7]


def test_signed_and_float_values_pack_through_their_codes():
    values = np.array([-1, 3, -4])
    packed = dtypes.pack(dtypes.int3.encode(values), dtypes.int3)
    assert dtypes.int3.decode(dtypes.unpack(packed, dtypes.int3, 3)).tolist() == [-1, 3, -4]
    x = np.array([1.5, -28.0, 0.0625])
    codes = dtypes.float6_e3m2.from_float(x)
    packed = dtypes.pack(codes, "float6_e3m2")
    again = dtypes.float6_e3m2.to_float(dtypes.unpack(packed, "f6e3m2", 3))
    assert again.tolist() == x.tolist()


def test_standard_widths_pack_as_little_endian_bytes():
    x = np.array([1.0, -2.5, 65504.0], dtype=np.float16)
    codes = x.view(np.uint16)
    assert dtypes.pack(codes, dtypes.float16).tobytes() == x.astype("<f2").tobytes()
    assert dtypes.pack([0x01020304], dtypes.uint32).tolist() == [4, 3, 2, 1]


def test_pack_reads_multidimensional_codes_in_c_order():
    codes = np.array([[1, 2], [3, 0]])
    assert dtypes.pack(codes, dtypes.uint2).tolist() == [0b00111001]


def test_empty_inputs_pack_to_nothing():
    assert dtypes.pack([], dtypes.uint3).size == 0
    assert dtypes.unpack(np.zeros(0, np.uint8), dtypes.uint3, 0).size == 0
    assert dtypes.float6_e3m2.to_float([]).shape == (0,)


def test_unpack_accepts_bytes_and_defaults_to_all_whole_elements():
    assert dtypes.unpack(b"\xff\x01", dtypes.uint3).tolist() == [7, 7, 7, 0, 0]
    assert dtypes.unpack(bytearray(b"\x0f"), dtypes.uint4).tolist() == [15, 0]


def test_pack_and_unpack_reject_bad_input():
    with pytest.raises(ValueError):
        dtypes.pack([8], dtypes.uint3)
    with pytest.raises(ValueError):
        dtypes.pack([-1], dtypes.int3)
    with pytest.raises(ValueError, match="hold 2"):
        dtypes.unpack(np.zeros(1, np.uint8), dtypes.uint3, 3)
    with pytest.raises(TypeError, match="uint8"):
        dtypes.unpack(np.zeros(2, np.int32), dtypes.uint3, 1)
