"""plan_shared: shared tensors whose lifetimes are disjoint share bytes (the MLA decode kernel's
output tile takes its KV stages' bytes once the pipeline is done), a tile rewritten at the top
of every iteration is dead between its last read and that write, async copies keep their
destination alive until they land, reductions stage through dead bytes, and insert_barriers
puts a barrier between the last accesses of the earlier tensor and the first write of the
later. run(..., arena=True) checks the lifetimes on the VM: a wrong reuse changes the result."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.block.smem_plan as sp
from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    BlockProgram,
    CopyAsync,
    CopyAsyncBulk,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    DotShared,
    DotWaitGroup,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    MbarrierExpect,
    MbarrierInit,
    MbarrierWait,
    RegisterTensor,
    SharedSlice,
    SharedTensor,
    StoreGlobal,
    StoreShared,
    Synchronize,
)
from tilecraft.block.barriers import insert_barriers
from tilecraft.block.smem_lifetimes import Lifetimes
from tilecraft.block.smem_plan import plan_shared
from tilecraft.block.vm import run
from tilecraft.ir import Const, For, If, SeqStmt, Var
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import walk
from tilecraft.layout import local, spatial
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402

ROWS = spatial(16, 8) * local(1, 4)


def _mla():
    """The production MLA kernel in one role (warp-specialized, its stages stay alive across
    both roles: tests/passes/test_shared_memory_plan.py)."""
    from tilecraft.options import CompileOptions

    one_role = CompileOptions(H100_SXM).replace(warp_specialize=False)
    return lowered_program(lower(load("flash_mla").flash_mla(64, 128, 1, 4096, 512, 64).func,
                                 one_role))


def _shared(program) -> dict:
    return {s.out.name: s.out for s in walk(program.body)
            if type(s).__name__ == "AllocateShared"}


def test_tiles_alive_at_different_times_share_bytes_stages_only_after_the_pipeline():
    program = _mla()
    plan = plan_shared(program.body)
    t = _shared(program)
    off = {n: plan.offsets[x.buffer] for n, x in t.items()}
    size = {n: x.layout.cosize * x.dtype.bits // 8 for n, x in t.items()}

    def overlap(a, b):
        return off[a] < off[b] + size[b] and off[b] < off[a] + size[a]

    assert overlap("KV_shared_stages", "O_shared")  # the pipeline is done: its copies landed
    live_in_loop = ("KV_shared_stages", "K_pe_shared_stages", "Q_shared", "Q_pe_shared",
                    "S_shared", "KV_shared_full")
    for i, a in enumerate(live_in_loop):
        assert not any(overlap(a, b) for b in live_in_loop[i + 1:]), a
    assert plan.size <= 227 * 1024  # (the H100's limit; without sharing 288 KB)
    assert sum(size.values()) > 227 * 1024
    assert plan.groups[t["O_shared"].buffer].meets(plan.groups[t["KV_shared_stages"].buffer])
    assert all(off[n] % 1024 == 0 for n, x in t.items() if x.layout.swizzle is not None)


def test_the_first_write_of_a_tile_sharing_bytes_waits_for_the_last_reads_of_the_other():
    g = GlobalTensor.create("g", "float32", (16, 32))
    a = SharedTensor.create("a", "float32", (16, 32))
    b = SharedTensor.create("b", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    body = SeqStmt.create([AllocateShared.create(a), AllocateShared.create(b),
                           AllocateRegister.create(r), LoadGlobal.create(g, r),
                           StoreShared.create(r, a), LoadShared.create(a, r),
                           StoreShared.create(r, b), LoadShared.create(b, r),
                           StoreGlobal.create(r, g)])
    plan = plan_shared(body)
    assert plan.offsets[a.buffer] == plan.offsets[b.buffer]  # a is dead when b is first written
    program = BlockProgram.create("p", (g,), (1,), 128, body)
    kinds = [type(s).__name__ for s in walk(insert_barriers(program, plan.groups).body)
             if type(s).__name__ in ("StoreShared", "LoadShared", "Synchronize")]
    assert kinds == ["StoreShared", "Synchronize", "LoadShared", "Synchronize", "StoreShared",
                     "Synchronize", "LoadShared"]
    alone = [type(s).__name__ for s in walk(insert_barriers(program).body)
             if type(s).__name__ in ("StoreShared", "LoadShared", "Synchronize")]
    assert alone == ["StoreShared", "Synchronize", "LoadShared", "StoreShared", "Synchronize",
                     "LoadShared"]  # (separate bytes: b's write need not wait for a's reads)


def test_the_vm_with_the_arena_shows_a_tensor_clobbered_by_one_sharing_its_bytes(monkeypatch):
    """run(..., arena=True) puts shared tensors where the plan does: a plan that let `b` take
    the bytes of `a` while `a` is still to be read would change the result, the real one not."""
    g = GlobalTensor.create("g", "float32", (16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    a = SharedTensor.create("a", "float32", (16, 32))
    b = SharedTensor.create("b", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    z = RegisterTensor.create("z", "float32", ROWS)
    body = [AllocateShared.create(a), AllocateShared.create(b), AllocateRegister.create(r),
            AllocateRegister.create(z, init=0.0), LoadGlobal.create(g, r),
            StoreShared.create(r, a), StoreShared.create(z, b), LoadShared.create(a, r),
            StoreGlobal.create(r, out)]
    program = BlockProgram.create("p", (g, out), (1,), 128, body)
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    y = np.zeros_like(x)
    run(program, [x, y], arena=True)
    np.testing.assert_array_equal(y, x)  # the plan keeps a and b apart: both are alive

    def overlapping(body):
        plan = plan_shared(body)
        plan.offsets = dict.fromkeys(plan.offsets, 0)
        return plan

    monkeypatch.setattr(sp, "plan_shared", overlapping)
    y = np.zeros_like(x)
    run(program, [x, y], arena=True)
    assert (y == 0).all()  # b's zeros overwrote a


def test_a_kernel_whose_arena_exceeds_the_limit_is_tc503_naming_its_largest_tiles():
    import tilecraft.language as T
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.diagnostics import TilecraftError

    @T.prim_func
    def big(A: T.Tensor((256, 256), "float32"), B: T.Tensor((256, 256), "float32")):
        with T.Kernel(1, threads=128):  # marker: big kernel
            S = T.alloc_shared((256, 256), "float32")  # 256 KB alive with T
            U = T.alloc_shared((256, 256), "float32")
            T.copy(A, S)
            T.copy(A, U)
            for i, j in T.Parallel(256, 256):
                B[i, j] = S[i, j] + U[i, j]

    with pytest.raises(TilecraftError) as err:
        generate_block(lowered_program(lower(big, H100_SXM)), "sm_90a")
    assert err.value.code == "TC503"
    assert "after reusing" in str(err.value) and "S 262144 B, U 262144 B" in str(err.value)
    assert err.value.line == Path(__file__).read_text().splitlines().index(
        next(ln for ln in Path(__file__).read_text().splitlines()
             if "# marker: big kernel" in ln and "next(" not in ln)) + 1


# ---- a tile rewritten at the top of every iteration ------------------------------------------
def _loop(var: Var, extent: int, body: list) -> For:
    return For(var, Const.create(0), Const.create(extent), "serial", SeqStmt.create(body))


def _two_tiles_per_iteration(carried: bool):
    """out = sum over k of 2 g[k] through x then y, both written in every iteration; with
    `carried`, each iteration first adds what x held from the one before (x lives across)."""
    g = GlobalTensor.create("g", "float32", (3, 16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    x = SharedTensor.create("x", "float32", (16, 32))
    y = SharedTensor.create("y", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    acc = RegisterTensor.create("acc", "float32", ROWS)
    k = Var.create("k")
    step = [LoadShared.create(x, r), BinaryOp.create("+", acc, r, acc)] if carried else []
    step += [LoadGlobal.create(g, r, offset=(k, 0, 0)), StoreShared.create(r, x),
             LoadShared.create(x, r), BinaryOp.create("*", r, 2.0, r),
             StoreShared.create(r, y), LoadShared.create(y, r), BinaryOp.create("+", acc, r, acc)]
    body = [AllocateShared.create(x), AllocateShared.create(y), AllocateRegister.create(r),
            AllocateRegister.create(acc, init=0.0), StoreShared.create(acc, x),
            _loop(k, 3, step), StoreGlobal.create(acc, out)]
    program = BlockProgram.create("p", (g, out), (1,), 128, body)
    data = np.random.default_rng(1).standard_normal((3, 16, 32)).astype(np.float32)
    want = 2 * data.sum(0) + (data[0] + data[1] if carried else 0)
    return program, (x, y), data, want


def _run(program, data) -> np.ndarray:
    out = np.zeros(data.shape[1:], np.float32)
    run(program, [data, out], arena=True)
    return out


def test_a_tile_rewritten_at_the_top_of_every_iteration_lends_its_dead_bytes():
    program, (x, y), data, want = _two_tiles_per_iteration(carried=False)
    plan = plan_shared(program.body)
    assert plan.offsets[x.buffer] == plan.offsets[y.buffer] and plan.size == 16 * 32 * 4
    np.testing.assert_allclose(_run(program, data), want, rtol=1e-5, atol=1e-5)
    loop = next(s for s in walk(insert_barriers(program, plan).body) if isinstance(s, For))
    kinds = [type(s).__name__ for s in loop.body.stmts
             if isinstance(s, (StoreShared, LoadShared, Synchronize))]
    # y's store waits for x's reads, the next iteration's store into x for y's reads
    assert kinds == ["StoreShared", "Synchronize", "LoadShared", "Synchronize", "StoreShared",
                     "Synchronize", "LoadShared", "Synchronize"]


def test_a_tile_read_before_its_rewrite_keeps_its_bytes_across_iterations(monkeypatch):
    program, (x, y), data, want = _two_tiles_per_iteration(carried=True)
    plan = plan_shared(program.body)
    assert plan.offsets[x.buffer] != plan.offsets[y.buffer]
    np.testing.assert_allclose(_run(program, data), want, rtol=1e-5, atol=1e-5)

    def shared_anyway(body, scratch=None):  # what a planner ignoring the carried value does
        plan = plan_shared(body)
        plan.offsets = dict.fromkeys(plan.offsets, 0)
        return plan

    monkeypatch.setattr(sp, "plan_shared", shared_anyway)
    assert not np.allclose(_run(program, data), want, rtol=1e-5, atol=1e-5)


# ---- stages of a pipeline and tiles used after it ---------------------------------------------
def _cp_async_pipeline(late: bool):
    """out = g[0] + g[1] + g[2] through two stages (cp.async, one tile ahead: the last
    iteration prefetches g[3], never read) and a tile `p` written after the loop: before
    the final wait (`late`: the prefetch may still land on it) or after it."""
    g = GlobalTensor.create("g", "float32", (4, 16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    stages = SharedTensor.create("stages", "float32", (2, 16, 32))
    p = SharedTensor.create("p", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    acc = RegisterTensor.create("acc", "float32", ROWS)
    k = Var.create("k")
    first = SharedSlice.create(stages, [0], "s0")
    ahead = SharedSlice.create(stages, [simplify((k + 1) % 2)], "s_w")
    now = SharedSlice.create(stages, [simplify(k % 2)], "s")
    step = [CopyAsyncWaitGroup.create(0), ahead,
            CopyAsync.create(ahead.out, g, offset=(k + 1, 0, 0)), CopyAsyncCommitGroup.create(),
            now, LoadShared.create(now.out, r), BinaryOp.create("+", acc, r, acc)]
    tail = [StoreShared.create(acc, p), CopyAsyncWaitGroup.create(0)]
    body = [AllocateShared.create(stages), AllocateShared.create(p), AllocateRegister.create(r),
            AllocateRegister.create(acc, init=0.0), first,
            CopyAsync.create(first.out, g, offset=(0, 0, 0)), CopyAsyncCommitGroup.create(),
            _loop(k, 3, step), *(tail if late else tail[::-1]), LoadShared.create(p, r),
            StoreGlobal.create(r, out)]
    program = BlockProgram.create("p", (g, out), (1,), 128, body)
    data = np.random.default_rng(2).standard_normal((4, 16, 32)).astype(np.float32)
    return program, (stages, p), data, data[:3].sum(0)


def test_a_tile_written_after_the_final_wait_takes_the_stages_bytes_behind_a_barrier():
    program, (stages, p), data, want = _cp_async_pipeline(late=False)
    plan = plan_shared(program.body)
    assert plan.offsets[p.buffer] < plan.offsets[stages.buffer] + 2 * 16 * 32 * 4
    assert plan.groups[p.buffer].meets(plan.groups[stages.buffer])
    np.testing.assert_allclose(_run(program, data), want, rtol=1e-5, atol=1e-5)
    top = list(insert_barriers(program, plan).body.stmts)
    loop = next(i for i, s in enumerate(top) if isinstance(s, For))
    store = next(i for i, s in enumerate(top) if isinstance(s, StoreShared) and s.dst == p)
    assert any(isinstance(s, Synchronize) for s in top[loop + 1:store])  # the stages' reads


def test_a_tile_written_while_a_copy_into_the_stages_is_in_flight_keeps_apart(monkeypatch):
    program, (stages, p), data, want = _cp_async_pipeline(late=True)
    plan = plan_shared(program.body)
    assert plan.offsets[p.buffer] >= plan.offsets[stages.buffer] + 2 * 16 * 32 * 4 or \
        plan.offsets[p.buffer] + 16 * 32 * 4 <= plan.offsets[stages.buffer]
    np.testing.assert_allclose(_run(program, data), want, rtol=1e-5, atol=1e-5)

    def on_the_prefetched_stage(body, scratch=None):  # the copy of g[3] lands in stage 1
        plan = plan_shared(body)
        plan.offsets[p.buffer] = plan.offsets[stages.buffer] + 16 * 32 * 4
        return plan

    monkeypatch.setattr(sp, "plan_shared", on_the_prefetched_stage)
    np.testing.assert_allclose(_run(program, data), want - data[:3].sum(0) + data[3],
                               rtol=1e-5)  # p reads g[3]: the copy landed on it at the wait


def _tma_pipeline(guarded: bool):
    """Three tiles through two TMA stages (the shape of passes/pipeline_copies.py), and a tile
    `p` used after the loop; without the `k + 1 < 3` guard the last iteration starts a copy
    that no wait lands."""
    g = GlobalTensor.create("g", "float32", (4, 16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    stages = SharedTensor.create("stages", "float32", (2, 16, 32))
    bars = SharedTensor.create("bars", "uint64", (2,))
    p = SharedTensor.create("p", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    acc = RegisterTensor.create("acc", "float32", ROWS)
    k = Var.create("k")
    first = SharedSlice.create(stages, [0], "s0")
    nxt = simplify(simplify(k + 1) % 2)
    ahead = SharedSlice.create(stages, [nxt], "s_w")
    now = SharedSlice.create(stages, [simplify(k % 2)], "s")
    refill = [MbarrierExpect.create(bars, nxt, 2048), ahead,
              CopyAsyncBulk.create(ahead.out, g, (k + 1, 0, 0), bars, nxt)]
    step = [MbarrierWait.create(bars, simplify(k % 2), simplify(k // 2 % 2)),
            Synchronize.create(),
            If(simplify(simplify(k + 1) < 3), SeqStmt.create(refill)) if guarded else
            SeqStmt.create(refill),
            now, LoadShared.create(now.out, r), BinaryOp.create("+", acc, r, acc)]
    body = [AllocateShared.create(stages), AllocateShared.create(p), AllocateShared.create(bars),
            AllocateRegister.create(r), AllocateRegister.create(acc, init=0.0),
            MbarrierInit.create(bars, 1), Synchronize.create(),
            MbarrierExpect.create(bars, 0, 2048), first,
            CopyAsyncBulk.create(first.out, g, (0, 0, 0), bars, 0), _loop(k, 3, step),
            StoreShared.create(acc, p), LoadShared.create(p, r), StoreGlobal.create(r, out)]
    return BlockProgram.create("p", (g, out), (1,), 128, body), (stages, p)


def test_a_tma_pipeline_whose_last_copies_land_in_the_loop_lends_its_stages_after_it():
    program, (stages, p) = _tma_pipeline(guarded=True)
    plan = plan_shared(program.body)
    assert plan.offsets[p.buffer] == plan.offsets[stages.buffer]
    data = np.random.default_rng(3).standard_normal((4, 16, 32)).astype(np.float32)
    np.testing.assert_allclose(_run(program, data), data[:3].sum(0), rtol=1e-5, atol=1e-5)
    unguarded, (stages, p) = _tma_pipeline(guarded=False)  # a copy may land after the loop
    plan = plan_shared(unguarded.body)
    assert plan.offsets[p.buffer] >= plan.offsets[stages.buffer] + 2 * 16 * 32 * 4


def test_operands_of_an_asynchronous_dot_live_until_its_wait():
    from tests.block.programs import ACC

    a = SharedTensor.create("a", "float16", (64, 16))
    b = SharedTensor.create("b", "float16", (16, 8))
    c = SharedTensor.create("c", "float32", (64, 8))
    acc = RegisterTensor.create("acc", "float32", ACC)

    def plan(asynchronous: bool):
        body = [AllocateShared.create(a), AllocateShared.create(b), AllocateShared.create(c),
                AllocateRegister.create(acc, init=0.0),
                DotShared.create(a, b, acc, asynchronous=asynchronous),
                StoreShared.create(acc, c), DotWaitGroup.create(0)]
        return plan_shared(SeqStmt.create(body))

    assert plan(False).offsets[c.buffer] == plan(False).offsets[a.buffer]
    async_plan = plan(True)  # the wgmma may still read a and b while c is written
    assert async_plan.offsets[c.buffer] >= async_plan.offsets[a.buffer] + 64 * 16 * 2


# ---- the reductions' scratch ------------------------------------------------------------------
def test_cross_warp_reductions_stage_through_dead_bytes_behind_a_barrier():
    from tilecraft.block import ReduceRegister
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.codegen.block_cuda.compute import reduction_scratch

    st = lower(load("flash_mla").flash_mla(4, 128, 1, 8192, 512, 64, block_N=64, block_H=64,
                                           num_stages=2, threads=256).func, H100_SXM)
    plan, program = st.arena, st.block_program
    lives = Lifetimes(reduction_scratch(program.num_threads))
    lives.visit(program.body)
    assert len(lives.staged) == 2  # reduce_max and reduce_sum, 2 KB of partials each
    for s, pos, n in lives.staged:
        start, got = plan.scratch_at(s)
        assert got == n == 2048 and start == plan.offsets[_shared(program)["S_shared"].buffer]
        for r in lives.roots.values():  # no tensor alive there uses those bytes
            lo = plan.offsets[r.tensor.buffer]
            if lo < start + n and start < lo + sp._nbytes(r.tensor):
                assert not r.span()[0] <= pos <= r.span()[1], r.tensor.name
    loop = next(s for s in walk(st.prepared.program.body) if isinstance(s, For)  # (the
                and any(isinstance(x, ReduceRegister) for x in walk(s.body)))  # consumer's)
    body = list(loop.body.stmts)
    total = max(i for i, s in enumerate(body) if isinstance(s, ReduceRegister))
    store = next(i for i, s in enumerate(body) if isinstance(s, StoreShared))
    assert total < store and any(isinstance(s, Synchronize) for s in body[total:store])
    gen = generate_block(st.prepared.program, "sm_90a", st.prepared)
    assert gen.launch.smem == -(-plan.size // 128) * 128  # nothing after the arena
    assert f"(tc_smem + {start});" in gen.source
