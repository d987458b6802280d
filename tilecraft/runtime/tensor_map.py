"""TMA tensor maps: the 128-byte `CUtensorMap` a kernel's `cp.async.bulk.tensor` loads read.

A map describes one tensor in global memory (base address, dims, strides, element type) and the
box one load moves into shared memory, with its swizzle. It holds the tensor's address, so it is
made at launch (`cuTensorMapEncodeTiled`, a host-only driver call, through ctypes) for each new
(address, shape) and kept in a small per-kernel cache: repeated calls on the same tensors reuse
the bytes. The kernel takes it by value (`const __grid_constant__ tc::TensorMap`).

Dims are given here outermost first, as torch and tilecraft write them; the driver wants them
innermost first, which `encode` does. Elements beyond the tensor's edge are read as zeros.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

MAP_BYTES = 128
_DTYPES = {"uint8": (0, 1), "int8": (0, 1), "uint16": (1, 2), "int16": (1, 2),
           "uint32": (2, 4), "int32": (3, 4), "uint64": (4, 8), "int64": (5, 8),
           "float16": (6, 2), "float32": (7, 4), "float64": (8, 8), "bfloat16": (9, 2),
           "float8_e4m3": (0, 1), "float8_e5m2": (0, 1)}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_*
_L2_256B = 3  # CU_TENSOR_MAP_L2_PROMOTION_L2_256B


class TensorMapError(ValueError):
    """The tensor cannot be described by a tensor map (alignment, strides, sizes)."""


def element_bytes(dtype: str) -> int:
    return _DTYPES[dtype][1]


def check_static(dtype: str, shape: Sequence[int], box: Sequence[int], swizzle: int,
                 strides: Sequence[int] | None = None) -> str | None:
    """Why a tensor of `shape` (contiguous, or with these byte `strides` of all but its
    innermost dim, outermost first) cannot get this map, or None when it can (the checks that
    do not depend on the address)."""
    if dtype not in _DTYPES:
        return f"no tensor map element type for {dtype}"
    if not 1 <= len(shape) <= 5 or len(box) != len(shape):
        return "tensor maps take 1 to 5 dimensions"
    size = _DTYPES[dtype][1]
    if any(not 1 <= b <= 256 for b in box):
        return f"box {tuple(box)}: every side must be 1..256"
    if box[-1] * size % 16:
        return f"box {tuple(box)}: the innermost side must be a multiple of 16 bytes"
    if swizzle not in _SWIZZLE or (swizzle and box[-1] * size > swizzle):
        return f"box {tuple(box)}: the innermost side exceeds the {swizzle}-byte swizzle"
    if strides is None:
        strides, stride = [], size
        for d in reversed(shape[1:]):
            stride *= d
            strides.append(stride)
    if any(st % 16 or st >= 1 << 40 for st in strides):
        return f"shape {tuple(shape)}: row strides must be multiples of 16 bytes"
    if any(d >= 1 << 31 for d in shape):  # the loads' coordinates are signed 32-bit
        return f"shape {tuple(shape)}: dims must be below 2^31"
    return None


class TensorMapEncoder:
    """Makes (and caches) the tensor maps of one kernel parameter."""

    def __init__(self, dtype: str, box: Sequence[int], swizzle: int, name: str = "tensor",
                 split: int = 0):
        self.dtype, self.box, self.swizzle, self.name = dtype, tuple(box), swizzle, name
        self.split = split  # > 0: the innermost dim viewed as (L / split outermost, split)
        self._cache: dict[tuple, Any] = {}

    def __call__(self, address: int, shape: Sequence[int]) -> Any:
        key = (address, tuple(shape))
        blob = self._cache.get(key)
        if blob is None:
            if len(self._cache) >= 64:
                self._cache.clear()
            blob = self._cache[key] = encode(address, self.dtype, shape, self.box, self.swizzle,
                                             self.name, self.split)
        return blob


def split_view(shape: Sequence[int], split: int, size: int) -> tuple[list[int], list[int]]:
    """(dims, byte strides of all but the innermost), outermost first, of a contiguous tensor of
    `shape` whose innermost dim L is viewed as (L / split, outermost; split, innermost): the
    view one TMA box of several column blocks reads (the blocks land one after the other)."""
    *outer, inner = (int(d) for d in shape)
    strides, s = [], size
    for d in reversed([*outer[1:], inner]):
        s *= d
        strides.append(s)
    strides.reverse()  # of outer[0..], outermost first
    return [inner // split, *outer, split], [split * size, *strides]


def encode(address: int, dtype: str, shape: Sequence[int], box: Sequence[int], swizzle: int,
           name: str = "tensor", split: int = 0) -> Any:
    """The CUtensorMap of a contiguous tensor at `address`: a ctypes array of 16 uint64.
    `split` > 0: of its `split_view` (`box` in that view's order)."""
    if split and int(shape[-1]) % split:
        raise TensorMapError(f"`{name}`: its last dim {shape[-1]} is not a multiple of {split}")
    size = _DTYPES[dtype][1] if dtype in _DTYPES else 1
    if split:
        dims, strides = split_view(shape, split, size)
    else:
        dims = [int(d) for d in shape]
        strides, s = [], size
        for d in reversed(dims[1:]):
            s *= d
            strides.append(s)
        strides.reverse()
    why = check_static(dtype, dims, box, swizzle, strides)
    if why is not None:
        raise TensorMapError(f"`{name}`: {why}")
    if address % 16:
        raise TensorMapError(f"`{name}` starts at an address that is not 16-byte aligned")
    from .driver import driver_module

    lib = getattr(driver_module(), "lib", None)
    if lib is None:
        raise TensorMapError("tensor maps need libcuda (the ctypes driver)")
    code = _DTYPES[dtype][0]
    rank = len(dims)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    gdims = (u64 * rank)(*reversed(dims))
    gstrides = (u64 * max(1, rank - 1))(*reversed(strides))
    boxes = (u32 * rank)(*reversed([int(b) for b in box]))
    ones = (u32 * rank)(*[1] * rank)
    blob = (u64 * (MAP_BYTES // 8))()
    err = lib.cuTensorMapEncodeTiled(blob, code, rank, address, gdims, gstrides, boxes, ones, 0,
                                     _SWIZZLE[swizzle], _L2_256B, 0)
    if err:
        from .cuda_ctypes import CUresult

        raise TensorMapError(f"`{name}`: cuTensorMapEncodeTiled failed: {CUresult(err).name} "
                             f"(shape {tuple(shape)}, box {tuple(box)}, {dtype})")
    return blob
