"""Which TMA plan a tile copy gets (block/select_tma.py): one box per column block of the
swizzled layout, or one box for all of them (`split`) when the column start is provably a
multiple of a block and the tensor holds whole blocks; 8-bit tiles as 16-bit ones."""

import pytest

from tilecraft.block import GlobalTensor, SharedTensor
from tilecraft.block.select_tma import select_tma
from tilecraft.ir import BinOp, Const, Var
from tilecraft.layout import make_swizzled_layout

K = Var.create("k", "int32")


def tile(dtype: str, rows: int, cols: int, bits: int) -> SharedTensor:
    return SharedTensor.create("t", dtype, (rows, cols), make_swizzled_layout((rows, cols), bits))


def col(scale: int, extra: int = 0):
    e = BinOp.create("*", K, Const.create(scale, "int32"))
    return BinOp.create("+", e, Const.create(extra, "int32")) if extra else e


@pytest.mark.parametrize("dtype, bits, cols, offset, split", [
    ("float16", 16, 256, col(256), 64),        # four 128-byte blocks, start k * 256: one box
    ("float16", 16, 256, col(256, 32), 0),     # start k * 256 + 32: a box per block
    ("float16", 16, 64, col(64), 0),           # one block: one box anyway (no split)
    ("uint8", 8, 512, col(512), 128),          # packed weight bytes: 4 blocks of 128
    ("uint8", 8, 512, col(512, 64), 0),
])
def test_a_tile_of_several_blocks_moves_in_one_box_where_its_start_allows(dtype, bits, cols,
                                                                         offset, split):
    src = GlobalTensor.create("g", dtype, (512, 8192))
    plan = select_tma(tile(dtype, 8, cols, bits), src, (0, 1), (Const.create(0, "int32"), offset))
    assert plan is not None and plan.split == split
    if split:
        assert plan.box == (cols // split, 8, split)


def test_a_tensor_of_partial_blocks_keeps_a_box_per_block():
    src = GlobalTensor.create("g", "uint8", (512, 8192 + 64))  # 64 bytes past the last block
    plan = select_tma(tile("uint8", 8, 512, 8), src, (0, 1), (0, col(512)))
    assert plan is not None and plan.split == 0


def test_tiles_tma_cannot_load_get_no_plan():
    src = GlobalTensor.create("g", "float32", (512, 8192))
    assert select_tma(tile("float32", 8, 64, 32), src, (0, 1), (0, 0)) is None  # 32-bit
    src8 = GlobalTensor.create("g", "uint8", (512, 8192))
    row_major = SharedTensor.create("t", "uint8", (8, 512))
    assert select_tma(row_major, src8, (0, 1), (0, 0)) is None  # not the swizzled layout
