"""Compact storage of codes in bytes (Tilus section 7.1).

Element i of a b-bit type occupies bits [i*b, (i+1)*b) of the byte stream, where bit k of the
stream is bit (k % 8) of byte k // 8 (least significant bit first), and bit j of the element's code
is stream bit i*b + j. There are no gaps, so an element may straddle two bytes: for b = 3, element 2
is bits 6..8 (bits 6 and 7 of byte 0, bit 0 of byte 1). Types of 8, 16, 32 or 64 bits pack as
their little-endian bytes, which is the same rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilecraft.dtypes.convert import check_codes
from tilecraft.dtypes.registry import resolve


def packed_nbytes(count: int, dtype: Any) -> int:
    """Bytes needed to store `count` elements of `dtype` compactly."""
    return (count * resolve(dtype).bits + 7) // 8


def pack(codes: Any, dtype: Any) -> np.ndarray:
    """Codes (any shape, read in C order) -> a 1-D uint8 array of `packed_nbytes` bytes.

    Unused high bits of the last byte are zero. Codes must lie in [0, 2**bits); encode signed or
    float values first with `dt.encode` / `dt.from_float`.
    """
    dt = resolve(dtype)
    flat = check_codes(dt, codes).ravel()
    if dt.bits % 8 == 0:
        return flat.astype(f"<u{dt.bits // 8}").view(np.uint8)
    shifts = np.arange(dt.bits, dtype=np.uint8)
    bits = ((flat[:, None] >> shifts) & 1).astype(np.uint8).ravel()
    return np.packbits(bits, bitorder="little")


def unpack(data: Any, dtype: Any, count: int | None = None) -> np.ndarray:
    """Bytes -> the first `count` codes (1-D, `dt.code_dtype`); the inverse of `pack`.

    `data` is a uint8 array (any shape, C order) or a bytes-like object. Without `count`, as many
    whole elements as the bytes hold are returned.
    """
    dt = resolve(dtype)
    raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray)) else data
    raw = np.asarray(raw)
    if raw.dtype != np.uint8:
        raise TypeError(f"unpack expects uint8 bytes, got dtype {raw.dtype}")
    raw = raw.ravel()
    available = raw.size * 8 // dt.bits
    if count is None:
        count = available
    if count < 0 or count > available:
        raise ValueError(
            f"cannot unpack {count} elements of {dt.name} from {raw.size} bytes "
            f"(they hold {available})"
        )
    if dt.bits % 8 == 0:
        nbytes = count * dt.bits // 8
        return raw[:nbytes].copy().view(f"<u{dt.bits // 8}").astype(dt.code_dtype)
    bits = np.unpackbits(raw, count=count * dt.bits, bitorder="little").reshape(count, dt.bits)
    weights = (1 << np.arange(dt.bits)).astype(np.uint8)
    return (bits * weights).sum(axis=1, dtype=np.uint8)


# ---- 7-bit codes in bytes ------------------------------------------------------------------------
# Another storage of 7-bit codes, 32 codes in 28 bytes (the 7-bit quantized weights': quant/qmm.py):
# code e < 28 is the low 7 bits of byte e, and code 28 + k (k < 4) has bit i in the top bit of
# byte 4 i + k. A GPU casts it with byte permutes (block `cast_bytes7`, fast_cast.cuh).
BYTES7_GROUP = (32, 28)  # (codes, bytes) of one group


def pack_bytes7(codes: Any) -> Any:
    """Unsigned 7-bit codes [..., 32 g] -> their bytes [..., 28 g], group by group (numpy or
    torch, on the codes' device)."""
    u = codes.reshape(*codes.shape[:-1], -1, 32)
    low, spread = u[..., :28], u[..., 28:]  # (spread: [..., g, 4])
    top = [(spread >> i) & 1 for i in range(7)]  # bit i of the 4 spread codes: bytes 4i..4i+3
    tops = _stack(top, axis=-2).reshape(low.shape)
    out = (low & 0x7F) | (tops << 7)
    return out.reshape(*codes.shape[:-1], -1)


def unpack_bytes7(data: Any) -> Any:
    """The inverse of `pack_bytes7`: bytes [..., 28 g] -> codes [..., 32 g] (the bytes' type)."""
    b = data.reshape(*data.shape[:-1], -1, 7, 4)
    tops = (b >> 7) & 1
    spread = sum(tops[..., i, :] << i for i in range(7))
    low = (b & 0x7F).reshape(*b.shape[:-2], 28)
    return _cat([low, spread], axis=-1).reshape(*data.shape[:-1], -1)


def _stack(parts: list, axis: int) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.stack(parts, axis=axis)
    import torch

    return torch.stack(parts, dim=axis)


def _cat(parts: list, axis: int) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=axis)
    import torch

    return torch.cat(parts, dim=axis)
