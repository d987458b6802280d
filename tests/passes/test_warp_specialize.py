"""Warp specialization: on sm_90a a top-level wgmma mainloop's TMA copies move to a producer
warpgroup; the consumers wait, compute and release stages. The split program computes on the VM
what the interpreter computes, the VM catches schedules that would hang or race on the GPU, and
the CUDA has the roles, their registers and named barriers."""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft.block import (
    CopyAsyncBulk,
    DotShared,
    DotWaitGroup,
    LoadShared,
    MbarrierArrive,
    MbarrierWait,
    RegisterTensor,
)
from tilecraft.block.roles import WarpRoles, launch_threads
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import For, If, SeqStmt
from tilecraft.ir.visitor import walk
from tilecraft.options import CompileOptions
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program

from .arena_interp import random_inputs
from .test_pipeline_copies import _same_as_interpreter, _scaled_gemm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402

HOPPER = CompileOptions.for_arch("sm_90a")
ALWAYS = HOPPER.replace(warp_specialize="always")  # the mechanism on small (quick) tiles


def _gemm(m, n, k, bm=64, bn=64, bk=32, stages=3, threads=128):
    return load("gemm").matmul(m, n, k, bm, bn, bk, num_stages=stages, threads=threads).func


def _program(func, options=HOPPER):
    return lowered_program(lower(func, options))


def _roles(program) -> WarpRoles:
    top = program.body.stmts
    assert isinstance(top[-1], WarpRoles)
    return top[-1]


def test_a_hopper_gemm_mainloop_splits_into_a_copying_producer_and_computing_consumers():
    program = _program(_gemm(128, 128, 256, threads=256, bm=128), ALWAYS)
    roles = _roles(program)
    assert launch_threads(program) == 256 + 128 and roles.producer_threads == 128
    assert roles.producer_regs * 128 + roles.consumer_regs * 256 <= 65536
    producer, consumer = list(walk(roles.producer)), list(walk(roles.consumer))
    assert not any(isinstance(s, (DotShared, LoadShared)) for s in producer)
    assert sum(isinstance(s, CopyAsyncBulk) for s in producer) == 2  # A and B, in its loop
    assert not any(isinstance(s, CopyAsyncBulk) for s in consumer)
    (wait,) = [s for s in producer if isinstance(s, MbarrierWait)]
    assert wait.issuer and wait.bars.name.endswith("_empty")
    (loop,) = [s for s in consumer if isinstance(s, For)]
    body = list(loop.body.stmts)
    assert isinstance(body[0], MbarrierWait) and body[0].bars.name.endswith("_full")
    assert isinstance(body[-1], If) and isinstance(body[-1].then_body, MbarrierArrive)
    assert any(isinstance(s, DotShared) and s.asynchronous for s in body)
    _same_as_interpreter(_gemm(128, 128, 256, threads=256, bm=128), program)


@pytest.mark.parametrize("m,n,k,bk,stages", [(64, 64, 64, 32, 4), (100, 72, 200, 32, 3),
                                             (64, 64, 512, 32, 3), (64, 64, 96, 32, 2)])
def test_split_programs_compute_what_the_interpreter_computes(m, n, k, bk, stages):
    """Fewer iterations than stages, partial tiles, many reuses of each stage; on two stages
    no dot stays in flight, and the consumers release a stage once their body is done."""
    func = _gemm(m, n, k, bk=bk, stages=stages)
    program = _program(func, ALWAYS)
    (loop,) = [s for s in walk(_roles(program).consumer) if isinstance(s, For)]
    last = loop.body.stmts[-1]
    if stages >= 3:  # (the dot of k - 1 is done at k: its stage is released then)
        assert isinstance(last, If) and isinstance(last.then_body, MbarrierArrive)
    else:
        assert isinstance(last, MbarrierArrive) and str(last.index) == str(loop.var % 2)
    _same_as_interpreter(func, program, seed=k)


def test_a_body_making_the_dots_a_in_registers_keeps_the_plain_pipeline():
    """A producer that only copies bought the quantized matmul nothing (and the dequantizing
    producer is off): `split_mode`."""
    assert not any(isinstance(s, WarpRoles) for s in walk(_program(_scaled_gemm(160, 4)).body))


