"""Float encodings: every code decoded exactly, rounding to nearest-even with saturation.

References: ml_dtypes/numpy where they have the type, and an exact rational model (fractions)
written independently of tilecraft's arithmetic otherwise.
"""

from __future__ import annotations

import bisect
import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilecraft import dtypes
from tilecraft.dtypes import floatcodec

CUSTOM_FLOATS = [dtypes.float_type(e, m) for e, m in dtypes.CUSTOM_FLOAT_SPLITS]
ML_SUBBYTE = [
    (dtypes.float4_e2m1, "float4_e2m1fn"),
    (dtypes.float6_e2m3, "float6_e2m3fn"),
    (dtypes.float6_e3m2, "float6_e3m2fn"),
]
ML_SUBBYTE = [(dt, getattr(ml_dtypes, name)) for dt, name in ML_SUBBYTE if hasattr(ml_dtypes, name)]
STANDARD_NARROW = [
    (dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn),
    (dtypes.float8_e5m2, ml_dtypes.float8_e5m2),
    (dtypes.bfloat16, ml_dtypes.bfloat16),
    (dtypes.float16, np.float16),
]


# ------------------------------------------------------------------ exact rational reference
def ref_value(code: int, e: int, m: int, special: str) -> Fraction | str:
    """The exact value of `code`, or "nan" / "inf" / "-inf"."""
    bias = 2 ** (e - 1) - 1
    sign = -1 if code >> (e + m) & 1 else 1
    exp, man = (code >> m) & (2**e - 1), code & (2**m - 1)
    if special == "ieee" and exp == 2**e - 1:
        return "nan" if man else ("inf" if sign > 0 else "-inf")
    if special == "fn" and exp == 2**e - 1 and man == 2**m - 1:
        return "nan"
    if exp == 0:
        return sign * Fraction(man, 2**m) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(man, 2**m)) * Fraction(2) ** (exp - bias)


@functools.cache
def ref_positive_table(e: int, m: int, special: str) -> tuple[list[Fraction], list[int]]:
    """Sorted finite non-negative values and their codes."""
    pairs = []
    for code in range(2 ** (e + m)):
        v = ref_value(code, e, m, special)
        if isinstance(v, Fraction):
            pairs.append((v, code))
    pairs.sort()
    return [v for v, _ in pairs], [c for _, c in pairs]


def ref_encode(x: float, e: int, m: int, special: str, saturate: bool) -> int:
    """Nearest representable code, ties to the even code; overflow saturates or goes to inf."""
    values, codes = ref_positive_table(e, m, special)
    sign_bit = (1 << (e + m)) if np.signbit(x) else 0
    a = abs(Fraction(x)) if np.isfinite(x) else None
    if a is None or a >= values[-1]:
        if saturate or a is None:
            mag = codes[-1] if saturate else (2**e - 1) << m
            return sign_bit | mag
        # IEEE: rounding past max goes to inf, whose code (even mantissa) sits one step up
        values = [*values, Fraction(2) ** (2**e - 1 - (2 ** (e - 1) - 1))]
        codes = [*codes, (2**e - 1) << m]
    i = bisect.bisect_right(values, a) - 1
    if i == len(values) - 1:
        return sign_bit | codes[i]
    lo, hi = values[i], values[i + 1]
    if a - lo < hi - a or (a - lo == hi - a and codes[i] % 2 == 0):
        return sign_bit | codes[i]
    return sign_bit | codes[i + 1]


# ------------------------------------------------------------------ inputs
def probe_values(dt: dtypes.DataType, rng: np.random.Generator, n: int = 300) -> np.ndarray:
    """Every representable value, every midpoint and its float32 neighbours, and random values
    over (and beyond) the type's range, as float32."""
    fmt = dtypes.float_format(dt.exponent_bits, dt.mantissa_bits)
    vals = floatcodec.decode_float(np.arange(1 << fmt.bits), fmt)
    vals = np.unique(vals[np.isfinite(vals)])
    if vals.size > 4096:
        vals = rng.choice(vals, 4096, replace=False)
        vals.sort()
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, -np.inf)])
    top = np.log2(float(dt.max)) + 2
    logs = rng.uniform(fmt.emin - fmt.mantissa_bits - 3, top, n)
    randoms = np.exp2(logs) * rng.choice([-1.0, 1.0], n)
    edges = [0.0, -0.0, np.inf, -np.inf, dt.max, -dt.max, 2.0 * dt.max, 1e30, -1e30]
    with np.errstate(over="ignore"):
        return np.concatenate([vals, mids, near, randoms, edges]).astype(np.float32)


# ------------------------------------------------------------------ decoding every code
@pytest.mark.parametrize("dt", CUSTOM_FLOATS, ids=str)
def test_every_code_of_custom_float_decodes_to_exact_rational_value(dt):
    e, m = dt.exponent_bits, dt.mantissa_bits
    got = dt.to_float(np.arange(2**dt.bits))
    assert got.dtype == np.float32
    for code, value in enumerate(got):
        assert Fraction(float(value)) == ref_value(code, e, m, "finite")
        assert bool(np.signbit(value)) == bool(code >> (e + m))


