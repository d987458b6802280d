"""Lowering of T.gemm where layout inference chose wgmma: one synchronous `dot_shared` on the
whole shared tiles (A may be a fragment), `fill` first for clear_accum; elsewhere (sm_80) the
register form (`load_shared` + `view` for transposed operands + `dot`). Either way the VM gives
the interpreter's bits, and selection then puts the dot_shared of the examples on wgmma."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft import interp
from tilecraft.block import Dot, DotShared
from tilecraft.block.select_wgmma import WgmmaPlan, select_dot_shared
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import A100_SXM, H100_SXM

from .arena_interp import random_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402


@T.prim_func
def transposed(A: T.Tensor((64, 64), "float16"), B: T.Tensor((128, 64), "float16"),
               C: T.Tensor((64, 128), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 64), "float16")  # stored [K, M]
        B_s = T.alloc_shared((128, 64), "float16")  # stored [N, K]
        acc = T.alloc_fragment((64, 128), "float32")
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, acc, transpose_A=True, transpose_B=True, clear_accum=True)
        T.copy(acc, C[0, 0])


def _lowered_matches(func, target):
    """The program lowered for `target`; the VM gives the interpreter's bits on it."""
    program = lowered_program(lower(func, target))
    want = random_inputs(func, 0, 64)
    got = [x.copy() for x in want]
    interp.run(func, want)
    program.run(*got)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
    return program


def test_a_wgmma_gemm_lowers_to_one_dot_shared_on_the_stored_tiles():
    program = _lowered_matches(transposed, H100_SXM)
    lines = [ln.strip() for ln in str(program).splitlines() if ln.strip() != "synchronize()"]
    at = lines.index("dot_shared(A_s, B_s, acc, out=acc, trans_a=True, trans_b=True)")
    assert lines[at - 1] == "fill(acc, 0.0)"  # (barriers aside: insert_barriers adds them)
    assert not any(isinstance(s, Dot) for s in walk(program.body))
    (dot,) = [s for s in walk(program.body) if isinstance(s, DotShared)]
    assert isinstance(select_dot_shared(dot, 128, H100_SXM), WgmmaPlan)


def test_without_wgmma_the_gemm_lowers_to_register_operands_and_dot():
    program = _lowered_matches(transposed, A100_SXM)
    text = str(program)
    assert "dot_shared" not in text and "view(" in text and "dot(" in text


def _example(name: str, target=H100_SXM):
    if name.startswith("gemm"):
        args, kw = {"gemm_4096_128x256x64": ((4096, 4096, 4096, 128, 256, 64),
                                             {"num_stages": 3, "threads": 256}),
                    "gemm_default": ((1024, 1024, 1024, 128, 128, 32),
                                     {"num_stages": 3, "threads": 128})}[name]
        func = load("gemm").matmul(*args, **kw).func
    else:
        func = load("flash_attention").flash_attention(1, 2, 256, 64, False, block_M=128,
                                                       block_N=64, threads=256).func
    state = lower(func, target)
    return state, lowered_program(state)


@pytest.mark.parametrize("name", ["gemm_4096_128x256x64", "gemm_default"])
def test_the_gemm_examples_dot_shared_runs_on_wgmma_as_layout_inference_planned(name):
    state, program = _example(name)
    (dot,) = [s for s in walk(program.body) if isinstance(s, DotShared)]
    plan = select_dot_shared(dot, program.num_threads, H100_SXM)
    assert isinstance(plan, WgmmaPlan)
    assert [(plan.gm, plan.gn)] == list(state.gemm_wgmma.values())
    assert select_dot_shared(dot, program.num_threads, A100_SXM) is None
    _, on_ampere = _example(name, A100_SXM)
    assert not any(isinstance(s, DotShared) for s in walk(on_ampere.body))


def test_attentions_two_gemms_run_on_wgmma_with_256_threads():
    _, program = _example("attention")
    qk, pv = [s for s in walk(program.body) if isinstance(s, DotShared)]
    plans = [select_dot_shared(s, 256, H100_SXM) for s in (qk, pv)]
    assert qk.trans_b and plans[0].a is not None and plans[0].trans_b == 0  # K-major K tile
    assert plans[1].a is None and "_rs_" in plans[1].func  # P from registers
    assert all((p.gm, p.gn) == (2, 1) for p in plans)


@pytest.mark.parametrize("which", ["gemm_128x256x64_256t", "attention_256t"])
def test_wgmma_configs_of_the_examples_lower_to_programs_the_vm_runs_like_the_interpreter(which):
    if which.startswith("gemm"):
        func = load("gemm").matmul(256, 512, 192, 128, 256, 64, num_stages=3, threads=256).func
    else:
        func = load("flash_attention").flash_attention(1, 1, 128, 64, True, block_M=128,
                                                       block_N=64, threads=256).func
    program = _lowered_matches(func, H100_SXM)
    assert any(isinstance(s, DotShared) for s in walk(program.body))