@pytest.mark.parametrize("bm,bn,bk,stages,split", [
    (128, 256, 64, 4, False), (256, 128, 64, 4, False),  # large tiles on 4 stages: slower split
    (128, 256, 64, 3, True), (128, 128, 64, 4, True), (128, 128, 64, 5, True),
    (128, 128, 64, 3, False), (64, 64, 32, 3, False)])  # stages leave room for a second block
def test_the_split_is_taken_where_it_measured_faster(bm, bn, bk, stages, split):
    """benchmarks/NOTES.md, session 16."""
    program = _program(_gemm(1024, 1024, 1024, bm, bn, bk, stages, 256))
    assert any(isinstance(s, WarpRoles) for s in walk(program.body)) == split


def test_the_switch_and_other_targets_keep_one_role():
    env = CompileOptions.from_env("sm_90a", environ={"TILECRAFT_WS": "always"})
    assert env.warp_specialize == "always" and "warp_specialize=always" in env.key()
    func = _gemm(128, 128, 256)
    off = _program(func, HOPPER.replace(warp_specialize=False))
    assert not any(isinstance(s, WarpRoles) for s in walk(off.body))
    no_tma = _program(func, HOPPER.replace(tma=False))
    assert not any(isinstance(s, WarpRoles) for s in walk(no_tma.body))
    ampere = _program(func, CompileOptions.for_arch("sm_80"))
    assert not any(isinstance(s, WarpRoles) for s in walk(ampere.body))
    env = CompileOptions.from_env("sm_90a", environ={"TILECRAFT_WS": "0"})
    assert not env.warp_specialize and "warp_specialize=False" in env.key()