@pytest.mark.parametrize(("dt", "ml_type"), ML_SUBBYTE, ids=lambda p: str(p))
def test_every_code_of_subbyte_float_matches_ml_dtypes(dt, ml_type):
    codes = np.arange(2**dt.bits, dtype=np.uint8)
    expected = codes.view(ml_type).astype(np.float32)
    np.testing.assert_array_equal(dt.to_float(codes), expected)
    np.testing.assert_array_equal(np.signbit(dt.to_float(codes)), np.signbit(expected))


@pytest.mark.parametrize(("dt", "np_type"), STANDARD_NARROW, ids=lambda p: str(p))
def test_generic_decoder_matches_numpy_on_every_code_of_standard_types(dt, np_type):
    codes = np.arange(2**dt.bits, dtype=dt.code_dtype)
    with np.errstate(invalid="ignore"):
        expected = codes.view(np_type).astype(np.float64)
    fmt = dtypes.float_format(dt.exponent_bits, dt.mantissa_bits)
    got = floatcodec.decode_float(codes, fmt)
    np.testing.assert_array_equal(got, expected)  # NaNs compare equal here
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(dt.to_float(codes), expected.astype(np.float32))


def test_float8_specials_follow_ml_dtypes():
    assert dtypes.float8_e4m3.max == 448.0 and dtypes.float8_e5m2.max == 57344.0
    assert np.isnan(dtypes.float8_e4m3.to_float([0x7F, 0xFF])).all()
    assert dtypes.float8_e4m3.to_float([0x7E])[0] == 448.0
    assert dtypes.float8_e5m2.to_float([0x7C, 0xFC]).tolist() == [np.inf, -np.inf]
    assert dtypes.float8_e4m3.has_nan and not dtypes.float8_e4m3.has_inf
    assert dtypes.float8_e5m2.has_inf and not dtypes.float6_e3m2.has_nan


# ------------------------------------------------------------------ encoding (rounding)
@pytest.mark.parametrize("dt", CUSTOM_FLOATS, ids=str)
def test_custom_float_from_float_rounds_to_nearest_even_and_saturates(dt):
    rng = np.random.default_rng(dt.bits * 100 + dt.exponent_bits)
    x = probe_values(dt, rng)
    got = dt.from_float(x)
    assert got.dtype == np.uint8
    e, m = dt.exponent_bits, dt.mantissa_bits
    expected = [ref_encode(float(v), e, m, "finite", saturate=True) for v in x]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("dt", "ml_type"), ML_SUBBYTE, ids=lambda p: str(p))
def test_subbyte_float_from_float_matches_ml_dtypes(dt, ml_type):
    rng = np.random.default_rng(7)
    x = probe_values(dt, rng, n=20000)
    expected = x.astype(ml_type).view(np.uint8)  # ml_dtypes also saturates these types
    np.testing.assert_array_equal(dt.from_float(x), expected)


@pytest.mark.parametrize(("dt", "np_type"), STANDARD_NARROW, ids=lambda p: str(p))
def test_standard_float_from_float_matches_numpy_cast_on_float32(dt, np_type):
    rng = np.random.default_rng(11)
    bit_patterns = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([probe_values(dt, rng), bit_patterns.view(np.float32)])
    x = x[~np.isnan(x)]
    fmt = dtypes.float_format(dt.exponent_bits, dt.mantissa_bits)
    reference_input = np.clip(x, -dt.max, dt.max) if fmt.saturate else x
    with np.errstate(over="ignore"):
        expected = reference_input.astype(np_type).view(dt.code_dtype)
    np.testing.assert_array_equal(dt.from_float(x), expected)


@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.float16, dtypes.float8_e4m3], ids=str)
def test_from_float_rounds_float64_inputs_once(dt):
    # float64 -> float32 -> dt would round twice; the exact path must agree with the rational model
    rng = np.random.default_rng(3)
    fmt = dtypes.float_format(dt.exponent_bits, dt.mantissa_bits)
    ulp_fraction = rng.uniform(0.0, 1.0, 3000) * 2.0**-(dt.mantissa_bits)
    x = (1.0 + ulp_fraction) * np.exp2(rng.integers(-8, 8, 3000)) * rng.choice([-1, 1], 3000)
    x = np.concatenate([x, [1 + 2**-8 + 2**-40, 1 + 2**-4 + 2**-40]])
    e, m = dt.exponent_bits, dt.mantissa_bits
    expected = [ref_encode(float(v), e, m, fmt.special, fmt.saturate) for v in x]
    np.testing.assert_array_equal(dt.from_float(x), expected)
    assert dtypes.bfloat16.round(np.array([1 + 2**-8 + 2**-40]))[0] == 1 + 2**-7


