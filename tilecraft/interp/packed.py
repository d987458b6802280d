"""Packed global tensors for the interpreter and the block VM (Tilus section 7.1, Figure 8).

A tensor of a type numpy cannot hold per element (sub-byte ints, custom floats: every type whose
`DataType.is_standard` is False) lives in global memory as `packed_nbytes(prod(shape), dtype)`
bytes, least significant bit first: element i (row-major) occupies bits [i*b, (i+1)*b) of the
byte string, and may straddle two bytes (tilecraft/dtypes/packing.py). `PackedArray` is that
tensor over the caller's bytes: indexing it like a numpy array (ints, slices, index arrays)
reads values in the type's compute dtype (`dtype.np_dtype`: int8/uint8 with sign extension for
sub-byte ints, float32 for custom floats), and assigning writes codes by clearing and inserting
exactly their bits, so a store of one element leaves the others of its byte alone.

    data = dtypes.pack(codes, "int6")            # the caller's bytes
    w = PackedArray(data, (4, 8), dtypes.int6)   # no copy: writes land in `data`
    w[1, 2:5]                                    # int8 values
    w[0, 0] = -3                                 # bits 0..5 of data[0] change, nothing else

`codes_of` / `values_of` convert between values and codes bit-exactly for every type (standard
floats keep NaN payloads: the VM's `view` reinterprets bits and nothing else).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilecraft import dtypes as dt


def is_packed(dtype: dt.DataType) -> bool:
    """True for the types global memory holds packed (no numpy type holds them per element)."""
    return not dtype.is_standard


def codes_of(dtype: dt.DataType, values: Any) -> np.ndarray:
    """Values of `dtype` (in its compute dtype) -> codes, bit-exactly (NaN payloads kept)."""
    arr = np.asarray(values)
    npt = np.dtype(dtype.np_dtype)
    if dtype.is_standard and npt.itemsize * 8 == dtype.bits:
        return np.ascontiguousarray(arr.astype(npt, copy=False)).view(dtype.code_dtype)
    return np.asarray(dtype.encode(arr)).astype(dtype.code_dtype, copy=False)


def values_of(dtype: dt.DataType, codes: Any) -> np.ndarray:
    """Codes -> values in `dtype`'s compute dtype; the inverse of `codes_of`."""
    return np.asarray(dtype.decode(np.asarray(codes).astype(dtype.code_dtype, copy=False)))


