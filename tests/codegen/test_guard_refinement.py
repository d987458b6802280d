"""Bounds guards a pipeline's refill `if` makes provable: inside `if (a * k + c < n)` the loop
variable k is at most (n - 1 - c) // a, so a copy whose tile offset grows with k needs no
per-chunk bounds test there. unroll_pairs writes the refills of two iterations a trip as
`k2 * 2 + 2 < n` and `k2 * 2 + 3 < n`; with only unit coefficients understood, every refill of
the quantized matmul's X and W tiles kept a compare-and-select per 16-byte chunk."""

import itertools

import pytest

from tilecraft.codegen.block_cuda.printer import refined
from tilecraft.ir.expr import BinOp, Compare, Const, Var


def cond(a, k, c, op, n):
    lhs = BinOp.create("+", BinOp.create("*", k, Const.create(a, "int32")),
                       Const.create(c, "int32"))
    return Compare.create(op, lhs, Const.create(n, "int32"))


@pytest.mark.parametrize("a, c, op, n", list(itertools.product(
    (1, 2, 3, 5), (-4, 0, 2, 3), ("<", "<="), (0, 7, 64, 128))))
def test_the_refined_interval_is_exactly_the_values_the_condition_admits(a, c, op, n):
    k = Var.create("k", "int32")
    lo, hi = 0, 63
    got = refined(cond(a, k, c, op, n), {k: (lo, hi)})
    admitted = [v for v in range(lo, hi + 1) if (a * v + c < n if op == "<" else a * v + c <= n)]
    if not admitted:
        assert got == {}  # an empty branch: nothing is claimed
    else:
        assert got == {k: (lo, max(admitted))}


def test_a_negative_coefficient_or_two_variables_refine_nothing():
    k, j = Var.create("k", "int32"), Var.create("j", "int32")
    assert refined(cond(-2, k, 3, "<", 10), {k: (0, 63)}) == {}
    two = Compare.create("<", BinOp.create("+", k, j), Const.create(10, "int32"))
    assert refined(two, {k: (0, 63), j: (0, 63)}) == {}


def test_the_quantized_matmul_refills_copy_without_bounds_tests():
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.options import CompileOptions
    from tilecraft.quant.qmm import choose_config
    from tilecraft.quant.qmm_kernel import qmm_kernel

    cp_async = CompileOptions.for_arch("sm_90a").replace(tma=False)  # (TMA has no guards)
    for wtype, bits, M in (("uint4", 4, 4096), ("uint4", 4, 16), ("uint1", 1, 16)):
        cfg = choose_config(M, 8192, 8192, bits, 128, wtype)
        k = qmm_kernel(M, 8192, 8192, wtype, "float16", 128, 0, True, False, **cfg)
        source = generate_cuda(k.func, options=cp_async).source
        assert "cp_async_16" in source
        assert "bounds-checked" not in source, (wtype, M)
