"""Warp grids of T.gemm: policies, and copies of the grid when the tile is too small."""

from types import SimpleNamespace

import pytest

from tilecraft.diagnostics import TilecraftError
from tilecraft.passes.layout_inference.rules_gemm import c_layout, warp_partition


def _gemm(m, n, policy="Square"):
    return SimpleNamespace(mnk=lambda: (m, n, 64), policy=policy, span=None)


@pytest.mark.parametrize("m, n, policy, warps, want", [
    (128, 128, "Square", 4, (2, 2, 1)),
    (128, 256, "Square", 8, (2, 4, 1)),
    (128, 64, "FullRow", 8, (8, 1, 1)),
    (64, 512, "FullCol", 8, (1, 8, 1)),
    (16, 32, "FullCol", 8, (1, 4, 2)),   # FlashMLA's scores at block_H=16 on 256 threads
    (16, 8, "Square", 8, (1, 1, 8)),
])
def test_warp_partition(m, n, policy, warps, want):
    assert warp_partition(_gemm(m, n, policy), warps) == want


def test_copies_hold_the_whole_accumulator_in_every_copy():
    lay = c_layout(16, 32, 1, 4, 2)
    assert lay.num_threads == 256 and lay.replication == 2
    for t in range(128):  # thread t and t + 128 hold the same elements
        assert lay.thread_elements(t) == lay.thread_elements(t + 128)


def test_a_tile_that_no_warp_can_take_is_reported():
    with pytest.raises(TilecraftError, match="16x8"):
        warp_partition(_gemm(8, 8), 4)
