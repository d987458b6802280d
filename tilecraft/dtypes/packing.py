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


# ---- 6- and 7-bit codes in bytes ----------------------------------------------------------------
# Another storage of B-bit codes (B = 6, 7), 32 codes in 4 B bytes (the quantized matmul's 6- and
# 7-bit integer weights and float6_e3m2's: quant/qmm.py): code e < 4 B is the low B bits of byte
# e; the other 4 (8 - B) codes are spread over the bytes' top T = 8 - B bits: code 4 B + 4 j + k
# (k < 4) has bits [T i, T i + T) in the top bits of byte 4 (j B / T + i) + k. With
# `sign_at_top` (floats: a GPU places the byte under the half's sign bit) every byte then has its
# bit B - 1 (the code's top bit, a float's sign) moved to bit 7 and its bits B..7 down by one. A
# GPU casts it with byte permutes (block `cast_bytes`, fast_cast.cuh). (7 bits: 28 codes in
# bytes, 4 spread over 7 bytes' top bits each; 6 bits: 24 and 8 spread over 3 bytes' top two.)
# 3-bit codes sit in nibbles instead: 32 in 3 words, each word 8 codes in the order the 4-bit
# fast cast reads interleaved words (code j of a word's eight in nibble (j % 2) * 4 + j // 2),
# the words' codes 0-23 in the nibbles' low 3 bits and codes 24-31 (a fourth such word) with bit
# i in the top bits of word i's nibbles.
BYTES_BITS = (3, 6, 7)
_NIBBLE_OF = (0, 4, 1, 5, 2, 6, 3, 7)  # code j of a word's eight -> its nibble


def pack_bytes(codes: Any, bits: int, sign_at_top: bool = False) -> Any:
    """Unsigned `bits`-bit codes [..., 32 g] -> their bytes [..., 4 bits g], group by group
    (numpy or torch, on the codes' device)."""
    if bits == 3:
        return _pack_nibbles(codes)
    top, words = 8 - bits, bits // (8 - bits)  # top bits a byte; words a spread code takes
    u = codes.reshape(*codes.shape[:-1], -1, 32)
    low = u[..., :4 * bits]
    spread = u[..., 4 * bits:].reshape(*u.shape[:-1], top, 1, 4)  # [.., g, j, 1, k]
    tops = _cat([(spread >> (top * i)) & ((1 << top) - 1) for i in range(words)], axis=-2)
    out = (low & ((1 << bits) - 1)) | (tops.reshape(low.shape) << bits)
    if sign_at_top:  # (bit bits - 1 to 7, bits bits..7 down one)
        out = (out & ((1 << (bits - 1)) - 1)) | (((out >> (bits - 1)) & 1) << 7) \
            | ((out >> bits) << (bits - 1))
    return out.reshape(*codes.shape[:-1], -1)


def unpack_bytes(data: Any, bits: int, sign_at_top: bool = False) -> Any:
    """The inverse of `pack_bytes`: bytes [..., 4 bits g] -> codes [..., 32 g] (the bytes'
    type)."""
    if bits == 3:
        return _unpack_nibbles(data)
    top, words = 8 - bits, bits // (8 - bits)
    b = data.reshape(*data.shape[:-1], -1, 4 * bits)
    if sign_at_top:
        b = (b & ((1 << (bits - 1)) - 1)) | (((b >> 7) & 1) << (bits - 1)) \
            | (((b >> (bits - 1)) & ((1 << top) - 1)) << bits)
    tops = (b >> bits).reshape(*b.shape[:-1], top, words, 4)  # [.., g, j, i, k]
    spread = sum(tops[..., i, :] << (top * i) for i in range(words))  # [.., g, j, k]
    low = b & ((1 << bits) - 1)
    codes = _cat([low, spread.reshape(*b.shape[:-1], 4 * top)], axis=-1)
    return codes.reshape(*data.shape[:-1], -1)


def _pack_nibbles(codes: Any) -> Any:
    u = codes.reshape(*codes.shape[:-1], -1, 4, 8)  # [.., g, word, code j]
    order = [_NIBBLE_OF.index(p) for p in range(8)]  # nibble p holds code order[p]
    nib = u[..., order]  # [.., g, word, nibble]
    stored = (nib[..., :3, :] & 7) | (((nib[..., 3:, :] >> _arange3(nib)) & 1) << 3)
    pairs = stored[..., 0::2] | (stored[..., 1::2] << 4)  # [.., g, 3, byte]
    return pairs.reshape(*codes.shape[:-1], -1)


def _unpack_nibbles(data: Any) -> Any:
    b = data.reshape(*data.shape[:-1], -1, 3, 4)  # [.., g, word, byte]
    nib = _stack([b & 15, b >> 4], axis=-1).reshape(*b.shape[:-1], 8)  # [.., g, word, nibble]
    spread = sum(((nib[..., i, :] >> 3) & 1) << i for i in range(3))  # [.., g, nibble]
    words = _cat([nib & 7, spread[..., None, :]], axis=-2)  # [.., g, 4, nibble]
    codes = words[..., list(_NIBBLE_OF)]  # [.., g, 4, code j]
    return codes.reshape(*data.shape[:-1], -1)


def _arange3(like: Any) -> Any:
    """[[0], [1], [2]]: word i's top bits carry bit i of the fourth word's codes."""
    if isinstance(like, np.ndarray):
        return np.arange(3, dtype=like.dtype)[:, None]
    import torch

    return torch.arange(3, dtype=like.dtype, device=like.device)[:, None]


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
