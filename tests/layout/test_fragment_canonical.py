"""Canonical form: equality is structural, agrees with hashing and with equality as functions."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from tilecraft.layout import Fragment, column_local, local, replicate, spatial

from .layout_strategies import fragments, primitives_2d, signature


def test_adjacent_modes_merge():
    assert spatial(2).spatial(4) == spatial(8)
    assert local(2).local(3) == local(6)
    assert spatial(2, 1).spatial(4, 1) == spatial(8, 1)
    assert local(2, 4) * local(1, 2) == local(2, 8)


def test_unit_modes_disappear():
    assert local(1, 1) * spatial(4, 1) * local(1, 1) == spatial(4, 1)
    assert spatial(4, 1).mode_shape == (4,)


def test_adjacent_replications_merge():
    assert replicate(2).replicate(3) == replicate(6)
    assert replicate(6).spatial_modes == (-6,)


def test_modes_merge_only_when_adjacent_in_the_same_order():
    assert local(2) * spatial(2) != spatial(2) * local(2)
    assert column_local(2, 2) != local(2, 2)


def test_create_normalises_to_the_same_value_as_the_primitives():
    raw = Fragment.create((8, 4), (2, 4, 1, 4), (1, 3), (0, 2))
    assert raw == local(2, 1) * spatial(4, 4)
    assert hash(raw) == hash(local(2, 1) * spatial(4, 4))


def test_equal_functions_have_equal_canonical_forms_exhaustively():
    # every product of up to three small primitives: group by function, expect one form each
    prims = [p for p in primitives_2d((1, 2, 4)) if p.num_threads * p.local_size <= 8]
    by_function: dict[tuple, set[Fragment]] = defaultdict(set)
    for f in prims:
        for g in prims:
            for h in [None, *prims]:
                layout = f * g if h is None else f * g * h
                if layout.num_threads * layout.local_size <= 32:
                    by_function[signature(layout)].add(layout)
    assert len(by_function) > 500
    assert all(len(forms) == 1 for forms in by_function.values())
    forms = [next(iter(v)) for v in by_function.values()]
    assert len(set(forms)) == len(forms)


@settings(max_examples=200, deadline=None)
@given(fragments(), fragments())
def test_eq_and_hash_agree_with_function_equality(a, b):
    same_function = signature(a) == signature(b)
    assert (a == b) == same_function
    if a == b:
        assert hash(a) == hash(b)


@settings(max_examples=200, deadline=None)
@given(fragments(), st.randoms(use_true_random=False))
def test_refining_modes_and_recreating_gives_the_same_layout(layout, rnd):
    # split every mode into random factors (still a valid unified form) and normalise again
    modes, remap = [], {}
    for m, size in enumerate(layout.mode_shape):
        parts = [size]
        for p in (2, 3):
            if parts[-1] % p == 0 and parts[-1] > p and rnd.random() < 0.5:
                parts[-1:] = [parts[-1] // p, p]
        remap[m] = list(range(len(modes), len(modes) + len(parts)))
        modes += parts
    spatial_modes = [x for m in layout.spatial_modes for x in ([m] if m < 0 else remap[m])]
    local_modes = [x for m in layout.local_modes for x in remap[m]]
    again = Fragment.create(layout.shape, modes, spatial_modes, local_modes)
    assert again == layout and hash(again) == hash(layout)