def test_a_loop_inside_another_loop_is_not_split():
    @T.prim_func
    def two_passes(A: T.Tensor((128, 256), "float16"), B: T.Tensor((256, 64), "float16"),
                   C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            for r in T.serial(2):
                T.clear(acc)
                for ko in T.Pipelined(8, num_stages=3):
                    T.copy(A[r * 64, ko * 32], A_s)
                    T.copy(B[ko * 32, 0], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[r * 64, 0])

    program = _program(two_passes, ALWAYS)
    assert not any(isinstance(s, WarpRoles) for s in walk(program.body))
    _same_as_interpreter(two_passes, program)


def _without_release(program, early: bool):
    """The consumer's loop without its `mbarrier_arrive` (`early`: the arrive on the stage of
    this iteration, right after the full wait, before the dot that reads it)."""
    roles = _roles(program)
    (loop,) = [s for s in walk(roles.consumer) if isinstance(s, For)]
    body = [s for s in loop.body.stmts
            if not (isinstance(s, If) and isinstance(s.then_body, MbarrierArrive))]
    if early:
        full = body[0]
        body.insert(1, MbarrierArrive.create(_empty(roles), full.index))
    consumer = _replace(roles.consumer, loop, dataclasses.replace(loop, body=SeqStmt.create(body)))
    split = dataclasses.replace(roles, else_body=consumer)
    top = program.body.stmts[:-1] + (split,)
    return dataclasses.replace(program, body=SeqStmt.create(top))


def _empty(roles):
    return next(s.bars for s in walk(roles.producer) if isinstance(s, MbarrierWait))


def _replace(body, old, new):
    return SeqStmt.create([new if s is old else s for s in body.stmts])


def test_a_consumer_that_never_releases_its_stages_is_a_hang_on_the_vm():
    func = _gemm(64, 64, 256)
    broken = _without_release(_program(func, ALWAYS), early=False)
    with pytest.raises(TilecraftError) as err:
        broken.run(*random_inputs(func, 0, 64))
    text = str(err.value)  # both roles blocked: the producer on a stage never released
    assert err.value.code == "TC603" and "no role can go on" in text
    assert "producer role waits for phase 0 of barrier 0 of `A_shared_empty`" in text


def test_a_stage_released_before_its_dot_is_overwritten_and_the_vm_says_so():
    """The producer refills the stage at once (the VM hands over at the arrival): the refill
    meets the dot still reading it."""
    func = _gemm(64, 64, 256)
    broken = _without_release(_program(func, ALWAYS), early=True)
    with pytest.raises(TilecraftError) as err:
        broken.run(*random_inputs(func, 0, 64))
    assert err.value.code in ("TC611", "TC605")


def test_the_split_must_end_the_kernel():
    program = _program(_gemm(64, 64, 256), ALWAYS)
    roles = _roles(program)
    moved = dataclasses.replace(program, body=SeqStmt.create(
        list(program.body.stmts[:-1]) + [roles, DotWaitGroup.create(0)]))
    with pytest.raises(TilecraftError) as err:
        moved.verify()
    assert err.value.code == "TC603" and "last statement" in str(err.value)


def test_the_printed_kernel_has_both_roles_their_registers_and_named_barriers():
    """An epilogue through shared memory: its barriers inside the consumer are named barriers
    of the consumer's threads (a __syncthreads would wait for the producer, gone)."""
    from tilecraft.codegen.cuda.build import generate_cuda

    @T.prim_func
    def staged_epilogue(A: T.Tensor((128, 256), "float16"), B: T.Tensor((256, 128), "float16"),
                        C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=3):
                T.copy(A[0, ko * 64], A_s)
                T.copy(B[ko * 64, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.copy(C_s, C)

    gen = generate_cuda(staged_epilogue, options=ALWAYS)
    src = gen.source
    assert gen.launch.block == (384,) and "__launch_bounds__(384, 1)" in src
    split = src.index("if (threadIdx.x >= 256)")
    assert "tc::setmaxnreg_dec<40>()" in src[split:] and "tc::setmaxnreg_inc<232>()" in src
    assert "__syncthreads()" not in src[split:]
    assert "tc::named_barrier_sync(1, 256);" in src[split:]
    _same_as_interpreter(staged_epilogue, gen.state.block_program)


def test_the_split_gemm_compiles_without_spills():
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(_gemm(4096, 4096, 4096, 128, 256, 64, 3, 256), "sm_90a")
    assert "setmaxnreg" in gen.source
    res = compile_cuda(gen.source, "sm_90a", name=gen.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0


@pytest.mark.parametrize("wtype", ["uint4", "uint3", "float6_e3m2", "int8"])
def test_a_dequantizing_producer_computes_what_the_plain_pipeline_computes(wtype, monkeypatch):
    """The quantized matmul's prefill with the producer making the weight tile and storing it
    into a ring the consumers' dot reads (off by default: warp_specialize.DEQUANTIZE, it
    measured slower); bit for bit the plain pipeline's result on the VM."""
    import tilecraft.passes.warp_specialize as ws
    from tilecraft.quant.qmm_kernel import qmm_kernel

    zeros = wtype.startswith("uint")
    func = qmm_kernel.factory(200, 256, 512, wtype, "float16", 128, 0, zeros, False, BM=128,
                              warps=8, rows=1, BK=64, stages=4, split=1)
    plain = _program(func)
    assert not any(isinstance(s, WarpRoles) for s in walk(plain.body))
    monkeypatch.setattr(ws, "DEQUANTIZE", True)
    program = _program(func)
    roles = _roles(program)
    assert roles.producer_threads == program.num_threads == 256
    assert not any(isinstance(s, DotShared) for s in walk(roles.producer))
    (dot,) = [s for s in walk(roles.consumer) if isinstance(s, DotShared)]
    assert dot.asynchronous and not isinstance(dot.a, RegisterTensor)  # both from shared memory
    want = random_inputs(func, 0, 64)
    got = [x.copy() for x in want]
    plain.run(*want)
    program.run(*got)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


def test_a_producer_of_other_than_the_blocks_threads_may_not_touch_registers():
    """Its threads are not the ones register layouts span (block/roles.py)."""
    from tilecraft.block import AllocateRegister

    program = _program(_gemm(128, 128, 256, bm=128, threads=256), ALWAYS)  # 256 + 128 threads
    roles = _roles(program)
    acc = next(s for s in walk(roles.consumer) if isinstance(s, AllocateRegister))
    producer = SeqStmt.create([acc, roles.producer])
    bad = dataclasses.replace(program, body=SeqStmt.create(
        list(program.body.stmts[:-1]) + [dataclasses.replace(roles, then_body=producer)]))
    with pytest.raises(TilecraftError) as err:
        bad.verify()
    assert err.value.code == "TC603" and "touches register tensors" in str(err.value)
