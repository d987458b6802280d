"""TMA loads for bulk copies (sm_90a): which tile copies one thread can issue as
`cp.async.bulk.tensor`, and how (block/mbarrier.py's copy_async_bulk).

A copy qualifies when its source is a global tensor of static shape with 2 to 4 dimensions whose
tile covers two of them, the second the innermost (rows x contiguous columns), and its
destination is a whole 16-bit shared tile in the canonical swizzled layout of its shape
(`make_swizzled_layout`: column blocks of W bytes, each row-major with its 16-byte chunks XORed
by row) — exactly what a TMA load with the W-byte swizzle writes, one box of (rows, W / 2)
elements per column block. The kernel gets a tensor map parameter per (tensor, box, swizzle).

    TmaPlan(tensor="A", box=(128, 64), swizzle=128, block=64, rows=128, cols=64,
            row_dim=0, col_dim=1)        # a 128x64 f16 tile of A[M, K]: one box
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.layout import make_swizzled_layout

from .tensors import GlobalTensor, SharedTensor


@dataclass(frozen=True)
class TmaPlan:
    """One TMA load per column block of `block` elements; the map is (tensor, box, swizzle)."""

    tensor: str
    box: tuple[int, ...]  # in the tensor's dimension order, outermost first
    swizzle: int  # bytes
    block: int
    rows: int
    cols: int
    row_dim: int
    col_dim: int


def select_tma(dst: SharedTensor, src: GlobalTensor, dims: tuple[int, ...]) -> TmaPlan | None:
    """The TMA plan of copying the tile of `src` over `dims` into the whole `dst`, or None."""
    from tilecraft.runtime.tensor_map import check_static

    shape = src.buffer.shape
    if (src.dtype != dst.dtype or dst.dtype.bits != 16 or dst.ndim != 2
            or not all(isinstance(d, int) for d in shape) or not 2 <= len(shape) <= 4):
        return None
    if len(dims) != 2 or dims[1] != len(shape) - 1:
        return None
    rows, cols = (int(d) for d in dst.shape)
    want = make_swizzled_layout((rows, cols), 16)
    if want.swizzle is None or dst.layout != want:
        return None
    width = 16 << want.swizzle.bits  # bytes of one column block
    block = width // 2
    if cols % block:
        return None
    box = tuple(rows if d == dims[0] else block if d == dims[1] else 1
                for d in range(len(shape)))
    if check_static(src.dtype.name, shape, box, width) is not None:
        return None
    return TmaPlan(src.buffer.name, box, width, block, rows, cols, dims[0], dims[1])
