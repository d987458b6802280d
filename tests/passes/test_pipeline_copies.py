"""pipeline_copies: a T.Pipelined loop's copies become stages issued ahead on the block program
(one barrier per iteration, the wgmma mainloop's asynchronous dot on Hopper), the pipelined
program computes on the VM what the interpreter computes (also with fewer iterations than
stages, and partial tiles), and what does not qualify keeps its copies complete at once."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft import interp
from tilecraft.block import (
    CopyAsync,
    CopyAsyncWaitGroup,
    DotShared,
    DotWaitGroup,
    RegisterTensor,
    SharedSlice,
    SharedTensor,
    Synchronize,
)
from tilecraft.block.barriers import insert_barriers
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import For
from tilecraft.ir.expr import const_int
from tilecraft.ir.visitor import walk
from tilecraft.layout import Swizzle, row_major, stacked
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import A100_SXM, H100_SXM

from .arena_interp import random_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402


def _gemm(m, n, k, bk=32, stages=3):
    return load("gemm").matmul(m, n, k, 64, 64, bk, num_stages=stages).func


def _loop(program) -> For:
    return next(s for s in walk(program.body) if isinstance(s, For))


def _same_as_interpreter(func, program, seed=0):
    want = random_inputs(func, seed, 64)
    got = [x.copy() for x in want]
    interp.run(func, want)
    program.run(*got)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


def test_a_pipelined_gemm_issues_its_copies_stages_ahead_with_one_barrier_per_iteration():
    program = lowered_program(lower(_gemm(128, 128, 256), A100_SXM))
    loop = _loop(program)
    body = list(loop.body.stmts)
    assert isinstance(body[0], CopyAsyncWaitGroup) and body[0].n == 1  # 3 stages: 2 ahead
    assert isinstance(body[1], Synchronize)
    prologue = [s for s in walk(program.body) if isinstance(s, CopyAsync)]
    assert len(prologue) == 2 * 2 + 2  # two tiles x two iterations ahead, and the refill
    staged = [s.out for s in walk(program.body)
              if type(s).__name__ == "AllocateShared" and s.out.name.endswith("_stages")]
    assert sorted(t.name for t in staged) == ["A_shared_stages", "B_shared_stages"]
    assert all(t.shape[0] == 3 for t in staged)
    barriers = [s for s in walk(insert_barriers(program).body) if isinstance(s, Synchronize)]
    assert len(barriers) == 1  # insert_barriers adds none to the pipelined loop
    _same_as_interpreter(_gemm(128, 128, 256), program)


def test_on_hopper_the_lone_dot_stays_in_flight_and_tma_stages_are_freed_by_mbarriers():
    """TMA loads on "full" barriers; every warp arrives on a stage's "empty" barrier once the
    dot that read it is done, and the issuing thread waits there before refilling it: no CTA
    barrier in the loop. The VM checks every phase a wait names."""
    from tilecraft.block import MbarrierArrive, MbarrierWait
    from tilecraft.ir import If

    from tilecraft.options import CompileOptions

    # (without warp specialization: tests/passes/test_warp_specialize.py has the split form)
    program = lowered_program(lower(_gemm(128, 128, 256),
                                    CompileOptions.for_arch("sm_90a", warp_specialize=False)))
    body = list(_loop(program).body.stmts)
    assert isinstance(body[0], MbarrierWait) and body[0].bars.name.endswith("_full")
    assert not any(isinstance(s, Synchronize) for s in walk(_loop(program).body))
    waits = [s for s in walk(_loop(program).body) if isinstance(s, MbarrierWait)]
    assert [w.issuer for w in waits] == [False, True]  # the empty wait: the issuer's alone
    dot, wait, arrive = body[-3], body[-2], body[-1]
    assert isinstance(dot, DotShared) and dot.asynchronous
    assert isinstance(wait, DotWaitGroup) and wait.n == 1
    assert isinstance(arrive, If) and isinstance(arrive.then_body, MbarrierArrive)
    _same_as_interpreter(_gemm(128, 128, 256), program)


def test_on_hopper_without_tma_the_lone_dot_stays_in_flight_across_iterations():
    from tilecraft.options import CompileOptions

    program = lowered_program(lower(_gemm(128, 128, 256),
                                    CompileOptions.for_arch("sm_90a", tma=False)))
    body = list(_loop(program).body.stmts)
    assert isinstance(body[0], CopyAsyncWaitGroup) and body[0].n == 0  # 3 stages: 1 ahead
    dot, wait = body[-2], body[-1]
    assert isinstance(dot, DotShared) and dot.asynchronous
    assert isinstance(wait, DotWaitGroup) and wait.n == 1
    after = [s for s in walk(program.body) if isinstance(s, DotWaitGroup)]
    assert [w.n for w in after] == [1, 0]
    _same_as_interpreter(_gemm(128, 128, 256), program)


@pytest.mark.parametrize("target", [A100_SXM, H100_SXM], ids=["sm80", "sm90a"])
@pytest.mark.parametrize("m,n,k,bk,stages", [(64, 64, 64, 32, 4), (100, 72, 200, 32, 3),
                                             (64, 64, 96, 32, 2)])
def test_pipelined_programs_compute_what_the_interpreter_computes(target, m, n, k, bk, stages):
    """Fewer iterations than stages, partial tiles, two stages."""
    func = _gemm(m, n, k, bk, stages)
    program = lowered_program(lower(func, target))
    assert any(isinstance(s, SharedSlice) for s in walk(program.body))
    _same_as_interpreter(func, program, seed=k)


def test_a_tile_also_used_after_the_loop_keeps_its_copies_complete_at_once():
    @T.prim_func
    def last_tile(A: T.Tensor((64, 256), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 64], S)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += S[i, j]
            T.copy(S, B)  # the last tile: a stage would be the wrong one

    program = lowered_program(lower(last_tile, A100_SXM))
    assert not any(isinstance(s, SharedSlice) for s in walk(program.body))
    _same_as_interpreter(last_tile, program)


def test_a_slice_needs_leading_strides_that_are_whole_swizzle_periods():
    tile = row_major(64, 32).with_swizzle(Swizzle(2, 3, 3))
    good = SharedTensor.create("good", "float16", (2, 64, 32), stacked(tile, 2))
    sl = SharedSlice.create(good, [1], "stage")
    assert sl.out.layout == tile and sl.out.shape == (64, 32)
    bad = SharedTensor.create("bad", "float16", (3, 4, 32),
                              row_major(3, 4, 32).with_swizzle(Swizzle(2, 3, 3)))
    with pytest.raises(TilecraftError) as err:
        SharedSlice.create(bad, [1], "stage")  # marker: bad slice
    assert err.value.code == "TC603"
    assert err.value.line == _line_of("# marker: bad slice")


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if marker in ln and "_line_of" not in ln)


@pytest.mark.parametrize("target", [A100_SXM, H100_SXM], ids=["sm80", "sm90a"])
def test_a_copy_indexed_by_a_let_of_the_loop_variable_is_still_pipelined(target):
    """`kk = base + k` at the top of the body (a split-K slice): the copies qualify as
    producers (the let is inlined into their offsets) and the loop runs in stages."""
    @T.prim_func
    def slice_sum(A: T.Tensor((64, 512), "float32"), B: T.Tensor((2, 64, 64), "float32")):
        with T.Kernel(2, threads=128) as bs:
            S = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=3):
                kk = bs * 4 + k
                T.copy(A[0, kk * 64], S)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += S[i, j] * (kk + 1)
            T.copy(acc, B[bs, 0, 0])

    program = lowered_program(lower(slice_sum, target))
    assert any(isinstance(s, SharedSlice) for s in walk(program.body))
    assert isinstance(_loop(program).body.stmts[0], CopyAsyncWaitGroup)
    _same_as_interpreter(slice_sum, program)


def _row_sums():
    """Y[b] = sum over r of (r + 1) X[4 b + r]: a (1, 256) shared row copied each iteration."""
    @T.prim_func
    def row_sums(X: T.Tensor((16, 256), "float32"), Y: T.Tensor((4, 256), "float32")):
        with T.Kernel(4, threads=128) as b:
            R = T.alloc_shared((1, 256), "float32")
            acc = T.alloc_fragment((1, 256), "float32")
            T.clear(acc)
            for r in T.Pipelined(4, num_stages=2):
                T.copy(X[b * 4 + r, 0], R)
                for i, j in T.Parallel(1, 256):
                    acc[i, j] += R[i, j] * (r + 1)
            T.copy(acc, Y[b, 0])

    return row_sums


@pytest.mark.parametrize("target", [A100_SXM, H100_SXM], ids=["sm80", "sm90"])
def test_a_row_tile_with_a_unit_dim_is_a_pipelined_producer(target):
    """The region's tile is (256,), the shared tile (1, 256): the copy is asynchronous and
    staged (it was synchronous, with no message: the shapes compared with and without the
    unit dim)."""
    func = _row_sums()
    program = lowered_program(lower(func, target))
    slices = [s for s in walk(program.body) if isinstance(s, SharedSlice)]
    assert slices and all(s.out.shape == (1, 256) for s in slices)
    assert any(isinstance(s, CopyAsync) for s in walk(program.body))
    assert isinstance(_loop(program).body.stmts[0], CopyAsyncWaitGroup)
    _same_as_interpreter(func, program)


@pytest.mark.gpu
def test_the_staged_row_tile_computes_on_the_gpu_what_the_interpreter_computes():
    import torch

    import tilecraft

    # small integers: every product and sum exact, so the GPU's fused multiply-adds (allowed on
    # float32: docs/language.md) round nothing and the results must agree bit for bit
    x = torch.randint(-50, 50, (16, 256), generator=torch.Generator().manual_seed(3)).float()
    want, got = torch.zeros(4, 256), torch.full((4, 256), float("nan"), device="cuda")
    kernel = tilecraft.compile(_row_sums())
    kernel(x, want)
    kernel(x.cuda(), got)
    assert torch.equal(got.cpu(), want)


def _scaled_gemm(k, stages=3):
    """C = (2 A) @ B with 2 A made in registers each iteration (wgmma's A from registers)."""
    from tilecraft.layout import spatial

    a_layout = spatial(4, 1).column_local(2, 4).spatial(8, 4).local(1, 2)  # mma A, 4 warps

    @T.prim_func
    def scaled(A: T.Tensor((64, k), "float16"), B: T.Tensor((k, 64), "float16"),
               C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(k // 32, num_stages=stages):
                T.copy(A[0, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 64], B_s)
                a = T.load_shared(A_s, layout=a_layout) * 2
                T.gemm(a, B_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C[0, 0])

    return scaled


def _dots(s) -> list:
    return [x for x in walk(s) if isinstance(x, DotShared)]


def test_on_hopper_a_dot_of_registers_made_each_iteration_stays_in_flight_on_two_buffers():
    """The loop runs two iterations a trip, each on its own registers (wgmma reads them until
    it completes), the odd last one after the loop; each dot is asynchronous with one group in
    flight."""
    from tilecraft.block import BinaryOp, LoadShared
    from tilecraft.options import CompileOptions

    program = lowered_program(lower(_scaled_gemm(160),
                                    CompileOptions.for_arch("sm_90a", warp_specialize=False)))
    loop = _loop(program)
    assert const_int(loop.extent) == 2  # 5 iterations: 2 trips of two, then the last one
    body = list(loop.body.stmts)
    first, second = _dots(loop.body)
    (last,) = [d for d in _dots(program.body) if d not in (first, second)]
    assert all(d.asynchronous for d in (first, second, last))
    assert len({first.a, second.a, last.a}) == 3 and all(
        isinstance(d.a, RegisterTensor) for d in (first, second, last))
    assert first.b != second.b  # each its own stage's slice
    for d in (first, second):
        i = body.index(d)
        assert isinstance(body[i + 1], DotWaitGroup) and body[i + 1].n == 1
        assert isinstance(body[i - 1], BinaryOp) and body[i - 1].out == d.a  # made right before
        assert any(isinstance(x, LoadShared) for x in body[:i])
    waits = [s.n for s in program.body.stmts if isinstance(s, DotWaitGroup)]
    assert waits == [1, 0]  # the last iteration's, then all
    _same_as_unpipelined(_scaled_gemm(160), program)


def _same_as_unpipelined(func, program, seed=0):
    """The VM runs `program` to the bits of the same kernel lowered without the in-flight dot
    (the interpreter cannot run block instructions); both are (2 A) @ B."""
    from tilecraft.options import CompileOptions

    plain = lowered_program(lower(func, CompileOptions.for_arch("sm_90a", wgmma_pipeline=False)))
    assert not any(d.asynchronous for d in _dots(plain.body))
    want = random_inputs(func, seed, 64)
    got = [x.copy() for x in want]
    plain.run(*want)
    program.run(*got)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
    a, b, c = (x.astype(np.float64) for x in got)
    np.testing.assert_allclose(c, (2 * a) @ b, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "cp_async"])
@pytest.mark.parametrize("k,stages", [(64, 3), (96, 3), (96, 4), (128, 4), (160, 4)])
def test_register_a_pipelines_compute_what_the_unpipelined_program_computes(k, stages, tma):
    """Two to five iterations (fewer than the stages too, even and odd counts), 3 and 4 stages."""
    from tilecraft.options import CompileOptions

    func = _scaled_gemm(k, stages)
    program = lowered_program(lower(func, CompileOptions.for_arch("sm_90a", tma=tma)))
    assert all(d.asynchronous for d in _dots(program.body))
    assert len(_dots(program.body)) == min(k // 32, 2) + k // 32 % 2
    _same_as_unpipelined(func, program, seed=k)


def test_a_dot_on_registers_made_before_the_loop_is_not_left_in_flight():
    """`a` allocated outside the loop and rewritten in place each iteration: one register
    buffer, so the dot stays synchronous (wgmma would read it while the next one is made)."""
    from tilecraft.layout import spatial

    @T.prim_func
    def in_place(A: T.Tensor((64, 96), "float16"), B: T.Tensor((96, 64), "float16"),
                 C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            a = T.alloc_fragment((64, 32), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({a: spatial(4, 1).column_local(2, 4).spatial(8, 4).local(1, 2)})
            T.clear(acc)
            for ko in T.Pipelined(3, num_stages=3):
                T.copy(A[0, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 64], B_s)
                T.copy(A_s, a)
                T.gemm(a, B_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C[0, 0])

    program = lowered_program(lower(in_place, H100_SXM))
    (dot,) = _dots(program.body)
    assert not dot.asynchronous
    assert any(isinstance(s, SharedSlice) for s in walk(program.body))  # still pipelined
    _same_as_interpreter(in_place, program)


@pytest.mark.parametrize("ws", [False, True], ids=["plain", "warp_specialized"])
def test_stage_indices_and_phases_print_as_plain_c_division(ws):
    """The pipelines write stage k - 1 as (k + S - 1) % S and the phase of (k - 2) // S as
    (k + 2S - 2) // S % 2 (the same values): numerators the printer proves non-negative print
    as C `/` and `%`, not tc::floordiv / tc::floormod (signed-division sequences in the loop
    of every TMA mainloop)."""
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.options import CompileOptions

    opts = CompileOptions.for_arch("sm_90a", warp_specialize="always" if ws else False)
    src = generate_cuda(_gemm(128, 128, 512, bk=64, stages=4), options=opts).source
    assert "mbarrier_wait" in src and ("warp_roles" in src or "setmaxnreg" in src) == ws
    assert "tc::floormod" not in src and "tc::floordiv" not in src