def test_from_float_nan_and_infinity_codes_are_documented_ones():
    nan, inf = np.array([np.nan]), np.array([np.inf, -np.inf])
    assert dtypes.float16.from_float(nan)[0] == 0x7E00
    assert dtypes.bfloat16.from_float(nan)[0] == 0x7FC0
    assert dtypes.float32.from_float(nan)[0] == 0x7FC00000
    assert dtypes.float64.from_float(nan)[0] == 0x7FF8000000000000
    assert dtypes.float8_e4m3.from_float(nan)[0] == 0x7F
    assert dtypes.float8_e5m2.from_float(nan)[0] == 0x7F
    assert dtypes.float6_e3m2.from_float(nan)[0] == 0  # no NaN: stores +0.0
    assert dtypes.float16.from_float(inf).tolist() == [0x7C00, 0xFC00]
    assert dtypes.float8_e5m2.from_float(inf).tolist() == [0x7B, 0xFB]  # satfinite: +-max
    assert dtypes.float8_e4m3.from_float(inf).tolist() == [0x7E, 0xFE]
    assert dtypes.float4_e2m1.from_float(inf).tolist() == [0x7, 0xF]


def test_float32_and_float64_from_float_are_ieee_casts():
    x = np.array([1.0 + 2**-30, 1e39, -1e-50, 3.5])
    with np.errstate(over="ignore"):
        expected = x.astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(dtypes.float32.from_float(x), expected)
    np.testing.assert_array_equal(dtypes.float64.from_float(x), x.view(np.uint64))


# ------------------------------------------------------------------ round / cast_array
@pytest.mark.parametrize("dt", [dt for dt, _ in STANDARD_NARROW] + CUSTOM_FLOATS[::5], ids=str)
def test_round_equals_from_float_then_to_float(dt):
    rng = np.random.default_rng(5)
    x32 = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x32, probe_values(dt, rng)])
    got = dt.round(x)  # float32 input takes the numpy/ml_dtypes fast path for standard types
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, dt.to_float(dt.from_float(x)))
    with np.errstate(invalid="ignore"):  # the random bit patterns include signaling NaNs
        x64 = x.astype(np.float64)
    np.testing.assert_array_equal(dt.round(x64), got)


def test_round_keeps_float64_precision_and_rejects_int_types():
    x = np.array([1 + 2**-40])
    assert dtypes.float64.round(x).dtype == np.float64
    assert dtypes.float64.round(x)[0] == x[0]
    assert dtypes.float32.round(x)[0] == 1.0
    with pytest.raises(TypeError, match="cast_array"):
        dtypes.int8.round(x)


def test_cast_array_to_float_types_returns_the_compute_dtype():
    x = np.array([0.3, -7.0, 1e6], dtype=np.float32)
    assert dtypes.bfloat16.cast_array(x).dtype == ml_dtypes.bfloat16
    assert dtypes.float8_e4m3.cast_array(x).tolist() == [0.3125, -7.0, 448.0]
    assert dtypes.float6_e3m2.cast_array(x).dtype == np.float32
    assert dtypes.float6_e3m2.cast_array(x).tolist() == [0.3125, -7.0, 28.0]
    assert dtypes.float16.cast_array(np.array([3, 70000])).tolist() == [3.0, np.inf]
    assert dtypes.float4_e2m1.cast_array(np.array([True, False])).tolist() == [1.0, 0.0]


def test_float_decode_and_encode_are_inverse_on_every_code():
    for dt in [*CUSTOM_FLOATS, dtypes.float8_e4m3, dtypes.float8_e5m2]:
        codes = np.arange(2**dt.bits)
        finite = np.isfinite(dt.to_float(codes))
        np.testing.assert_array_equal(dt.encode(dt.decode(codes))[finite], codes[finite])


def test_f16_headroom_is_the_biases_difference_for_floats_with_every_code_finite():
    """A code placed in an f16's fields reads as its value times 2^-h (h = 15 - bias): checked
    on every code of the narrow floats; 0 where codes are special or the exponent too wide."""
    import numpy as np

    from tilecraft.dtypes import resolve

    for name in ("float4_e2m1", "float6_e3m2", "float6_e2m3", "float5_e2m2", "float7_e4m2"):
        t = resolve(name)
        h = t.f16_headroom
        assert h == 15 - t.bias
        codes = np.arange(1 << t.bits, dtype=np.uint16)
        sign = (codes >> (t.bits - 1)) & 1
        mag = codes & ((1 << (t.bits - 1)) - 1)
        f16 = ((sign << 15) | (mag << (10 - t.mantissa_bits))).astype(np.uint16).view(np.float16)
        np.testing.assert_array_equal(f16.astype(np.float64) * 2.0 ** h,
                                      t.to_float(codes.astype(t.code_dtype)))
    for name in ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "uint4"):
        assert resolve(name).f16_headroom == 0
