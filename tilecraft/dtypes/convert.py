"""Array conversions behind the `DataType` methods (codes <-> numbers, GPU-like casts).

Codes are unsigned bit patterns in `dt.code_dtype`. Standard types convert through numpy views and
casts; custom floats go through `floatcodec` (a lookup table for decoding, exact arithmetic for
encoding); sub-byte ints through masking and sign extension. Every function is vectorized.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tilecraft.dtypes import floatcodec

if TYPE_CHECKING:
    from tilecraft.dtypes.datatype import DataType

_CANONICAL_NAN = {"float32": 0x7FC00000, "float64": 0x7FF8000000000000}
_F = TypeVar("_F", bound=Callable[..., Any])


def _quiet(fn: _F) -> _F:
    """Run `fn` without numpy's warnings for NaN and overflow in casts (they are defined here)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(invalid="ignore", over="ignore"):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def check_codes(dt: DataType, codes: Any) -> np.ndarray:
    """`codes` as an array of `dt.code_dtype`; ValueError if any lies outside [0, 2**bits)."""
    c = np.asarray(codes)
    if c.dtype.kind == "b" or c.size == 0:  # an empty list arrives as float64
        c = c.astype(np.uint8)
    if c.dtype.kind not in "iu":
        raise TypeError(f"codes of {dt.name} must be an integer array, got dtype {c.dtype}")
    if c.size and (c.min() < 0 or int(c.max()) >> dt.bits):
        raise ValueError(
            f"codes of {dt.name} must lie in [0, 2**{dt.bits}); got values in "
            f"[{c.min()}, {c.max()}] (signed values? encode them with {dt.name}.encode)"
        )
    return c.astype(dt.code_dtype)


def source_kind(arr: np.ndarray) -> str:
    """Whether an array holds "float", "int" or "bool" values (ml_dtypes types included)."""
    kind = arr.dtype.kind
    if kind == "f":
        return "float"
    if kind in "iu":
        return "int"
    if kind == "b":
        return "bool"
    if kind == "V" and arr.dtype.names is None:  # ml_dtypes scalar types
        return "int" if arr.dtype.name.startswith(("int", "uint")) else "float"
    raise TypeError(f"cannot convert an array of dtype {arr.dtype} to a tilecraft type")


@_quiet
def as_float64(values: Any) -> np.ndarray:
    """Values as float64 (exact for every float source; ints beyond 2**53 round)."""
    arr = np.asarray(values)
    source_kind(arr)
    return arr.astype(np.float64)


