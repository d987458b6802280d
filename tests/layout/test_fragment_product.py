"""The Kronecker product follows h(t, i) = f(t // Tg, i // Ng) ⊙ Sg + g(t % Tg, i % Ng)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings

from tilecraft.layout import LayoutError, kron, local, replicate, spatial

from .layout_strategies import fragments, kron_reference, primitives_2d, universe, weight


def test_product_matches_the_kronecker_formula_on_all_small_pairs():
    small = universe(max_factors=1)
    for f, g in itertools.product(small, small):
        if weight(f) * weight(g) > 64:
            continue
        h = f * g
        assert h.shape == tuple(a * b for a, b in zip(f.shape, g.shape))
        assert h.num_threads == f.num_threads * g.num_threads
        assert h.local_size == f.local_size * g.local_size
        np.testing.assert_array_equal(h.index_table(), kron_reference(f, g))


def test_product_is_associative_on_all_small_triples():
    prims = [p for p in primitives_2d((1, 2, 3)) if weight(p) <= 6]
    for f, g, h in itertools.product(prims, repeat=3):
        assert (f * g) * h == f * (g * h)


@settings(max_examples=150, deadline=None)
@given(
    fragments(max_factors=2, max_weight=16),
    fragments(max_factors=2, max_weight=16),
    fragments(max_factors=2, max_weight=16),
)
def test_product_is_associative(f, g, h):
    assert (f * g) * h == f * (g * h)


@settings(max_examples=150, deadline=None)
@given(fragments(max_weight=32), fragments(max_weight=32))
def test_product_agrees_with_the_formula(f, g):
    np.testing.assert_array_equal((f * g).index_table(), kron_reference(f, g))


def test_product_is_not_commutative():
    assert local(2, 1) * spatial(2, 1) != spatial(2, 1) * local(2, 1)
    assert local(2, 1) * spatial(1, 2) == spatial(1, 2) * local(2, 1)  # independent dims commute


def test_method_chaining_is_the_product_with_a_primitive():
    assert local(2, 1).spatial(8, 4).local(1, 2) == local(2, 1) * spatial(8, 4) * local(1, 2)
    assert kron(local(2, 1), spatial(8, 4)) == local(2, 1) * spatial(8, 4)


def test_mma_accumulator_maps_like_the_tilus_formula():
    layout = local(2, 1).spatial(8, 4).local(1, 2)
    for t, i in itertools.product(range(32), range(4)):
        assert layout.map(t, i) == (t // 4 + i // 2 * 8, t % 4 * 2 + i % 2)


def test_lower_rank_operand_is_broadcast_with_leading_unit_dimensions():
    assert replicate(2) * spatial(4, 2) == replicate(2, 2) * spatial(4, 2)
    assert local(2) * spatial(4, 2) == local(1, 2) * spatial(4, 2)


def test_product_of_identity_is_identity():
    layout = local(2, 1).spatial(8, 4).local(1, 2)
    assert layout * local(1, 1) == layout == local(1, 1) * layout


def test_map_accepts_numpy_arrays():
    layout = local(2, 1).spatial(8, 4).local(1, 2)
    t, i = np.meshgrid(np.arange(32), np.arange(4), indexing="ij")
    rows, cols = layout.map(t, i)
    assert rows.shape == (32, 4) and rows[5, 3] == layout.map(5, 3)[0]
    assert cols[5, 3] == layout.map(5, 3)[1]


def test_broadcasting_to_a_lower_rank_is_an_error():
    from tilecraft.layout._raw import RawFragment  # noqa: F401  (private; rank checks live there)

    with pytest.raises(LayoutError):
        spatial(2, 2).raw().broadcast(1)
