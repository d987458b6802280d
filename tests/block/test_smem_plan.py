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
