"""Integer and bool types: ranges, two's-complement codes, quantizing and C-like casts."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft import dtypes

SIGNED = [dtypes.int_type(b) for b in (2, 3, 4, 5, 6, 7, 8, 16, 32, 64)]
UNSIGNED = [dtypes.int_type(b, signed=False) for b in (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)]
SUBBYTE_INTS = [dt for dt in SIGNED + UNSIGNED if dt.bits <= 8]


@pytest.mark.parametrize("dt", SIGNED + UNSIGNED, ids=str)
def test_int_range_is_twos_complement_range(dt):
    if dt.kind == "int":
        assert (dt.min, dt.max) == (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1)
    else:
        assert (dt.min, dt.max) == (0, 2**dt.bits - 1)
    assert isinstance(dt.min, int) and isinstance(dt.max, int)


def test_int_ranges_of_named_types():
    assert (dtypes.int2.min, dtypes.int2.max) == (-2, 1)
    assert (dtypes.int4.min, dtypes.int4.max) == (-8, 7)
    assert (dtypes.uint1.min, dtypes.uint1.max) == (0, 1)
    assert (dtypes.int8.min, dtypes.int8.max) == (-128, 127)
    assert dtypes.uint64.max == 2**64 - 1 and dtypes.int64.min == -(2**63)
    assert (dtypes.boolean.min, dtypes.boolean.max) == (0, 1)


@pytest.mark.parametrize("dt", SUBBYTE_INTS, ids=str)
def test_every_code_of_subbyte_int_decodes_to_its_twos_complement_value(dt):
    codes = np.arange(2**dt.bits)
    half = 2 ** (dt.bits - 1)
    expected = [c - 2**dt.bits if dt.kind == "int" and c >= half else c for c in codes]
    decoded = dt.decode(codes)
    assert decoded.dtype == dt.np_dtype
    assert decoded.tolist() == expected
    assert dt.to_float(codes).tolist() == expected
    assert dt.to_float(codes).dtype == np.float32
    np.testing.assert_array_equal(dt.encode(decoded), codes)


def test_wide_int_codes_are_numpy_views():
    codes = np.array([0, 1, 2**31, 2**32 - 1], dtype=np.uint64)
    assert dtypes.int32.decode(codes).tolist() == [0, 1, -(2**31), -1]
    assert dtypes.int32.to_float(codes).dtype == np.float64
    assert dtypes.uint64.decode(np.array([2**64 - 1], dtype=np.uint64)).tolist() == [2**64 - 1]
    assert dtypes.int16.to_float(np.array([0x8000])).tolist() == [-32768.0]


@pytest.mark.parametrize("dt", [dtypes.int4, dtypes.int8, dtypes.int32, dtypes.uint3], ids=str)
def test_int_from_float_rounds_half_to_even_and_saturates(dt):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, np.nan, np.inf, -np.inf, 1e30])
    expected = [-2, -2, 0, 0, 2, 2, 3, -3, 0, dt.max, dt.min, dt.max]
    expected = np.clip(expected, dt.min, dt.max)
    np.testing.assert_array_equal(dt.decode(dt.from_float(x)), expected)


def test_64_bit_from_float_saturates_at_the_exact_bounds():
    x = np.array([2.0**63, -(2.0**63), 2.0**63 - 1024, 2.0**64, -1.0, 1e300])
    assert dtypes.int64.decode(dtypes.int64.from_float(x)).tolist() == [
        2**63 - 1,
        -(2**63),
        2**63 - 1024,
        2**63 - 1,
        -1,
        2**63 - 1,
    ]
    assert dtypes.uint64.decode(dtypes.uint64.from_float(x)).tolist() == [
        2**63,
        0,
        2**63 - 1024,
        2**64 - 1,
        0,
        2**64 - 1,
    ]


def test_float_to_int_cast_truncates_toward_zero_and_saturates():
    x = np.array([-2.7, 2.7, -0.5, 1e10, -1e10, np.nan, np.inf], dtype=np.float32)
    assert dtypes.int32.cast_array(x).tolist() == [-2, 2, 0, 2**31 - 1, -(2**31), 0, 2**31 - 1]
    assert dtypes.int4.cast_array(x).tolist() == [-2, 2, 0, 7, -8, 0, 7]
    assert dtypes.uint8.cast_array(x).tolist() == [0, 2, 0, 255, 0, 0, 255]
    assert dtypes.int4.cast_array(x).dtype == np.int8


def test_int_to_int_cast_wraps_twos_complement():
    assert dtypes.int4.cast_array(np.array([7, 8, -9, 255])).tolist() == [7, -8, 7, -1]
    assert dtypes.uint3.cast_array(np.array([-1, 8, 9])).tolist() == [7, 0, 1]
    assert dtypes.int8.cast_array(np.array([200, -129])).tolist() == [-56, 127]
    big = np.array([2**64 - 1, 2**63], dtype=np.uint64)
    assert dtypes.int64.cast_array(big).tolist() == [-1, -(2**63)]
    assert dtypes.uint2.cast_array(np.array([True, False])).tolist() == [1, 0]


def test_bool_conversions_test_against_zero():
    x = np.array([0.0, -0.0, 0.5, np.nan, -3.0])
    assert dtypes.boolean.from_float(x).tolist() == [0, 0, 1, 1, 1]
    assert dtypes.boolean.cast_array(x).tolist() == [False, False, True, True, True]
    assert dtypes.boolean.decode([0, 1, 7]).tolist() == [False, True, True]
    assert dtypes.boolean.to_float([0, 1]).tolist() == [0.0, 1.0]
    assert dtypes.boolean.encode(np.array([3, 0])).tolist() == [1, 0]


def test_codes_outside_the_type_range_are_rejected():
    with pytest.raises(ValueError, match=r"\[0, 2\*\*4\)"):
        dtypes.int4.to_float(np.array([16]))
    with pytest.raises(ValueError, match="encode"):
        dtypes.int4.decode(np.array([-1]))
    with pytest.raises(TypeError, match="integer"):
        dtypes.uint4.decode(np.array([1.0]))
