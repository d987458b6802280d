"""A `parallel` storing `T.if_then_else(a <op> b, u, v)` with a margin a - b affine in the loop
variables (a causal mask) prints three element loops behind one test of the margin's range over
the tile: all-true stores u, all-false v, mixed tiles select per element. The decision is the
interpreter's: checked exhaustively on small grids (every block, every iteration, every
element), refused where the arithmetic could wrap or the margin is not of that form. Loop
variables whose extent depends on block indices get the extent's interval (plain C arithmetic,
no tc::wrap_*). The causal attention prints, compiles without spills in no more registers than
the CUDA emitter's, and on a GPU matches torch."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import tilecraft.language as T
from tilecraft.block import ParallelCompute
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.codegen.block_cuda.uniform_select import HOLDS, uniform_select
from tilecraft.ir import For
from tilecraft.ir.ranges import bound
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402

G, N, M = 3, 8, 16  # blocks; the tile is N x M; block bx runs bx + 2 iterations


def _masked(cond):
    """One block per bx, a serial loop whose extent depends on bx, and a parallel storing
    `T.if_then_else(cond(bx, kk, i, j), 1, 2)` into global memory."""

    @T.prim_func
    def k(A: T.Tensor((G * N, (G + 1) * M), "float32")):
        with T.Kernel(G, threads=32) as bx:
            for kk in T.serial(bx + 2):
                for i, j in T.Parallel(N, M):
                    A[bx * N + i, kk * M + j] = T.if_then_else(cond(bx, kk, i, j), 1.0, 2.0)

    return lowered_program(lower(k, H100_SXM))


def _split(program):
    """The parallel, its uniform_select with the printer's ranges, the block and loop vars."""
    par = next(s for s in walk(program.body) if isinstance(s, ParallelCompute))
    bx = program.block_vars[0]
    kk = next(s.var for s in walk(program.body) if isinstance(s, For))
    return par, uniform_select(par, {bx: (0, G - 1), kk: (0, G)}), bx, kk


CONDITIONS = {
    "causal >=": lambda bx, kk, i, j: bx * N + i >= kk * M + j,
    "causal >": lambda bx, kk, i, j: bx * N + i > kk * M + j,
    "<": lambda bx, kk, i, j: bx * N + i < kk * M + j,
    "<= negative coefficients": lambda bx, kk, i, j: 2 * i - j + bx * 25 - kk * 13 <= 4,
    "floor division of a loop variable": lambda bx, kk, i, j: i // 2 + bx * 9 >= j + kk * 9,
    "product of loop variables": lambda bx, kk, i, j: i * j + bx * 60 >= kk * 150,
}


@pytest.mark.parametrize("name", list(CONDITIONS))
def test_the_decided_branches_are_the_interpreters_on_every_element(name):
    par, split, bx, kk = _split(_masked(CONDITIONS[name]))
    assert split is not None
    cond = par.body.value.cond
    seen = set()
    for b in range(G):
        for k in range(b + 2):
            point = {bx: (b, b), kk: (k, k)}
            lo, hi = bound(split.lo, point)[0], bound(split.hi, point)[0]
            at_lo, at_hi = HOLDS[split.op](lo), HOLDS[split.op](hi)
            held = set()
            for i in range(N):
                for j in range(M):
                    env = {**point, par.vars[0]: (i, i), par.vars[1]: (j, j)}
                    a, c = bound(cond.a, env)[0], bound(cond.b, env)[0]
                    held.add({">=": a >= c, ">": a > c, "<": a < c, "<=": a <= c}[cond.op])
            if at_lo and at_hi:
                assert held == {True}, (b, k)
                seen.add("true")
            elif not at_lo and not at_hi:
                assert held == {False}, (b, k)
                seen.add("false")
            else:
                seen.add("mixed")
    assert "true" in seen or "false" in seen  # the grid exercises a specialized branch
    assert "mixed" in seen


