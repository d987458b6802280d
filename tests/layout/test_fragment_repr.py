"""repr() names a layout as a chain of primitives that evaluates back to the same layout."""

from __future__ import annotations

from hypothesis import given, settings

import tilecraft.layout as tl
from tilecraft.layout import Fragment, local, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_A, MMA_M16N8K16_B, MMA_M16N8K16_C

from .layout_strategies import fragments


def _eval(text: str) -> Fragment:
    return eval(text, {name: getattr(tl, name) for name in tl.__all__})


def test_repr_of_the_mma_fragments_reads_like_the_paper():
    assert repr(MMA_M16N8K16_C) == "local(2, 1).spatial(8, 4).local(1, 2)"
    assert repr(MMA_M16N8K16_A) == "column_local(2, 2).spatial(8, 4).local(1, 2)"
    assert repr(MMA_M16N8K16_B) == "local(2, 1).column_spatial(4, 8).local(2, 1)"


def test_repr_of_replicated_and_trivial_layouts():
    assert repr(MMA_M16N8K16_C.reduce(1)) == "local(2, 1).spatial(8, 1).replicate(4)"
    assert repr(replicate(4) * spatial(8, 4)) == "replicate(4, 2).spatial(8, 4)"
    assert repr(local(1, 1)) == "local(1, 1)" and repr(local()) == "local()"


def test_layouts_that_are_no_product_of_primitives_print_their_unified_form():
    layout = Fragment.create((4,), (2, 2), (), (1, 0))  # local index i -> 2 * (i % 2) + i // 2
    assert repr(layout).startswith("Fragment.create(shape=(4,)")
    assert _eval(repr(layout)) == layout


@settings(max_examples=200, deadline=None)
@given(fragments())
def test_repr_evaluates_back_to_the_layout(layout):
    assert _eval(repr(layout)) == layout
