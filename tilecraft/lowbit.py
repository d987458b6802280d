"""Low-precision tensors on the host: quantize floats to codes, pack codes into the bytes a kernel
takes, and back (docs/dtypes.md "Host side").

    import tilecraft
    codes = tilecraft.quantize_to(w, "int6")        # nearest code, ties to even, saturating
    packed = tilecraft.pack(codes, "int6")           # 1-D uint8, element i in bits [6i, 6i + 6)
    kernel(x, packed)                                # a `T.Tensor((K, N), "int6")` parameter
    tilecraft.unpack(packed, "int6", (K, N))         # the codes again, shaped (K, N)
    tilecraft.dequantize(codes, "int6")              # their exact values, float32

Each function takes a torch tensor (CPU or CUDA: the work is done with torch operations on the
tensor's device, and the result stays there) or a numpy array (or a list; the result is numpy).
Types are those of `tilecraft.dtypes` of at most 8 bits: sub-byte ints, int8/uint8, fp8 and every
custom float. Codes are bit patterns in [0, 2**bits), uint8. The results are bit-exact with
`tilecraft.dtypes` (numpy inputs go through it; the torch paths compute the same rounding:
tests/test_lowbit_api.py compares them on every code and on ties, subnormals, overflow and NaN).
A misuse is TC321 at the caller's line.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilecraft import dtypes
from tilecraft.diagnostics import TilecraftError
from tilecraft.diagnostics.errors import caller_span, entry_point
from tilecraft.dtypes import DataType
from tilecraft.dtypes.floatcodec import float_format

__all__ = ["dequantize", "pack", "quantize_to", "unpack"]


class LowbitError(TilecraftError, ValueError):
    """TC321: a call of tilecraft.pack/unpack/quantize_to/dequantize that cannot be done."""


def _refuse(func: str, detail: str, hint: str = "") -> LowbitError:
    return LowbitError("TC321", span=caller_span(), func=func, detail=detail, hint=hint)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _dtype(func: str, dtype: Any) -> DataType:
    try:
        dt = dtypes.resolve(dtype)
    except (ValueError, TypeError) as exc:
        raise _refuse(func, f"unknown data type {dtype!r}", str(exc)) from None
    if dt.bits > 8 or dt.is_bool:
        raise _refuse(func, f"{dt.name} is not a low-precision type",
                      "these functions take types of at most 8 bits (sub-byte ints, int8, "
                      "uint8, fp8, custom floats); torch has the others")
    return dt


def _codes(func: str, codes: Any, dt: DataType) -> Any:
    """`codes` checked: integers in [0, 2**bits) (torch stays torch, else a numpy array)."""
    if _is_torch(codes):
        kind = str(codes.dtype).replace("torch.", "")
        ok = not (codes.is_floating_point() or codes.is_complex()) and kind != "bool"
        low = high = 0
        if ok and codes.numel():
            low, high = int(codes.min()), int(codes.max())
    else:
        codes = np.asarray(codes)
        if codes.size == 0 and codes.dtype.kind == "f":  # an empty list arrives as float64
            codes = codes.astype(np.uint8)
        ok = codes.dtype.kind in "iu"
        low, high = (int(codes.min()), int(codes.max())) if ok and codes.size else (0, 0)
        kind = str(codes.dtype)
    if not ok:
        raise _refuse(func, f"codes of {dt.name} must be integers, got dtype {kind}",
                      f"float values become codes with `tilecraft.quantize_to(x, \"{dt.name}\")`")
    if low < 0 or high >> dt.bits:
        raise _refuse(func, f"codes of {dt.name} lie in [0, {1 << dt.bits}), got values in "
                      f"[{low}, {high}]", "signed or float values become codes with "
                      f"`tilecraft.quantize_to(values, \"{dt.name}\")`")
    return codes


# ---- packing ----------------------------------------------------------------------------------
@entry_point
def pack(codes: Any, dtype: Any) -> Any:
    """Codes of `dtype` (any shape, read in C order) -> their packed bytes, 1-D uint8 of
    `ceil(n * bits / 8)` bytes: element i in bits [i*bits, (i+1)*bits), least significant bit
    first, unused high bits of the last byte zero. The bytes a kernel parameter of that dtype
    takes (any shape of them will do)."""
    dt = _dtype("pack", dtype)
    codes = _codes("pack", codes, dt)
    if not _is_torch(codes):
        return dtypes.pack(codes, dt)
    import torch

    flat = codes.reshape(-1).to(torch.uint8)
    if dt.bits == 8:
        return flat.clone() if flat.data_ptr() == codes.data_ptr() else flat
    bits = (flat[:, None] >> _arange(dt.bits, flat.device)) & 1  # (n, b): bit j of element i
    bits = bits.reshape(-1)
    pad = -bits.numel() % 8
    if pad:
        bits = torch.cat([bits, bits.new_zeros(pad)])
    return (bits.reshape(-1, 8) << _arange(8, flat.device)).sum(1).to(torch.uint8)


@entry_point
def unpack(packed: Any, dtype: Any, shape: int | Sequence[int]) -> Any:
    """Packed bytes (uint8 or int8, any shape, C order; or a bytes object) -> the codes of a
    `dtype` tensor of `shape`, uint8, on the input's device. The bytes must be exactly
    `ceil(prod(shape) * bits / 8)`, as a kernel parameter's are."""
    dt = _dtype("unpack", dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    count = int(np.prod(shape, dtype=np.int64))
    if isinstance(packed, (bytes, bytearray, memoryview)):
        packed = np.frombuffer(packed, dtype=np.uint8)
    torch_in = _is_torch(packed)
    if not torch_in:
        packed = np.asarray(packed)
    kind = str(packed.dtype).replace("torch.", "")
    if kind not in ("uint8", "int8"):
        raise _refuse("unpack", f"packed bytes are uint8 or int8, got dtype {kind}",
                      f"make them with `tilecraft.pack(codes, \"{dt.name}\")`")
    nbytes = packed.numel() if torch_in else packed.size
    expected = dtypes.packed_nbytes(count, dt)
    if nbytes != expected:
        raise _refuse("unpack", f"{count} elements of {dt.name} pack into {expected} bytes, "
                      f"got {nbytes}", "pass the shape the bytes were packed from")
    if not torch_in:
        return dtypes.unpack(packed.reshape(-1).view(np.uint8), dt, count).reshape(shape)
    import torch

    raw = packed.reshape(-1).view(torch.uint8)
    if dt.bits == 8:
        return raw.clone().reshape(shape)
    bits = ((raw[:, None] >> _arange(8, raw.device)) & 1).reshape(-1)[: count * dt.bits]
    weights = bits.reshape(count, dt.bits) << _arange(dt.bits, raw.device)
    return weights.sum(1).to(torch.uint8).reshape(shape)


def _arange(n: int, device: Any) -> Any:
    import torch

    return torch.arange(n, dtype=torch.uint8, device=device)


# ---- values <-> codes -------------------------------------------------------------------------
@entry_point
def quantize_to(x: Any, dtype: Any) -> Any:
    """Numbers -> codes of `dtype` (uint8, same shape and device), as `dtype.from_float` does:
    floats round to the nearest value, ties to the even code, saturate to +-max (+-inf too) and
    NaN gives `nan_code` (0x7F for fp8, +0 for custom floats, which have no NaN); a negative
    number that rounds to zero keeps its sign. Ints round half to even and saturate to
    [min, max]; NaN gives 0."""
    dt = _dtype("quantize_to", dtype)
    if not _is_torch(x):
        arr = np.asarray(x)
        if arr.dtype.kind not in "fiub" and arr.dtype.kind != "V":
            raise _refuse("quantize_to", f"cannot quantize an array of dtype {arr.dtype}")
        return dt.from_float(arr)
    import torch

    if x.is_complex():
        raise _refuse("quantize_to", f"cannot quantize a tensor of dtype {x.dtype}")
    work = torch.float64 if x.dtype in (torch.float64, torch.int64, torch.int32) else torch.float32
    v = x.to(work)
    if dt.is_integer:
        q = torch.where(torch.isnan(v), 0.0, torch.round(v)).clamp(dt.min, dt.max)
        return (q.to(torch.int16) & ((1 << dt.bits) - 1)).to(torch.uint8)
    mids = torch.tensor(_midpoints(dt), dtype=work, device=v.device)
    mag = v.abs()
    code = torch.bucketize(mag, mids)  # mids[code - 1] < mag <= mids[code]
    at = code.clamp(max=mids.numel() - 1)
    tie = (code < mids.numel()) & (mag == mids[at]) & (code % 2 == 1)
    code = code + tie  # a tie goes to the even code
    code = code | (torch.signbit(v).to(code.dtype) << (dt.bits - 1))
    code = torch.where(torch.isnan(v), float_format(*_em(dt)).nan_code, code)
    return code.to(torch.uint8)


@entry_point
def dequantize(codes: Any, dtype: Any) -> Any:
    """Codes of `dtype` -> their exact values, float32 (same shape and device); NaN codes give
    NaN with the code's sign."""
    dt = _dtype("dequantize", dtype)
    codes = _codes("dequantize", codes, dt)
    table = _values(dt)
    if not _is_torch(codes):
        return table[codes.astype(np.intp)]
    import torch

    return torch.tensor(table, device=codes.device)[codes.long()]


def _em(dt: DataType) -> tuple[int, int]:
    return dt.exponent_bits, dt.mantissa_bits


@functools.cache
def _values(dt: DataType) -> np.ndarray:
    """Every code's value (float32, exact), indexed by code."""
    table = dt.to_float(np.arange(1 << dt.bits)).astype(np.float32)
    table.flags.writeable = False
    return table


@functools.cache
def _midpoints(dt: DataType) -> np.ndarray:
    """The midpoints between consecutive finite magnitudes of float type `dt` (codes 0 ..
    max_code increase), exact in float32 (at most 6 significant bits)."""
    fmt = float_format(*_em(dt))
    values = dt.to_float(np.arange(fmt.max_code + 1)).astype(np.float64)
    mids = (values[:-1] + values[1:]) / 2
    assert np.array_equal(mids.astype(np.float32).astype(np.float64), mids)
    mids.flags.writeable = False
    return mids
