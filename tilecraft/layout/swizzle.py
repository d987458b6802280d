"""Bank-conflict-free swizzled shared-memory layouts (the 32/64/128-byte swizzles of TMA/CUTLASS).

Shared memory has 32 banks of 4 bytes; a warp's 16-byte vector accesses are served 8 lanes
(128 bytes) at a time. A 2-D tile whose rows are W bytes wide is cut into column blocks of
`sw` = 128, 64 or 32 bytes (the largest dividing W); blocks are stored one after another, each
row-major, and the whole offset is swizzled with `Swizzle(bits=log2(sw/16), base=log2(v), shift=3)`
where v = elements per 16-byte vector. In bytes this is CUTLASS `Swizzle<log2(sw/16), 4, 3>`, the
pattern TMA writes with CU_TENSOR_MAP_SWIZZLE_{32,64,128}B: 16-byte chunk c of row r lands in
chunk `c ^ ((r >> (3 - bits)) & mask)`. Both whole-row accesses (8 lanes x 16 B along a row) and
ldmatrix reads (8 rows x 16 B at the same column) then touch 8 distinct 16-byte bank groups.

Worked example, fp16 (8, 64) tile, 128-byte swizzle (`show(group=8)`: the 16-byte vector each
cell's vector lands in; row r's vectors are permuted by XOR with r):

       0  1  2  3  4  5  6  7
    0  0  1  2  3  4  5  6  7
    1  9  8 11 10 13 12 15 14
    2 18 19 16 17 22 23 20 21
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .errors import LayoutError
from .shared import SharedLayout, Swizzle, row_major, tile_to_shape

_NAMED_BITS = {"bool": 8, "half": 16, "float": 32, "double": 64, "tf32": 32}


def dtype_bits(dtype: Any) -> int:
    """Bit width of a data type given as an int, a tilecraft DataType, a numpy dtype or a name
    such as "float16", "bfloat16", "int4", "uint3", "float6_e3m2", "float8_e4m3", "f16".

    Names go through `tilecraft.dtypes.resolve` when that module is importable, with a small
    local parser as the fallback (the layout library does not need the dtype module).
    """
    if isinstance(dtype, int):
        return dtype
    bits = getattr(dtype, "bits", None)
    if isinstance(bits, int):
        return bits
    try:
        from tilecraft.dtypes import resolve

        return resolve(dtype).bits
    except (ImportError, ValueError, TypeError):
        pass
    if isinstance(dtype, str):
        name = dtype.lower()
        if name in _NAMED_BITS:
            return _NAMED_BITS[name]
        match = re.fullmatch(r"(?:u?int|b?float|bf|f|i|u|s)(\d+)(?:_e\d+m\d+(?:fn)?)?", name)
        if match:
            return int(match.group(1))
        raise LayoutError(f"unknown data type {dtype!r}")
    itemsize = getattr(dtype, "itemsize", None)
    if isinstance(itemsize, int):
        return itemsize * 8
    raise LayoutError(f"cannot tell the bit width of {dtype!r}")


def swizzle_for(swizzle_bytes: int, dtype_bits: int) -> Swizzle:
    """The 32/64/128-byte swizzle for elements of `dtype_bits` bits (offsets in elements)."""
    if swizzle_bytes not in (32, 64, 128):
        raise LayoutError(f"swizzle width must be 32, 64 or 128 bytes, not {swizzle_bytes}")
    if dtype_bits <= 0 or 128 % dtype_bits:
        raise LayoutError(
            f"a 16-byte vector does not hold a whole number of {dtype_bits}-bit elements"
        )
    vector = 128 // dtype_bits
    return Swizzle(
        bits=(swizzle_bytes // 16).bit_length() - 1, base=vector.bit_length() - 1, shift=3
    )


def choose_swizzle_bytes(row_bytes: int) -> int:
    """Widest swizzle (128, 64, 32 bytes) that divides a row of `row_bytes`; 0 when none does."""
    for width in (128, 64, 32):
        if row_bytes % width == 0:
            return width
    return 0


def make_swizzled_layout(
    shape_or_buffer: Sequence[int] | Any,
    dtype_bits: int | Any | None = None,
    swizzle_bytes: int | None = None,
) -> SharedLayout:
    """Swizzled layout for a tile (..., rows, cols); the swizzle width follows from the row width.

    `shape_or_buffer` is a shape or an object with `.shape` and `.dtype` (dtype as a name, a
    DataType, or a numpy dtype). `dtype_bits` (int or dtype) overrides the buffer's type.
    `swizzle_bytes` forces 32/64/128 (0 for none). Falls back to row-major when no swizzle fits
    (rank < 2, rows narrower than 32 bytes, or elements that do not tile a 16-byte vector).
    Leading dimensions are outermost; the column blocks of one 2-D slice follow each other.
    """
    if hasattr(shape_or_buffer, "shape"):
        shape = tuple(int(s) for s in shape_or_buffer.shape)
        if dtype_bits is None:
            dtype_bits = getattr(shape_or_buffer, "dtype", None)
    else:
        shape = tuple(int(s) for s in shape_or_buffer)
    if dtype_bits is None:
        raise LayoutError("make_swizzled_layout needs dtype_bits (or a buffer with a dtype)")
    bits = globals()["dtype_bits"](dtype_bits)
    if len(shape) < 2 or 128 % bits or (shape[-1] * bits) % 8:
        return row_major(*shape)
    row_bytes = shape[-1] * bits // 8
    width = choose_swizzle_bytes(row_bytes) if swizzle_bytes is None else swizzle_bytes
    if width == 0:
        return row_major(*shape)
    if row_bytes % width:
        raise LayoutError(f"rows of {row_bytes} bytes cannot use a {width}-byte swizzle")
    rows, block = shape[-2], width * 8 // bits
    atom = row_major(rows, block).with_swizzle(swizzle_for(width, bits))
    return tile_to_shape(atom, shape, order="row")
