"""TMA loads for bulk copies (sm_90a): which tile copies one thread can issue as
`cp.async.bulk.tensor`, and how (block/mbarrier.py's copy_async_bulk).

A copy qualifies when its source is a global tensor of static shape with 2 to 4 dimensions whose
tile covers two of them, the second the innermost (rows x contiguous columns), and its
destination is a whole 16- or 8-bit shared tile in the canonical swizzled layout of its shape
(`make_swizzled_layout`: column blocks of W bytes, each row-major with its 16-byte chunks XORed
by row) — exactly what a TMA load with the W-byte swizzle writes, one box of (rows, W / size)
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
    box: tuple[int, ...]  # in the tensor's dimension order, outermost first (split: see below)
    swizzle: int  # bytes
    block: int
    rows: int
    cols: int
    row_dim: int
    col_dim: int
    #: > 0: one load moves every column block: the map views the tensor's innermost dim as
    #: (blocks of `split` elements, outermost; `split` elements, innermost), so a box of
    #: (cols / split, rows, split) lands as the column blocks one after the other (`box` is
    #: then in that view's order); 0: one load per column block
    split: int = 0


def select_tma(dst: SharedTensor, src: GlobalTensor, dims: tuple[int, ...],
               offset: tuple | None = None) -> TmaPlan | None:
    """The TMA plan of copying the tile of `src` over `dims` into the whole `dst`, or None.
    With the copy's `offset`, a tile of several column blocks whose column start is provably a
    multiple of a block (and a tensor of whole blocks, at most 4 dims) moves in one load
    (`TmaPlan.split`)."""
    from tilecraft.runtime.tensor_map import check_static, split_view

    shape = src.buffer.shape
    bits = dst.dtype.bits
    if (src.dtype != dst.dtype or bits not in (8, 16) or not dst.dtype.is_standard or dst.ndim != 2
            or not all(isinstance(d, int) for d in shape) or not 2 <= len(shape) <= 4):
        return None
    if len(dims) != 2 or dims[1] != len(shape) - 1:
        return None
    rows, cols = (int(d) for d in dst.shape)
    want = make_swizzled_layout((rows, cols), bits)
    if want.swizzle is None or dst.layout != want:
        return None
    width = 16 << want.swizzle.bits  # bytes of one column block
    block = width * 8 // bits
    if cols % block:
        return None
    box = tuple(rows if d == dims[0] else block if d == dims[1] else 1
                for d in range(len(shape)))
    if check_static(src.dtype.name, shape, box, width) is not None:
        return None
    plan = TmaPlan(src.buffer.name, box, width, block, rows, cols, dims[0], dims[1])
    n = cols // block
    if (n > 1 and offset is not None and len(shape) <= 4 and shape[-1] % block == 0
            and _multiple_of(offset[dims[1]], block)):
        rest = tuple(b for d, b in enumerate(box) if d != dims[1])
        split_box = (n, *rest, block)
        view, strides = split_view(shape, block, dst.dtype.bits // 8)
        if check_static(src.dtype.name, view, split_box, width, strides) is None:
            return TmaPlan(src.buffer.name, split_box, width, block, rows, cols, dims[0],
                           dims[1], split=block)
    return plan


def _multiple_of(e, m: int) -> bool:
    """Whether integer expression `e` is provably a multiple of `m` (an affine form whose
    coefficients and constant are)."""
    from tilecraft.ir.simplify import linear_form

    if isinstance(e, int):
        return e % m == 0
    form = linear_form(e)
    return form is not None and form[1] % m == 0 and all(
        isinstance(c, int) and c % m == 0 for c in form[0].values())