@functools.cache
def _custom_float_table(exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    fmt = floatcodec.float_format(exponent_bits, mantissa_bits)
    table = floatcodec.decode_float(np.arange(1 << fmt.bits), fmt).astype(np.float32)
    table.flags.writeable = False
    return table


# ----------------------------------------------------------------------------- decoding
def decode(dt: DataType, codes: Any) -> np.ndarray:
    """Codes -> values in `dt.np_dtype`."""
    c = check_codes(dt, codes)
    if dt.is_float:
        if dt.is_standard:
            return c.view(dt.np_dtype)
        return _custom_float_table(dt.exponent_bits, dt.mantissa_bits)[c]
    if dt.is_bool:
        return c != 0
    if dt.is_standard:
        return c.view(dt.np_dtype)
    if dt.kind == "uint":
        return c
    v = c.astype(np.int16)
    return (v - (((v >> (dt.bits - 1)) & 1) << dt.bits)).astype(np.int8)


@_quiet
def to_float(dt: DataType, codes: Any) -> np.ndarray:
    """Codes -> exact values as float32 (float64 for float64 and 32/64-bit ints)."""
    values = decode(dt, codes)
    wide = dt.name == "float64" or (dt.is_integer and dt.bits > 16)
    return values.astype(np.float64 if wide else np.float32)


# ----------------------------------------------------------------------------- encoding
@_quiet
def from_float(dt: DataType, values: Any) -> np.ndarray:
    """Numbers -> codes, rounding to nearest even (rules in `DataType.from_float`)."""
    x = as_float64(values)
    if dt.is_float:
        if dt.name in _CANONICAL_NAN:
            codes = x.astype(dt.np_dtype).view(dt.code_dtype)
            return np.where(np.isnan(x), dt.code_dtype.type(_CANONICAL_NAN[dt.name]), codes)
        fmt = floatcodec.float_format(dt.exponent_bits, dt.mantissa_bits)
        return floatcodec.encode_float(x, fmt).astype(dt.code_dtype)
    if dt.is_bool:
        return (x != 0).astype(np.uint8)
    return int_codes(dt, saturate_to_int(dt, np.rint(x)))


def encode(dt: DataType, values: Any) -> np.ndarray:
    """Values -> codes; the inverse of `decode` (other values convert as in `cast_array`)."""
    if dt.is_float:
        return from_float(dt, values)
    return int_codes(dt, cast_array(dt, values))


def int_codes(dt: DataType, ints: np.ndarray) -> np.ndarray:
    """In-range integer values of an int/uint/bool type -> their two's-complement codes."""
    if dt.is_standard:
        return ints.astype(dt.np_dtype).view(dt.code_dtype)
    return (ints.astype(np.int64) & ((1 << dt.bits) - 1)).astype(np.uint8)


def saturate_to_int(dt: DataType, x: np.ndarray) -> np.ndarray:
    """Integral float64 values clamped to [dt.min, dt.max]; NaN -> 0.

    The result is int64 (uint64 for uint64)."""
    work = np.uint64 if dt.name == "uint64" else np.int64
    lo, hi = dt.min, dt.max
    x = np.where(np.isnan(x), 0.0, x)
    # float(hi) may round up (to 2**63 or 2**64); anything at or above it saturates, and every
    # float64 below it converts exactly.
    too_high = x >= float(hi)
    too_low = x <= float(lo)
    safe = np.where(too_high | too_low, 0.0, x).astype(work)
    return np.where(too_high, work(hi), np.where(too_low, work(lo), safe))


def wrap_int(dt: DataType, ints: np.ndarray) -> np.ndarray:
    """Integer values reduced modulo 2**bits into `dt`'s range (two's complement), in np_dtype."""
    if dt.is_standard:
        return ints.astype(dt.np_dtype)
    v = ints.astype(np.int64) & ((1 << dt.bits) - 1)
    if dt.kind == "int":
        v = v - (((v >> (dt.bits - 1)) & 1) << dt.bits)
    return v.astype(dt.np_dtype)


# ----------------------------------------------------------------------------- GPU-like casts
@_quiet
def cast_array(dt: DataType, values: Any) -> np.ndarray:
    """Convert to `dt.np_dtype` like a GPU conversion (rules in `DataType.cast_array`)."""
    arr = np.asarray(values)
    kind = source_kind(arr)
    if dt.is_bool:
        return as_float64(arr) != 0 if kind == "float" else arr != 0
    if dt.is_float:
        rounded = round_float(dt, arr)
        if not dt.is_standard:
            return rounded
        out = np.asarray(rounded.astype(dt.np_dtype))
        if dt.bits == 8:  # every NaN is code 0x7F, as CUDA gives (ml_dtypes' e5m2 NaN is 0x7E)
            codes = out.view(np.uint8).copy()
            codes[np.isnan(rounded)] = 0x7F
            out = codes.view(dt.np_dtype)
        return out
    if kind == "float":
        return wrap_int(dt, saturate_to_int(dt, np.trunc(as_float64(arr))))
    wide = np.uint64 if arr.dtype == np.uint64 else np.int64
    return wrap_int(dt, arr.astype(wide))


@_quiet
def round_float(dt: DataType, values: Any) -> np.ndarray:
    """Values after a store to float type `dt` and a load back (float32; float64 for float64)."""
    if not dt.is_float:
        raise TypeError(f"round() is defined for float types; use {dt.name}.cast_array instead")
    arr = np.asarray(values)
    kind = source_kind(arr)
    if dt.name == "float64":
        return arr.astype(np.float64)
    if dt.name == "float32":
        return arr.astype(np.float32)
    if dt.is_standard and kind != "bool" and arr.dtype in (np.float32, np.float16):
        # numpy/ml_dtypes round these sources correctly; fp8 stores saturate (CUDA satfinite).
        fmt = floatcodec.float_format(dt.exponent_bits, dt.mantissa_bits)
        if fmt.saturate:
            arr = np.clip(arr, -fmt.max_value, fmt.max_value)
        return arr.astype(dt.np_dtype).astype(np.float32)
    return to_float(dt, from_float(dt, arr))