def test_a_masked_parallel_prints_three_element_loops_behind_the_margins_range():
    source = print_cuda(_masked(CONDITIONS["causal >="]), "sm_90a").source
    assert "const int d_lo = " in source
    assert "if ((d_lo >= 0) && (d_hi >= 0))" in source
    assert "else if (!(d_lo >= 0) && !(d_hi >= 0))" in source
    assert source.count("for (int li = 0;") == 3
    assert "wrap_" not in source  # kk is bounded by its extent's interval: [0, G]


@pytest.mark.parametrize("cond, why", [
    (lambda bx, kk, i, j: bx * 1073741824 + i >= j, "bx * 2^30 may wrap"),
    (lambda bx, kk, i, j: (bx * N + i) // 4 >= j, "loop and block variables in one atom"),
    (lambda bx, kk, i, j: T.cast(i, "float32") >= T.cast(j, "float32"), "a float margin"),
    (lambda bx, kk, i, j: bx >= kk, "no loop variable"),
], ids=["wraps", "mixed atom", "float", "uniform"])
def test_conditions_the_range_cannot_decide_keep_the_per_element_select(cond, why):
    program = _masked(cond)
    assert _split(program)[1] is None, why
    source = print_cuda(program, "sm_90a").source
    assert "d_lo" not in source and source.count("for (int li = 0;") == 1


def test_a_condition_constant_over_the_tile_prints_one_branch():
    program = _masked(lambda bx, kk, i, j: i + M >= j)  # i - j >= -(M - 1) > -M
    assert _split(program)[1].decided() is True
    source = print_cuda(program, "sm_90a").source
    assert "the condition is true on the whole tile" in source
    assert source.count("for (int li = 0;") == 1 and "?" not in source.split("li < ")[1]


# ---- the causal attention -------------------------------------------------------------------
def _causal():
    return load("flash_attention").flash_attention(8, 64, 4096, 128, True, block_M=128,
                                                   block_N=128, threads=256)


def test_the_causal_attention_mask_is_decided_per_tile_in_plain_arithmetic():
    source = print_cuda(lowered_program(lower(_causal().func, H100_SXM)), "sm_90a").source
    assert "const int d_lo = bx_ * 128 + k_ * -128 + -127, " in source
    assert "if ((d_lo >= 0) && (d_hi >= 0))" in source
    assert "acc_s_[li] = 0.0f;" in source
    assert "acc_s_[li] = -__int_as_float(0x7f800000);" in source
    assert "(k_ * 128 + j_)" in source and "tc::wrap_mul<int>(k_, 128)" not in source


def test_the_causal_attention_compiles_in_no_more_registers_than_the_emitters():
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    func = _causal().func
    printed = print_cuda(lowered_program(lower(func, H100_SXM)), "sm_90a")
    block = compile_cuda(printed.source, "sm_90a", name=printed.name).resources
    old = generate_cuda(func, "sm_90a")
    emitter = compile_cuda(old.source, "sm_90a", name=old.name).resources
    print(f"registers: block printer {block.registers}, CUDA emitter {emitter.registers}")
    assert block.spill_stores == 0 and block.spill_loads == 0
    assert block.registers <= emitter.registers


@pytest.mark.gpu
@pytest.mark.parametrize("block_M, block_N, threads", [(128, 128, 256), (128, 64, 128),
                                                       (64, 128, 128)])
def test_the_causal_attention_through_the_block_path_matches_torch(monkeypatch, block_M,
                                                                   block_N, threads):
    import torch

    fa = load("flash_attention")
    batch, seq_len, heads, dim = 2, 512, 3, 128
    kernel = fa.flash_attention(batch, heads, seq_len, dim, True, block_M=block_M,
                                block_N=block_N, threads=threads)
    source = kernel.get_kernel_source()
    assert "from the block program" in source and "d_lo" in source
    q, k, v = (torch.randn(batch, seq_len, heads, dim, dtype=torch.float16, device="cuda")
               for _ in range(3))
    out = kernel(q, k, v).float()
    ref = fa.reference(q, k, v, True)
    assert not torch.isnan(out).any()
    err = (torch.linalg.norm(out - ref) / torch.linalg.norm(ref)).item()
    assert err < 1e-2 and math.isfinite(err), err
