"""Warp specialization of a pipelined loop without the lone in-flight dot (attention's two dots,
MLA's scores through shared memory, a 2-stage GEMM): the producer warpgroup issues the TMA
copies; the consumers wait on "full", run the whole body and release the stage on "empty" once
it is done (passes/pipeline_copies.py, warp_specialize.py `split_mode`). The split programs
compute on the VM what the interpreter computes; a release moved before the body's last read
is a race the VM reports."""

import dataclasses
import sys
from pathlib import Path

import pytest

from tilecraft.block import CopyAsyncBulk, DotShared, MbarrierArrive, MbarrierWait, Synchronize
from tilecraft.block.roles import WarpRoles, launch_threads
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import For, SeqStmt
from tilecraft.ir.visitor import walk
from tilecraft.options import CompileOptions
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program

from .arena_interp import random_inputs
from .test_pipeline_copies import _same_as_interpreter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import CONFIGS, make  # noqa: E402

HOPPER = CompileOptions.for_arch("sm_90a")
ALWAYS = HOPPER.replace(warp_specialize="always")
BY_ID = {c[0]: c for c in CONFIGS}


def _attention(causal=False, stages=2, threads=128, block_M=128):
    from example_configs import load

    return load("flash_attention").flash_attention(
        1, 2, 256, 64, causal, block_M=block_M, block_N=64, num_stages=stages,
        threads=threads).func


def _program(func, options=ALWAYS):
    return lowered_program(lower(func, options))


def _roles(program) -> WarpRoles:
    top = program.body.stmts
    assert isinstance(top[-1], WarpRoles)
    return top[-1]


def _consumer_loop(program) -> For:
    (loop,) = [s for s in walk(_roles(program).consumer) if isinstance(s, For)
               and any(isinstance(x, MbarrierWait) for x in walk(s.body))]
    return loop


@pytest.mark.parametrize("causal,stages,threads", [(False, 2, 128), (True, 2, 128),
                                                   (False, 3, 256), (True, 4, 256)])
def test_attention_splits_and_the_consumers_release_each_stage_after_the_body(causal, stages,
                                                                              threads):
    func = _attention(causal, stages, threads)
    program = _program(func)
    roles = _roles(program)
    assert launch_threads(program) == threads + 128
    producer = list(walk(roles.producer))
    assert sum(isinstance(s, CopyAsyncBulk) for s in producer) == 2  # K and V
    assert not any(isinstance(s, DotShared) for s in producer)
    body = list(_consumer_loop(program).body.stmts)
    assert isinstance(body[0], MbarrierWait) and body[0].bars.name.endswith("_full")
    assert isinstance(body[-1], MbarrierArrive) and body[-1].bars.name.endswith("_empty")
    assert not any(isinstance(s, Synchronize) for s in body)  # no CTA barrier an iteration
    _same_as_interpreter(func, program, seed=stages)


@pytest.mark.parametrize("cid", ["flash_mla", "blocksparse_attention", "gemm_relu",
                                 "splitk_gemm", "flash_attention_causal"])
def test_split_examples_compute_what_the_interpreter_computes(cid):
    func = make(BY_ID[cid]).func
    program = _program(func)
    if cid in ("flash_mla", "flash_attention_causal", "gemm_relu"):
        assert any(isinstance(s, WarpRoles) for s in walk(program.body)), cid
    _same_as_interpreter(func, program)


def test_by_default_the_split_is_taken_where_the_tiles_keep_one_block_per_sm():
    """benchmarks/NOTES.md, session 30: attention's 128 x 128 tiles on 2 stages (192 KB of
    tiles) +7-22% on the H200; 64 KB of tiles leave room for more blocks: plain. MLA splits,
    its O_shared in Q_shared's bytes instead of the stages'."""
    from example_configs import load

    big = load("flash_attention").flash_attention(
        1, 2, 256, 128, False, block_M=128, block_N=128, num_stages=2, threads=256).func
    assert any(isinstance(s, WarpRoles) for s in walk(_program(big, HOPPER).body))
    program = _program(_attention(), HOPPER)
    assert not any(isinstance(s, WarpRoles) for s in walk(program.body))
    mla = load("flash_mla").flash_mla(64, 128, 1, 4096, 512, 64).func  # (O_shared in Q's)
    assert any(isinstance(s, WarpRoles) for s in walk(_program(mla, HOPPER).body))


