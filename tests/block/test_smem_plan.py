"""plan_shared: shared tensors whose lifetimes are disjoint share bytes (the MLA decode kernel's
Q tile and its output tile), the stages of a pipelined tile never do, and insert_barriers then
puts a barrier between the last reads of the earlier tensor and the first write of the later."""

import sys
from pathlib import Path

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    StoreShared,
)
from tilecraft.block.barriers import insert_barriers
from tilecraft.block.smem_plan import plan_shared
from tilecraft.ir import SeqStmt
from tilecraft.ir.visitor import walk
from tilecraft.layout import local, spatial
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402

ROWS = spatial(16, 8) * local(1, 4)


def _mla():
    return lowered_program(lower(load("flash_mla").flash_mla(64, 128, 1, 4096, 512, 64).func,
                                 H100_SXM))


def _shared(program) -> dict:
    return {s.out.name: s.out for s in walk(program.body)
            if type(s).__name__ == "AllocateShared"}


def test_tiles_alive_at_different_times_share_bytes_and_stages_do_not():
    program = _mla()
    plan = plan_shared(program.body)
    t = _shared(program)
    off = {n: plan.offsets[x.buffer] for n, x in t.items()}
    size = {n: x.layout.cosize * x.dtype.bits // 8 for n, x in t.items()}

    def overlap(a, b):
        return off[a] < off[b] + size[b] and off[b] < off[a] + size[a]

    assert overlap("Q_shared", "O_shared")  # Q is dead once the loop is done
    for staged in ("KV_shared_stages", "K_pe_shared_stages"):
        assert not any(overlap(staged, other) for other in t if other != staged)
    assert plan.size <= 227 * 1024  # (the H100's limit; without sharing 288 KB)
    assert sum(size.values()) > 227 * 1024
    assert plan.groups[t["O_shared"].buffer] is plan.groups[t["Q_shared"].buffer]
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
    import numpy as np

    import tilecraft.block.smem_plan as sp
    from tilecraft.block.vm import run

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


def test_a_kernel_whose_arena_exceeds_the_limit_is_tc503_at_the_kernel():
    import pytest

    import tilecraft.language as T
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.diagnostics import TilecraftError

    @T.prim_func
    def big(A: T.Tensor((256, 256), "float32"), B: T.Tensor((256, 256), "float32")):
        with T.Kernel(1, threads=128) as bx:  # marker: big kernel
            S = T.alloc_shared((256, 256), "float32")  # 256 KB alive with T
            U = T.alloc_shared((256, 256), "float32")
            T.copy(A, S)
            T.copy(A, U)
            for i, j in T.Parallel(256, 256):
                B[i, j] = S[i, j] + U[i, j]

    with pytest.raises(TilecraftError) as err:
        generate_block(lowered_program(lower(big, H100_SXM)), "sm_90a")
    assert err.value.code == "TC503"
    assert err.value.line == Path(__file__).read_text().splitlines().index(
        next(ln for ln in Path(__file__).read_text().splitlines()
             if "# marker: big kernel" in ln and "next(" not in ln)) + 1
