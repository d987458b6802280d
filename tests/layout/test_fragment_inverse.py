"""inverse() lists every (thread, local) holding an index; reduce() replicates over reduced threads."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings

from tilecraft.layout import LayoutError, local, reduce, replicate, spatial

from .layout_strategies import fragments, table, universe


def _owners(layout):
    owners = defaultdict(list)
    for t, i in itertools.product(range(layout.num_threads), range(layout.local_size)):
        owners[layout.map(t, i)].append((t, i))
    return owners


def test_map_then_inverse_round_trips_on_all_small_layouts():
    for layout in universe(max_factors=2, max_weight=32):
        owners = _owners(layout)
        assert set(owners) == set(itertools.product(*map(range, layout.shape)))
        for index, pairs in owners.items():
            assert layout.inverse(index) == sorted(pairs)
            assert len(pairs) == layout.replication


@settings(max_examples=150, deadline=None)
@given(fragments())
def test_every_element_is_held_replication_times(layout):
    owners = _owners(layout)
    assert len(owners) == layout.size
    assert all(len(p) == layout.replication for p in owners.values())
    assert layout.num_threads * layout.local_size == layout.size * layout.replication


@settings(max_examples=100, deadline=None)
@given(fragments())
def test_index_table_matches_pointwise_map(layout):
    np.testing.assert_array_equal(layout.index_table(), table(layout))


def test_thread_elements_lists_a_threads_indices_in_local_order():
    acc = local(2, 1).spatial(8, 4).local(1, 2)
    assert acc.thread_elements(5) == [(1, 2), (1, 3), (9, 2), (9, 3)]


def test_inverse_of_a_replicated_layout_lists_all_replicas():
    layout = spatial(8, 1).replicate(4)
    assert layout.inverse((2, 0)) == [(8, 0), (9, 0), (10, 0), (11, 0)]
    assert replicate(2).spatial(4).inverse((3,)) == [(3, 0), (7, 0)]


def test_inverse_rejects_out_of_range_indices():
    with pytest.raises(LayoutError):
        spatial(2, 2).inverse((2, 0))
    with pytest.raises(LayoutError):
        spatial(2, 2).inverse((0,))


def test_row_reduction_of_the_mma_accumulator_is_replicated_over_the_quad():
    acc = local(2, 1).spatial(8, 4).local(1, 2)
    rows = acc.reduce(1)
    assert rows == local(2, 1).spatial(8, 1).replicate(4)
    assert (rows.shape, rows.num_threads, rows.local_size, rows.replication) == ((16, 1), 32, 2, 4)
    assert rows.inverse((9, 0)) == [(4, 1), (5, 1), (6, 1), (7, 1)]
    assert acc.reduce(1, keepdim=False) == local(2).spatial(8).replicate(4)


def test_reduction_keeps_threads_and_drops_reduced_locals():
    # brute force: after reducing dim d, thread t holds (the reduced index of) its own elements
    for layout in universe(max_factors=2, max_weight=32):
        for dim in range(layout.ndim):
            out = reduce(layout, dim)
            assert out.num_threads == layout.num_threads
            for t in range(layout.num_threads):
                mine = {
                    tuple(0 if d == dim else x for d, x in enumerate(ix))
                    for ix in layout.thread_elements(t)
                }
                assert set(out.thread_elements(t)) == mine
                assert len(out.thread_elements(t)) == len(mine)


def test_reduce_rejects_a_bad_dimension():
    with pytest.raises(LayoutError):
        spatial(2, 2).reduce(2)
    assert spatial(2, 2).reduce(-1) == spatial(2, 1).replicate(2)
