"""Primitive register layouts map (t, i) as Tilus section 4.1 describes."""

from __future__ import annotations

import itertools

import pytest

from tilecraft.layout import (
    Fragment,
    LayoutError,
    column_local,
    column_spatial,
    local,
    replicate,
    spatial,
)


def test_local_maps_local_index_row_major_in_one_thread():
    layout = local(2, 3)
    assert (layout.shape, layout.num_threads, layout.local_size) == ((2, 3), 1, 6)
    assert [layout.map(0, i) for i in range(6)] == [(i // 3, i % 3) for i in range(6)]


def test_spatial_maps_thread_index_row_major_one_element_each():
    layout = spatial(2, 3)
    assert (layout.shape, layout.num_threads, layout.local_size) == ((2, 3), 6, 1)
    assert [layout.map(t, 0) for t in range(6)] == [(t // 3, t % 3) for t in range(6)]


@pytest.mark.parametrize("shape", [(4,), (2, 3), (3, 2), (2, 3, 4)])
def test_column_variants_make_the_first_dimension_fastest(shape):
    n = 1
    for s in shape:
        n *= s
    expected = [tuple(reversed(ix)) for ix in itertools.product(*map(range, reversed(shape)))]
    assert [column_local(*shape).map(0, i) for i in range(n)] == expected
    assert [column_spatial(*shape).map(t, 0) for t in range(n)] == expected


def test_primitives_accept_one_sequence_argument():
    assert local((2, 3)) == local(2, 3)
    assert spatial([8, 4]) == spatial(8, 4)


def test_column_primitives_are_kronecker_products_of_row_primitives():
    # Tilus: column_* can be built with the product, e.g. column_spatial(2, 3).
    assert column_spatial(2, 3) == spatial(1, 3) * spatial(2, 1)
    assert column_local(2, 3) == local(1, 3) * local(2, 1)


def test_one_dimensional_primitives_agree_with_their_column_forms():
    assert local(5) == column_local(5)
    assert spatial(5) == column_spatial(5)


def test_replicate_gives_one_element_held_by_n_threads():
    layout = replicate(4)
    assert (layout.shape, layout.num_threads, layout.local_size) == ((1,), 4, 1)
    assert layout.replication == 4
    assert [layout.map(t, 0) for t in range(4)] == [(0,)] * 4
    assert replicate(1) == local(1)


def test_method_replicate_shares_each_element_with_neighbour_threads():
    layout = spatial(8, 1).replicate(4)
    assert layout.num_threads == 32 and layout.replication == 4
    assert [layout.map(t, 0) for t in range(8)] == [(0, 0)] * 4 + [(1, 0)] * 4


def test_unified_form_of_the_mma_accumulator_matches_tilus_figure_6_style():
    layout = local(2, 1).spatial(8, 4).local(1, 2)
    assert layout.mode_shape == (2, 8, 4, 2)
    assert layout.spatial_modes == (1, 2)
    assert layout.local_modes == (0, 3)
    assert layout.dim_modes == ((0, 1), (2, 3))


def test_create_rejects_modes_that_do_not_split_the_shape():
    with pytest.raises(LayoutError):
        Fragment.create((4, 4), (2, 2, 3), (0, 1), (2,))


def test_create_rejects_modes_used_twice_or_never():
    with pytest.raises(LayoutError):
        Fragment.create((4,), (2, 2), (0, 0), ())
    with pytest.raises(LayoutError):
        Fragment.create((4,), (2, 2), (0,), ())


def test_create_rejects_replication_in_local_modes():
    with pytest.raises(LayoutError):
        Fragment.create((4,), (4,), (0,), (-2,))


def test_map_rejects_out_of_range_thread_or_local_index():
    layout = spatial(2, 2)
    with pytest.raises(LayoutError):
        layout.map(4, 0)
    with pytest.raises(LayoutError):
        layout.map(0, 1)


def test_rank_zero_layout_is_a_single_element():
    layout = local()
    assert (layout.shape, layout.num_threads, layout.local_size) == ((), 1, 1)
    assert layout.map(0, 0) == ()
    assert layout.inverse(()) == [(0, 0)]