def test_a_block_that_fits_only_reusing_its_stages_bytes_keeps_one_role():
    """The epilogue's 128 KB tile takes the 192 KB of stages' bytes after the loop; split,
    the stages stay alive across both roles: 320 KB. Refused even with "always", and the
    plain kernel compiles."""
    import tilecraft.language as T
    from tilecraft.codegen.cuda.build import generate_cuda

    @T.prim_func
    def wide_epilogue(A: T.Tensor((128, 512), "float16"), B: T.Tensor((512, 256), "float16"),
                      C: T.Tensor((128, 256), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((128, 128), "float16")
            B_s = T.alloc_shared((128, 256), "float16")
            C_s = T.alloc_shared((128, 256), "float32")
            acc = T.alloc_fragment((128, 256), "float32")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[0, ko * 128], A_s)
                T.copy(B[ko * 128, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s)
            T.copy(C_s, C)

    for options in (HOPPER, ALWAYS):
        gen = generate_cuda(wide_epilogue, options=options)
        assert not any(isinstance(s, WarpRoles) for s in walk(gen.state.block_program.body))
        assert "setmaxnreg" not in gen.source


def test_a_stage_released_before_the_bodys_last_read_is_caught_by_the_vm():
    """The release moved to the top of the body: the producer refills the stage (V) while
    the second dot still has to read it."""
    func = _attention(stages=2)
    program = _program(func)
    roles = _roles(program)
    loop = _consumer_loop(program)
    body = list(loop.body.stmts)
    moved = SeqStmt.create([body[0], body[-1]] + body[1:-1])
    new_loop = dataclasses.replace(loop, body=moved)

    def swap(s):
        if s is loop:
            return new_loop
        if isinstance(s, SeqStmt):
            return SeqStmt.create([swap(c) for c in s.stmts])
        return s

    broken = dataclasses.replace(program, body=SeqStmt.create(
        list(program.body.stmts[:-1]) + [dataclasses.replace(
            roles, else_body=swap(roles.consumer))]))
    with pytest.raises(TilecraftError) as err:
        broken.run(*random_inputs(func, 0, 64))
    assert err.value.code in ("TC611", "TC605")


def test_the_split_attention_prints_a_warp_sync_before_each_release_and_compiles_clean():
    pytest.importorskip("cuda.bindings.nvrtc")
    from example_configs import load

    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    func = load("flash_attention").flash_attention(
        8, 64, 4096, 128, True, block_M=128, block_N=128, num_stages=2, threads=256).func
    gen = generate_cuda(func, options=ALWAYS)
    src = gen.source
    split = src.index("if (threadIdx.x >= 256)")
    assert "__syncthreads()" not in src[split:]
    at = src.index("tc::mbarrier_arrive(", split)
    assert "__syncwarp();" in src[src.rindex("\n", 0, at - 60):at]
    res = compile_cuda(src, "sm_90a", name=gen.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0


def test_a_loop_whose_copies_read_a_staged_index_keeps_one_role():
    """The row index the copies' offsets read is filled by statements the consumers run: a
    producer would read it before it is written (found on the GPU with TILECRAFT_WS=always)."""
    import numpy as np

    from ..block.test_sink_stores import _indexed_rows

    func, args, want = _indexed_rows()
    program = _program(func)
    assert not any(isinstance(s, WarpRoles) for s in walk(program.body))
    program.run(*args)
    np.testing.assert_allclose(args[2], want, rtol=1e-5, atol=1e-3)


def test_without_that_refusal_the_vm_differs_from_the_interpreter(monkeypatch):
    """The race the refusal prevents is visible on the VM: the producer reads the index the
    consumers have not stored yet (poison: -1 for integers), and copies other rows."""
    from tilecraft.passes import pipeline_copies

    from ..block.test_sink_stores import _indexed_rows

    monkeypatch.setattr(pipeline_copies, "_reads_memory", lambda exprs: False)
    func, _, _ = _indexed_rows()
    program = _program(func)
    assert isinstance(program.body.stmts[-1], WarpRoles)
    with pytest.raises(AssertionError):
        _same_as_interpreter(func, program)


@pytest.mark.parametrize("causal,stages", [(False, 3), (True, 3), (True, 4)])
def test_the_rotated_consumer_computes_what_the_interpreter_computes(causal, stages,
                                                                    monkeypatch):
    """passes/overlap_dots.py (off by default: it measured no faster): the second dot in
    flight under the next iteration's max and exponentials, the next first dot issued before
    it; the VM checks that no in-flight dot's registers are touched."""
    from tilecraft.block import DotWaitGroup
    from tilecraft.passes import overlap_dots

    monkeypatch.setattr(overlap_dots, "ENABLED", True)
    func = _attention(causal, stages, threads=256)
    program = _program(func)
    loop = _consumer_loop(program)
    body = list(loop.body.stmts)
    assert isinstance(body[-1], DotWaitGroup) and body[-1].n == 1
    assert [s.asynchronous for s in walk(loop.body) if isinstance(s, DotShared)] == [True] * 2
    _same_as_interpreter(func, program, seed=stages)
    two = _program(_attention(causal, 2, threads=256))  # (2 stages: not rotated)
    assert isinstance(list(_consumer_loop(two).body.stmts)[0], MbarrierWait)
