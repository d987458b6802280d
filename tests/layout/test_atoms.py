"""Hardware fragment layouts agree with the PTX ISA tables, written out here independently."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.layout import LayoutError, ldmatrix_layout
from tilecraft.layout.atoms import (
    LDMATRIX_X1,
    LDMATRIX_X2_TRANS,
    LDMATRIX_X4,
    MMA_ATOMS,
    MMA_M16N8K8_F16,
    MMA_M16N8K16_A,
    MMA_M16N8K16_B,
    MMA_M16N8K16_C,
    MMA_M16N8K16_D,
    MMA_M16N8K16_F16,
    MMA_M16N8K32_S8,
)


def ptx_table(layout, formula, regs: int) -> None:
    """Assert layout.map(lane, i) == formula(groupID, threadID_in_group, i) for the whole warp."""
    assert layout.num_threads == 32 and layout.local_size == regs
    for lane in range(32):
        group, tig = lane >> 2, lane % 4
        for i in range(regs):
            assert layout.map(lane, i) == formula(group, tig, i), (lane, i)


# PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type"
def test_mma_m16n8k16_a_fragment():
    def a(g, tig, i):
        row = g if i < 2 or 4 <= i < 6 else g + 8
        col = tig * 2 + (i & 1) + (8 if i >= 4 else 0)
        return row, col

    assert MMA_M16N8K16_A.shape == (16, 16)
    ptx_table(MMA_M16N8K16_A, a, 8)


def test_mma_m16n8k16_b_fragment_given_as_k_by_n():
    def b(g, tig, i):
        return tig * 2 + (i & 1) + (8 if i >= 2 else 0), g

    assert MMA_M16N8K16_B.shape == (16, 8)
    ptx_table(MMA_M16N8K16_B, b, 4)


def test_mma_m16n8k16_c_and_d_fragment():
    def c(g, tig, i):
        return g + 8 * (i >= 2), tig * 2 + (i & 1)

    assert MMA_M16N8K16_C.shape == (16, 8) and MMA_M16N8K16_D == MMA_M16N8K16_C
    ptx_table(MMA_M16N8K16_C, c, 4)


def test_mma_accumulator_is_the_design_doc_product():
    from tilecraft.layout import local

    assert MMA_M16N8K16_C == local(2, 1).spatial(8, 4).local(1, 2)


def test_mma_m16n8k8_fragments():
    ptx_table(MMA_M16N8K8_F16.a, lambda g, tig, i: (g + 8 * (i >= 2), tig * 2 + (i & 1)), 4)
    ptx_table(MMA_M16N8K8_F16.b, lambda g, tig, i: (tig * 2 + i, g), 2)


# PTX ISA "Matrix Fragments for mma.m16n8k32" (.s8/.u8)
def test_mma_m16n8k32_s8_fragments():
    def a(g, tig, i):
        row = g if i < 4 or 8 <= i < 12 else g + 8
        return row, tig * 4 + (i & 3) + (16 if i >= 8 else 0)

    def b(g, tig, i):
        return tig * 4 + (i & 3) + (16 if i >= 4 else 0), g

    ptx_table(MMA_M16N8K32_S8.a, a, 16)
    ptx_table(MMA_M16N8K32_S8.b, b, 8)
    assert MMA_M16N8K32_S8.a.shape == (16, 32) and MMA_M16N8K32_S8.b.shape == (32, 8)


def test_every_atom_has_shapes_m_by_k_k_by_n_m_by_n():
    for atom in MMA_ATOMS.values():
        assert atom.a.shape == (atom.m, atom.k)
        assert atom.b.shape == (atom.k, atom.n)
        assert atom.c.shape == (atom.m, atom.n) and atom.d == atom.c


def simulate_ldmatrix(num: int, trans: bool) -> np.ndarray:
    """[32, num*2] logical (row, col) each lane receives, per the PTX ldmatrix description.

    Lane l supplies the address of row l % 8 of matrix l // 8 (rows stacked: global row = l).
    Without .trans, lane t receives in register m the elements (t // 4, 2 * (t % 4) + j) of
    matrix m; with .trans the matrix is transposed: (2 * (t % 4) + j, t // 4).
    """
    out = np.zeros((32, num * 2, 2), dtype=np.int64)
    for t in range(32):
        for m in range(num):
            for j in range(2):
                r, c = (t // 4, 2 * (t % 4) + j) if not trans else (2 * (t % 4) + j, t // 4)
                out[t, m * 2 + j] = (8 * m + r, c)
    return out


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_result_layouts(num, trans):
    layout = ldmatrix_layout(num, trans)
    assert layout.shape == (8 * num, 8) and layout.local_size == 2 * num
    np.testing.assert_array_equal(layout.index_table(), simulate_ldmatrix(num, trans))


def test_ldmatrix_constants_and_bad_counts():
    assert LDMATRIX_X1 == ldmatrix_layout(1) and LDMATRIX_X4 == ldmatrix_layout(4)
    assert LDMATRIX_X2_TRANS == ldmatrix_layout(2, trans=True)
    with pytest.raises(LayoutError):
        ldmatrix_layout(3)


def test_ldmatrix_x4_loads_an_mma_a_fragment():
    # thread t's registers of the x4 result, matrix m = (row block m % 2, col block m // 2)
    atom = MMA_M16N8K16_F16.a
    for t in range(32):
        x4 = LDMATRIX_X4.thread_elements(t)
        placed = [(r % 8 + 8 * ((r // 8) % 2), c + 8 * (r // 16)) for r, c in x4]
        assert placed == atom.thread_elements(t)
