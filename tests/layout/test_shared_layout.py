"""Shared/global layouts map logical indices to element offsets, vectorised and symbolically."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilecraft.layout import (
    Layout,
    LayoutError,
    SharedLayout,
    Swizzle,
    column_major,
    row_major,
    strided,
    tile_to_shape,
)


def test_row_and_column_major_offsets():
    rm, cm = row_major(3, 4), column_major(3, 4)
    for r, c in itertools.product(range(3), range(4)):
        assert rm.offset(r, c) == r * 4 + c
        assert cm.offset(r, c) == r + 3 * c
    assert rm.strides == (4, 1) and cm.strides == (1, 3)
    assert row_major(2, 3, 4).offset(1, 2, 3) == 12 + 8 + 3


def test_strided_layout_with_padding_has_a_larger_cosize():
    layout = strided((4, 8), (10, 1))
    assert layout.offset(3, 7) == 37 and layout.cosize == 38 and layout.size == 32
    assert not layout.is_bijective()
    with pytest.raises(LayoutError):
        strided((4, 8), (1,))


def test_canonical_form_merges_contiguous_modes_and_drops_unit_modes():
    assert strided((4, 8), (8, 1)) == row_major(4, 8)
    assert SharedLayout.create((8,), (2, 4), (4, 1)) == row_major(8)
    assert SharedLayout.create((8,), (2, 1, 4), (4, 99, 1)) == row_major(8)
    assert SharedLayout.create((8,), (2, 4), (1, 2)) != row_major(8)
    assert hash(strided((4, 8), (8, 1))) == hash(row_major(4, 8))
    assert Layout is SharedLayout


def test_zero_swizzle_is_no_swizzle():
    assert row_major(8, 8).with_swizzle(Swizzle(0, 3, 3)) == row_major(8, 8)


def test_swizzle_is_an_involution_that_keeps_aligned_blocks():
    sw = Swizzle(bits=3, base=3, shift=3)
    x = np.arange(4096)
    np.testing.assert_array_equal(sw.apply(sw.apply(x)), x)
    np.testing.assert_array_equal(sw.apply(x) // 64, x // 64)
    assert sw.period == 512 and sw.mask == 7
    with pytest.raises(LayoutError):
        Swizzle(bits=3, base=3, shift=2)


def test_offset_accepts_numpy_arrays_and_matches_scalars():
    layout = tile_to_shape(row_major(8, 64).with_swizzle(Swizzle(3, 3, 3)), (16, 128))
    rows, cols = np.meshgrid(np.arange(16), np.arange(128), indexing="ij")
    table = layout.offset(rows, cols)
    assert table.shape == (16, 128)
    for r, c in [(0, 0), (3, 77), (15, 127), (9, 64)]:
        assert table[r, c] == layout.offset(r, c)
    np.testing.assert_array_equal(layout.offsets(), table)


def test_tile_to_shape_places_atoms_in_row_or_column_order():
    atom = row_major(2, 2)
    by_row = tile_to_shape(atom, (4, 4), order="row")
    by_col = tile_to_shape(atom, (4, 4), order="col")
    for r, c in itertools.product(range(4), range(4)):
        within = (r % 2) * 2 + c % 2
        assert by_row.offset(r, c) == ((r // 2) * 2 + c // 2) * 4 + within
        assert by_col.offset(r, c) == ((c // 2) * 2 + r // 2) * 4 + within
    assert tile_to_shape(atom, (3, 2, 2)) == row_major(3, 2, 2)
    with pytest.raises(LayoutError):
        tile_to_shape(atom, (3, 4))
    with pytest.raises(LayoutError):
        tile_to_shape(atom, (4, 4), order="diagonal")


def test_hierarchical_layouts_have_no_per_dimension_strides():
    layout = tile_to_shape(row_major(4, 4), (4, 8))
    assert layout.mode_shape == (4, 2, 4)
    with pytest.raises(LayoutError):
        _ = layout.strides


class Sym:
    """A minimal symbolic integer expression: records the operators offset() applies."""

    def __init__(self, text: str, fn):
        self.text, self.fn = text, fn

    def _bin(self, other, op, sym, swap=False):
        o = other if isinstance(other, Sym) else Sym(str(other), lambda env, v=other: v)
        a, b = (o, self) if swap else (self, o)
        return Sym(f"({a.text} {sym} {b.text})", lambda env: op(a.fn(env), b.fn(env)))

    def __add__(self, o):
        return self._bin(o, int.__add__, "+")

    def __radd__(self, o):
        return self._bin(o, int.__add__, "+", True)

    def __mul__(self, o):
        return self._bin(o, int.__mul__, "*")

    def __rmul__(self, o):
        return self._bin(o, int.__mul__, "*", True)

    def __floordiv__(self, o):
        return self._bin(o, int.__floordiv__, "//")

    def __mod__(self, o):
        return self._bin(o, int.__mod__, "%")

    def __xor__(self, o):
        return self._bin(o, int.__xor__, "^")

    def __rshift__(self, o):
        return self._bin(o, int.__rshift__, ">>")

    def __and__(self, o):
        return self._bin(o, int.__and__, "&")

    def __bool__(self):
        raise AssertionError("offset() must not branch on index values")

    def __index__(self):
        raise AssertionError("offset() must not convert indices to int")


def test_offset_builds_a_symbolic_expression_from_operator_overloads():
    layout = tile_to_shape(row_major(8, 64).with_swizzle(Swizzle(3, 3, 3)), (8, 128))
    row = Sym("row", lambda env: env["row"])
    col = Sym("col", lambda env: env["col"])
    expr = layout.offset(row, col)
    assert isinstance(expr, Sym) and "^" in expr.text
    for r, c in itertools.product(range(8), range(0, 128, 7)):
        assert expr.fn({"row": r, "col": c}) == layout.offset(r, c)
    plain = row_major(8, 64).offset(row, col)
    assert plain.text == "((row * 64) + col)"


def test_offset_checks_the_number_of_indices():
    with pytest.raises(LayoutError):
        row_major(4, 4).offset(1)


def test_show_prints_offsets_and_vector_groups():
    assert row_major(2, 3).show() == "  0 1 2\n0 0 1 2\n1 3 4 5"
    assert row_major(2, 4).show(group=2) == "  0 1\n0 0 1\n1 2 3"
    with pytest.raises(LayoutError):
        column_major(2, 4).show(group=2)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "swz.png"
    row_major(8, 16).with_swizzle(Swizzle(1, 3, 3)).plot(str(path), dtype_bits=16)
    assert path.read_bytes()[:4] == b"\x89PNG"