def byte_view(arr: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a 1-D uint8 view (no copy); ValueError otherwise."""
    if not arr.flags.c_contiguous:
        raise ValueError("the array is not contiguous")
    return arr.reshape(-1).view(np.uint8)


class PackedArray:
    """A tensor of `dtype` and `shape` stored packed in the 1-D uint8 array `data` (shared, not
    copied). Supports `shape`, `ndim`, `size`, `dtype` (the compute numpy dtype), `dt` (the
    tilecraft type), `a[key]` and `a[key] = values` with numpy's int, slice and index-array keys,
    and `np.asarray(a)` (all values)."""

    def __init__(self, data: np.ndarray, shape: tuple[int, ...], dtype: Any) -> None:
        self.dt = dt.resolve(dtype)
        self.shape = tuple(int(n) for n in shape)
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
            raise ValueError("PackedArray needs a 1-D uint8 array of bytes")
        need = dt.packed_nbytes(self.size, self.dt)
        if data.size < need:
            raise ValueError(f"{self.dt.name}{list(self.shape)} packs into {need} bytes, got "
                             f"{data.size}")
        self.data = data

    @classmethod
    def zeros(cls, shape: tuple[int, ...], dtype: Any) -> PackedArray:
        """A zero-filled packed tensor (a fresh workspace)."""
        n = dt.packed_nbytes(int(np.prod(shape, dtype=np.int64)), dtype)
        return cls(np.zeros(n, np.uint8), shape, dtype)

    @classmethod
    def from_values(cls, values: Any, dtype: Any) -> PackedArray:
        """Values (any shape) stored packed in new bytes."""
        dtype = dt.resolve(dtype)
        values = np.asarray(values)
        return cls(dt.pack(codes_of(dtype, values), dtype), values.shape, dtype)

    # ---- numpy-like surface ---------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.dt.np_dtype)

    @property
    def nbytes(self) -> int:
        return dt.packed_nbytes(self.size, self.dt)

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"PackedArray({self.dt.name}{list(self.shape)}, {np.asarray(self)!r})"

    def __str__(self) -> str:
        return str(np.asarray(self))

    def codes(self) -> np.ndarray:
        """Every element's code, in the tensor's shape."""
        return self.read_codes(np.arange(self.size, dtype=np.int64)).reshape(self.shape)

    def __getitem__(self, key: Any) -> Any:
        flat = self.flat_index(key)
        values = values_of(self.dt, self.read_codes(flat.reshape(-1))).reshape(flat.shape)
        return values[()] if values.ndim == 0 else values

    def __setitem__(self, key: Any, values: Any) -> None:
        flat = self.flat_index(key)
        v = np.broadcast_to(np.asarray(values), flat.shape)
        self.write_codes(flat.reshape(-1), codes_of(self.dt, v).reshape(-1))

    # ---- bits ----------------------------------------------------------------------------
    def read_codes(self, flat: np.ndarray) -> np.ndarray:
        """The codes of elements `flat` (row-major element numbers, 1-D)."""
        b = self.dt.bits
        bit = flat.astype(np.int64) * b
        byte, off = bit >> 3, bit & 7
        word = self.data[byte].astype(np.uint16)
        two = off + b > 8  # the element straddles into the next byte
        if two.any():
            word[two] |= self.data[byte[two] + 1].astype(np.uint16) << 8
        return ((word >> off.astype(np.uint16)) & ((1 << b) - 1)).astype(self.dt.code_dtype)

    def write_codes(self, flat: np.ndarray, codes: np.ndarray) -> None:
        """Store `codes` into elements `flat` (1-D each; a repeated element keeps its last code,
        as numpy's assignment does). Only the elements' own bits change."""
        if flat.size > 1:
            last, first = np.unique(flat[::-1], return_index=True)
            flat, codes = last, codes[::-1][first]
        b = self.dt.bits
        bit = flat.astype(np.int64) * b
        byte, off = bit >> 3, (bit & 7).astype(np.uint16)
        mask = np.uint16((1 << b) - 1) << off
        field = (codes.astype(np.uint16) & np.uint16((1 << b) - 1)) << off
        np.bitwise_and.at(self.data, byte, (~mask & 0xFF).astype(np.uint8))
        np.bitwise_or.at(self.data, byte, (field & 0xFF).astype(np.uint8))
        two = (off + b) > 8
        if two.any():
            np.bitwise_and.at(self.data, byte[two] + 1, (~(mask[two] >> 8) & 0xFF).astype(np.uint8))
            np.bitwise_or.at(self.data, byte[two] + 1, (field[two] >> 8).astype(np.uint8))

    # ---- keys -> element numbers --------------------------------------------------------
    def flat_index(self, key: Any) -> np.ndarray:
        """The row-major element numbers `key` selects, in the shape numpy's `a[key]` has."""
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) == 1:
            at = key.index(Ellipsis)
            key = key[:at] + (slice(None),) * (self.ndim - len(key) + 1) + key[at + 1:]
        key = key + (slice(None),) * (self.ndim - len(key))
        if len(key) != self.ndim or any(k is None or k is Ellipsis for k in key):
            return self._general(key)
        strides = np.cumprod((1,) + self.shape[:0:-1], dtype=np.int64)[::-1]
        if all(isinstance(k, (slice, int, np.integer)) for k in key):  # basic indexing
            flat = np.zeros((), np.int64)
            for k, n, st in zip(key, self.shape, strides):
                if isinstance(k, slice):
                    flat = flat[..., None] + np.arange(n, dtype=np.int64)[k] * st
                else:
                    flat = flat + self._checked(np.asarray(k), n) * st
            return flat
        arrays = [np.asarray(k) for k in key]
        if any(isinstance(k, slice) for k in key) or any(a.dtype.kind not in "iu" for a in arrays):
            return self._general(key)
        arrays = np.broadcast_arrays(*arrays)
        flat = np.zeros(arrays[0].shape, np.int64)
        for a, n, st in zip(arrays, self.shape, strides):
            flat += self._checked(a, n) * st
        return flat

    def _checked(self, i: np.ndarray, n: int) -> np.ndarray:
        i = i.astype(np.int64)
        if i.size and (i.min() < -n or i.max() >= n):
            bad = int(i.min()) if i.min() < -n else int(i.max())
            raise IndexError(f"index {bad} is out of bounds for a dimension of size {n}")
        return np.where(i < 0, i + n, i)

    def _general(self, key: tuple) -> np.ndarray:
        return np.arange(self.size, dtype=np.int64).reshape(self.shape)[key]


def wrap_argument(arr: np.ndarray, shape: tuple[int, ...], dtype: dt.DataType
                  ) -> np.ndarray | PackedArray:
    """A kernel argument for a global tensor of `dtype` and `shape`, as the interpreter and the
    VM hold it: a packed type's bytes (uint8/int8, contiguous, any shape, exactly
    `packed_nbytes` of them) as a `PackedArray`; float8 bytes as a float8 view of `shape`;
    anything else unchanged. ValueError (saying what is wrong) for bytes of the wrong count."""
    if isinstance(arr, PackedArray):
        if arr.dt != dtype or arr.shape != tuple(shape):
            raise ValueError(f"expected {dtype.name}{list(shape)}, got {arr.dt.name}"
                             f"{list(arr.shape)}")
        return arr
    if arr.dtype not in (np.uint8, np.int8):
        return arr
    if not (is_packed(dtype) or (dtype.is_float and dtype.bits == 8)):
        return arr  # int8/uint8/bool tensors are themselves
    count = int(np.prod(shape, dtype=np.int64))
    want = dt.packed_nbytes(count, dtype)
    if arr.size != want:
        raise ValueError(f"{dtype.name}{list(shape)} packs into {want} bytes, got {arr.size} "
                         f"({arr.dtype}{list(arr.shape)})")
    try:
        data = byte_view(arr)
    except ValueError:
        raise ValueError(f"packed bytes must be contiguous, got {arr.dtype}{list(arr.shape)} "
                         f"with strides {arr.strides}") from None
    if is_packed(dtype):
        return PackedArray(data, shape, dtype)
    return data.view(dtype.np_dtype).reshape(shape)  # float8 bytes


def view_bytes(src: np.ndarray | PackedArray, shape: tuple[int, ...], dtype: dt.DataType
               ) -> np.ndarray | PackedArray:
    """`src`'s bytes as a tensor of `dtype` and `shape` (equal total bits), aliasing them: a
    write through either shows in the other. ValueError when the bits differ or `src` is not
    contiguous."""
    src_bits = src.size * (src.dt.bits if isinstance(src, PackedArray) else src.dtype.itemsize * 8)
    count = int(np.prod(shape, dtype=np.int64))
    if src_bits != count * dtype.bits:
        raise ValueError(f"the source holds {src_bits} bits, {dtype.name}{list(shape)} "
                         f"holds {count * dtype.bits} bits")
    data = src.data[:src.nbytes] if isinstance(src, PackedArray) else byte_view(src)
    if is_packed(dtype):
        return PackedArray(data, shape, dtype)
    return data.view(dtype.np_dtype).reshape(shape)


__all__ = ["PackedArray", "byte_view", "codes_of", "is_packed", "values_of", "view_bytes",
           "wrap_argument"]
