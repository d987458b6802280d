"""Bit-exact encoding and decoding of binary floating-point formats, vectorized over numpy arrays.

A format is 1 sign bit, `e` exponent bits and `m` mantissa bits (code = sign | E << m | M) with
bias b = 2**(e-1) - 1. Its finite values are
    E == 0:  (-1)**sign * M / 2**m * 2**(1 - b)          (zero and subnormals)
    E >= 1:  (-1)**sign * (1 + M / 2**m) * 2**(E - b)     (normals)
The formats differ only in which codes are special ("special"):
    "ieee"   : E all ones is inf (M == 0) or NaN (float16/32/64, bfloat16, float8_e5m2)
    "fn"     : only E and M all ones is NaN, no inf (float8_e4m3, as ml_dtypes float8_e4m3fn)
    "finite" : every code is a finite number (all custom floats such as float6_e3m2)

`encode_float` rounds float64 inputs exactly (one rounding) using the classic identity: with q
the input's binade exponent clamped to the subnormal floor emin = 1 - b and n = |x| / 2**(q - m)
(exact), the truncated magnitude code is (q + b - 1) * 2**m + floor(n); it is rounded up when the
remainder is above one half, or exactly one half and the truncated code is odd. So ties go to the
even *code*: the even mantissa when m >= 1, and for m = 0 formats (whose values are powers of two)
the even exponent, as a bit-level round-to-nearest-even does. Carries into the exponent are free.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """Encoding parameters of one float type (see the module docstring)."""

    exponent_bits: int
    mantissa_bits: int
    special: str  # "ieee" | "fn" | "finite"
    saturate: bool  # overflow gives +-max (True) or +-inf (False)

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade (also the scale of the subnormals)."""
        return 1 - self.bias

    @property
    def max_code(self) -> int:
        """Magnitude code (sign bit clear) of the largest finite value."""
        e, m = self.exponent_bits, self.mantissa_bits
        if self.special == "ieee":
            return (((1 << e) - 2) << m) | ((1 << m) - 1)
        if self.special == "fn":
            return (1 << (e + m)) - 2
        return (1 << (e + m)) - 1

    @property
    def inf_code(self) -> int | None:
        """Magnitude code of infinity, or None when the format has none."""
        if self.special != "ieee":
            return None
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def nan_code(self) -> int:
        """The code `encode_float` gives NaN: a positive quiet NaN for IEEE float16/bfloat16/
        float32/float64, 0x7F for both fp8 types (what CUDA's conversions produce), and 0 (+0.0)
        for custom floats, which have no NaN."""
        e, m = self.exponent_bits, self.mantissa_bits
        if self.special == "finite":
            return 0
        if self.special == "fn" or self.bits == 8:
            return (1 << (e + m)) - 1
        return (((1 << e) - 1) << m) | (1 << (m - 1))

    @property
    def max_value(self) -> float:
        """The largest finite value, as a python float (exact)."""
        return float(decode_float(np.array([self.max_code]), self)[0])


@functools.cache
def float_format(exponent_bits: int, mantissa_bits: int) -> FloatFormat:
    """The format of the float type with this split (standard splits get their special codes)."""
    split = (exponent_bits, mantissa_bits)
    if split == (4, 3):
        return FloatFormat(4, 3, "fn", saturate=True)
    if split == (5, 2):
        return FloatFormat(5, 2, "ieee", saturate=True)
    if split in ((5, 10), (8, 7), (8, 23), (11, 52)):
        return FloatFormat(*split, "ieee", saturate=False)
    return FloatFormat(*split, "finite", saturate=True)


def decode_float(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Exact float64 values of integer codes (sign bit included, below 2**63) in format `fmt`."""
    e, m = fmt.exponent_bits, fmt.mantissa_bits
    c = np.asarray(codes).astype(np.int64)
    sign = (c >> (e + m)) & 1
    exp = (c >> m) & ((1 << e) - 1)
    man = c & ((1 << m) - 1)
    scale = np.where(exp == 0, fmt.emin, exp - fmt.bias) - m
    significand = np.where(exp == 0, man, man + (1 << m)).astype(np.float64)
    mag = np.ldexp(significand, scale.astype(np.int32))
    all_ones = exp == (1 << e) - 1
    if fmt.special == "ieee":
        mag = np.where(all_ones, np.where(man == 0, np.inf, np.nan), mag)
    elif fmt.special == "fn":
        mag = np.where(all_ones & (man == (1 << m) - 1), np.nan, mag)
    return np.where(sign == 1, -mag, mag)


def encode_float(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Codes (int64) of float64 values in format `fmt`: round to nearest, ties to the even code.

    Overflow (including +-inf inputs) gives +-max when `fmt.saturate`, else +-inf; NaN gives
    `fmt.nan_code`; a negative input that rounds to zero keeps its sign (-0.0).
    """
    m = fmt.mantissa_bits
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.abs(x)
        _, binade = np.frexp(mag)  # mag = f * 2**binade with f in [0.5, 1)
        q = np.maximum(binade.astype(np.int64) - 1, fmt.emin)
        q = np.where(mag == 0, fmt.emin, q)  # frexp(0) reports exponent 0
        scaled = mag / np.ldexp(1.0, (q - m).astype(np.int32))  # exact
        whole = np.floor(scaled)
        truncated = (q + fmt.bias - 1).astype(np.float64) * (1 << m) + whole
        rest = scaled - whole
        odd = np.fmod(truncated, 2.0) == 1.0
        mag_code = truncated + ((rest > 0.5) | ((rest == 0.5) & odd))
        overflow = ~(mag_code <= fmt.max_code)  # also catches inf; NaN is handled below
        limit = fmt.max_code if fmt.saturate else fmt.inf_code
        mag_code = np.where(overflow, limit, mag_code).astype(np.int64)
    code = mag_code | (np.signbit(x).astype(np.int64) << (fmt.exponent_bits + m))
    return np.where(np.isnan(x), fmt.nan_code, code)
