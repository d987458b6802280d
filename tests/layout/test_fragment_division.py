"""Division undoes the product: (a * b) / b == a, f.left_divide... and fails cleanly otherwise."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings

from tilecraft.layout import (
    LayoutError,
    column_local,
    column_spatial,
    divides,
    left_divide,
    local,
    replicate,
    spatial,
)
from tilecraft.layout.atoms import LDMATRIX_X1, LDMATRIX_X1_TRANS, MMA_M16N8K16_F16

from .layout_strategies import fragments, universe


def test_paper_example_local_2_4_over_local_1_2():
    assert local(2, 4) / local(1, 2) == local(2, 2)


def test_right_and_left_division_recover_both_factors_on_all_small_pairs():
    small = universe(max_factors=2, max_weight=8)
    for f, g in itertools.product(small, small):
        h = f * g
        assert h / g == f
        assert h.left_divide(f) == g
        assert divides(h, g) and h.divisible_by(g)


def _divides_by_brute_force(a, b) -> bool:
    """Is there a function q with a(t, i) = q(t // Tb, i // Nb) * Sb + b(t % Tb, i % Nb)?"""
    if a.ndim != b.ndim or any(x % y for x, y in zip(a.shape, b.shape)):
        return False
    if a.num_threads % b.num_threads or a.local_size % b.local_size:
        return False
    ta, tb = a.index_table(), b.index_table()
    q = ta[:: b.num_threads, :: b.local_size] // np.array(b.shape)
    t, i = np.meshgrid(np.arange(a.num_threads), np.arange(a.local_size), indexing="ij")
    rebuilt = q[t // b.num_threads, i // b.local_size] * np.array(b.shape)
    rebuilt += tb[t % b.num_threads, i % b.local_size]
    return bool(np.array_equal(rebuilt, ta))


def test_division_succeeds_exactly_when_a_quotient_function_exists():
    small = universe(max_factors=2, max_weight=16)
    for n, (a, b) in enumerate(itertools.product(small, small[::3])):
        expected = _divides_by_brute_force(a, b)
        assert divides(a, b) == expected, (a, b)
        if expected:
            assert (a / b) * b == a
        elif n % 16 == 0:  # the raising path formats both layouts: sample it
            with pytest.raises(LayoutError, match="does not divide"):
                a / b


@settings(max_examples=200, deadline=None)
@given(fragments(), fragments())
def test_quotient_times_divisor_is_the_dividend(a, b):
    h = a * b
    assert (h / b) * b == h
    assert a * h.left_divide(a) == h


def test_non_dividing_shapes_raise():
    with pytest.raises(LayoutError, match="does not divide"):
        local(2, 3) / local(1, 2)
    with pytest.raises(LayoutError):
        spatial(4, 4) / local(1, 2)
    with pytest.raises(LayoutError):
        local(2, 1).spatial(8, 4) / column_spatial(2, 4)  # right shape, wrong thread order


def test_division_splits_merged_modes():
    assert spatial(8) / spatial(2) == spatial(4)
    assert spatial(8).left_divide(spatial(2)) == spatial(4)
    assert local(6) / local(3) == local(2)
    with pytest.raises(LayoutError):
        local(6) / local(4)


def test_divides_uses_the_argument_order_of_the_slash():
    acc = local(2, 1).spatial(8, 4).local(1, 2)
    assert divides(acc, local(1, 2)) and not divides(local(1, 2), acc)


def test_division_by_a_replication():
    a = spatial(8, 1).replicate(4)
    assert a / replicate(4) == spatial(8, 1)
    assert a / spatial(1, 1).replicate(2) == spatial(8, 1).replicate(2)
    with pytest.raises(LayoutError):
        spatial(8, 4) / replicate(4)
    twice = replicate(4).spatial(2).replicate(4)  # two equal replication entries
    assert twice / replicate(2) == replicate(4).spatial(2).replicate(2)
    assert twice.left_divide(replicate(2)) == replicate(2).spatial(2).replicate(4)


def test_instruction_selection_for_a_warp_tiled_accumulator():
    # four warps (2 x 2), each computing 2 x 4 mma tiles of 16 x 8
    acc = spatial(2, 2).local(2, 4) * MMA_M16N8K16_F16.c
    assert acc.shape == (64, 64) and acc.num_threads == 128
    loop = acc / MMA_M16N8K16_F16.c
    assert loop == spatial(2, 2).local(2, 4)
    assert divides(acc, MMA_M16N8K16_F16.a)  # pairs of C tiles along N are A-shaped
    assert not divides(acc, MMA_M16N8K16_F16.b)


def test_mma_operands_divide_by_ldmatrix_atoms():
    # A = four 8x8 matrices, arranged column-major: one ldmatrix.x4 per A fragment
    assert MMA_M16N8K16_F16.a / LDMATRIX_X1 == column_local(2, 2)
    # B (K x N) = two transposed 8x8 matrices stacked along K: one ldmatrix.x2.trans
    assert MMA_M16N8K16_F16.b / LDMATRIX_X1_TRANS == local(2, 1)
    assert not divides(MMA_M16N8K16_F16.b, LDMATRIX_X1)


def test_left_divide_function_and_method_agree():
    a = local(2, 1).column_spatial(4, 8).local(2, 1)
    assert (
        left_divide(a, local(2, 1))
        == a.left_divide(local(2, 1))
        == column_spatial(4, 8).local(2, 1)
    )
    with pytest.raises(LayoutError):
        a.left_divide(column_spatial(4, 8))
