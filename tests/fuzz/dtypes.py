"""The fuzzer's own dtype semantics, written from the language's definition (not from tilecraft).

Integers wrap modulo 2^bits; float stores round to nearest even (overflow -> inf); float -> int
truncates toward zero and saturates; int -> float rounds the exact integer once. Model values
are Python ints (object arrays) for integer types and float64 for floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    signed: bool = True
    is_float: bool = False
    prec: int = 0  # float significand bits, implicit bit included
    emin: int = 0  # smallest frexp exponent of a normal number (subnormal ulp = 2^(emin-prec))
    fmax: float = 0.0  # largest finite value

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def u(self) -> float:
        """Unit roundoff (half an ulp, relative)."""
        return 2.0 ** -self.prec

    @property
    def tiny(self) -> float:
        """Half the smallest subnormal: the absolute error of one rounding near zero."""
        return 2.0 ** (self.emin - self.prec - 1)

    @property
    def np(self):
        return {"bfloat16": ml_dtypes.bfloat16}.get(self.name, np.dtype(self.name))


INTS = [DType("int8", 8), DType("int16", 16), DType("int32", 32), DType("int64", 64),
        DType("uint8", 8, False), DType("uint16", 16, False), DType("uint32", 32, False)]
FLOATS = [DType("float16", 16, True, True, 11, -13, 65504.0),
          DType("bfloat16", 16, True, True, 8, -125,
                float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
          DType("float32", 32, True, True, 24, -125, float(np.finfo(np.float32).max))]
ALL = {d.name: d for d in INTS + FLOATS}
BOOL = DType("bool", 1, False)


def get(name: str) -> DType:
    return BOOL if name == "bool" else ALL[name]


def _wrap1(x, bits: int, signed: bool) -> int:
    w = int(x) & ((1 << bits) - 1)
    return w - (1 << bits) if signed and w >> (bits - 1) else w


_wrap = np.frompyfunc(_wrap1, 3, 1)


def wrap(v, d: DType):
    """Integers (Python ints or object arrays) modulo 2^bits into d's range."""
    if isinstance(v, np.ndarray):
        return np.asarray(_wrap(v, d.bits, d.signed), dtype=object)
    return _wrap1(v, d.bits, d.signed)


def round_float(v, d: DType) -> np.ndarray:
    """float64 values rounded once to nearest even in format d (overflow -> +-inf)."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(all="ignore"):
        _, ex = np.frexp(v)
        ex = np.maximum(ex, d.emin)
        r = np.ldexp(np.rint(np.ldexp(v, d.prec - ex)), ex - d.prec)
        r = np.where(np.isfinite(v) & (np.abs(r) > d.fmax), np.copysign(np.inf, v), r)
    return np.where(np.isfinite(v), r, v)


def round_int_exact(n: int, d: DType) -> float:
    """The Python int n rounded once to nearest even in float format d."""
    m = abs(n)
    b = m.bit_length()
    if b > d.prec:
        shift = b - d.prec
        q, r = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << shift
    f = float(m) if m < 2 ** 1000 else float("inf")
    if f > d.fmax:
        f = float("inf")
    return -f if n < 0 else f


_round_ints = np.vectorize(round_int_exact, otypes=[np.float64])


def int_to_float(v, d: DType) -> np.ndarray:
    return _round_ints(np.asarray(v, dtype=object), d) if np.size(v) else np.zeros(np.shape(v))


def float_to_int(v, d: DType) -> np.ndarray:
    """Truncate toward zero and saturate (NaN -> 0), as Python ints."""
    v = np.asarray(v, dtype=np.float64)
    t = np.trunc(np.nan_to_num(v, nan=0.0, posinf=np.inf, neginf=-np.inf))
    t = np.clip(t, d.lo, d.hi)
    out = np.empty(t.shape, dtype=object)
    flat = out.reshape(-1)
    for k, x in enumerate(t.reshape(-1)):
        flat[k] = int(min(max(int(x), d.lo), d.hi)) if np.isfinite(x) else (d.hi if x > 0 else d.lo)
    return out


def to_numpy(v, d: DType) -> np.ndarray:
    """Model values (already in d's range / rounded) as an array of d's numpy type."""
    if d.is_float:
        return np.asarray(v, dtype=np.float64).astype(d.np)
    return np.asarray(v, dtype=object).astype(d.np)


def from_numpy(a: np.ndarray, d: DType) -> np.ndarray:
    """A numpy array of dtype d as model values (float64, or object arrays of Python ints)."""
    if d.is_float:
        return np.asarray(a).astype(np.float64)
    return np.asarray(a).astype(object)


def uniform_values(rng: np.random.Generator, shape, d: DType) -> np.ndarray:
    """Integers of dtype d uniform over its whole range (bytes of packed codes)."""
    n = int(np.prod(shape)) if shape else 1
    v = rng.integers(d.lo, d.hi + 1, n, dtype=np.int64).astype(object)
    return to_numpy(v.reshape(shape), d)


def random_values(rng: np.random.Generator, shape, d: DType) -> np.ndarray:
    """Inputs of dtype d: small values around zero (both signs), some extremes, some zeros."""
    n = int(np.prod(shape)) if shape else 1
    pick = rng.random(n)
    if d.is_float:
        small = rng.integers(-8, 9, n).astype(np.float64)
        normal = rng.standard_normal(n) * 3.0
        v = np.where(pick < 0.25, small, normal)
        v = np.where(pick > 0.97, 0.0, v)
        return to_numpy(round_float(v, d).reshape(shape), d)
    small = rng.integers(max(d.lo, -20), min(d.hi, 20) + 1, n)
    if d.bits >= 64:
        wide = rng.integers(-(2 ** 62), 2 ** 62, n, dtype=np.int64).astype(object) * 2 + \
                rng.integers(0, 2, n).astype(object)
    else:
        wide = rng.integers(d.lo, d.hi + 1, n, dtype=np.int64).astype(object)
    ext = np.array([d.lo, d.hi, d.lo + 1, d.hi - 1, 0, 1, -1 if d.signed else 2], dtype=object)
    v = np.where(pick < 0.6, small.astype(object), wide)
    v = np.where(pick > 0.94, ext[rng.integers(0, len(ext), n)], v)
    return to_numpy(v.reshape(shape), d)
