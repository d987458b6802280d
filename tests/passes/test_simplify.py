"""The linear simplifier (tilecraft/ir/simplify.py) keeps an expression's meaning: it looks
through integer casts only where they keep every value, rebuilds in the expression's own type,
and leaves alone what it cannot rebuild (before session 25 it dropped `T.cast(bx, "int64")`
from `T.cast(bx, "int64") * 10^9` into an int32 product, dropped wrapping casts, and raised
TC118 on a negative term of an unsigned type while expanding a kernel's lets)."""

from __future__ import annotations

import numpy as np

import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.ir.expr import BinOp, Var, cast
from tilecraft.ir.simplify import linear_form, simplify


def test_a_widening_cast_keeps_the_arithmetic_in_the_wide_type():
    bx = Var.create("bx", "int32")
    e = simplify(BinOp.create("+", BinOp.create("*", cast("int64", bx), 1000000000), 5))
    assert e.dtype == dt.resolve("int64")
    assert linear_form(e)[1] == 5 and "int64" in str(e)


def test_a_narrowing_or_sign_changing_cast_is_an_atom():
    bx = Var.create("bx", "int32")
    for to in ("uint8", "int8", "uint32"):
        c = cast(to, bx)
        assert linear_form(c) == ({c: 1}, 0), to
        e = simplify(BinOp.create("+", c, 1))
        assert e.dtype == dt.resolve(to) and "T.cast" in str(e), to
    w = cast("int64", cast("uint16", bx))  # (uint16 -> int64 keeps values: looked through)
    assert linear_form(w) == ({cast("uint16", bx): 1}, 0)


def test_unsigned_terms_subtract_and_what_does_not_rebuild_stays():
    v = Var.create("v", "uint16")
    assert str(simplify(BinOp.create("-", BinOp.create("+", v, 5), 7))) == "v - 2"
    e = BinOp.create("-", v, BinOp.create("*", v, 2))  # (-v: no unsigned form without 0 - v)
    assert simplify(e) is e
    bx = Var.create("bx", "int32")
    folded = BinOp.create("-", BinOp.create("*", BinOp.create("+", bx, 1), 128),
                          BinOp.create("*", bx, 128))
    assert str(simplify(folded)) == "128"


def test_a_kernel_whose_lets_subtract_an_unsigned_value_compiles_and_agrees():
    """(the let expansion of instruction selection simplified `3 - u` of uint32 into `u * -1
    + 3` and refused the kernel with TC118; the interpreter ran it)"""
    from tilecraft import interp
    from tilecraft.block.vm import run
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.targets import H100_SXM

    @T.prim_func
    def k(X: T.Tensor((4,), "uint32"), Y: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=32) as bx:
            u = X[bx]
            w = 3 - u
            Y[0] = w

    assert "Y_[0]" in generate_cuda(k, "sm_90a").source
    x = np.array([7, 0, 0, 0], np.uint32)
    want, got = np.zeros(4, np.uint32), np.zeros(4, np.uint32)
    interp.run(k, [x, want])
    run(lowered_program(lower(k, H100_SXM)), [x, got], arena=True)
    assert want[0] == np.uint32(3 - 7 + 2 ** 32) and got[0] == want[0]
