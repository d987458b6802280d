"""insert_barriers: a barrier where the GPU needs one for a block program to mean what the
block-synchronous VM computes (read after write, write after read, loop iterations), none
between accesses of different shared tensors."""

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
    Synchronize,
)
from tilecraft.block.barriers import insert_barriers
from tilecraft.ir import Const, For, SeqStmt, Var
from tilecraft.ir.visitor import walk
from tilecraft.layout import spatial
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import A100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import CONFIGS, make

ROWS = spatial(16, 8).local(1, 4)


def _kinds(program) -> list[str]:
    return [type(s).__name__ for s in walk(program.body)
            if type(s).__name__ in ("StoreShared", "LoadShared", "Synchronize", "For")]


def _program(body_of):
    g = GlobalTensor.create("g", "float32", (16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    a = SharedTensor.create("a", "float32", (16, 32))
    b = SharedTensor.create("b", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    body = [AllocateShared.create(a), AllocateShared.create(b), AllocateRegister.create(r),
            LoadGlobal.create(g, r)] + body_of(a, b, r) + [StoreGlobal.create(r, out)]
    return BlockProgram.create("p", (g, out), (1,), 128, body)


def test_a_read_after_a_write_of_the_same_tensor_gets_a_barrier():
    p = insert_barriers(_program(lambda a, b, r: [StoreShared.create(r, a),
                                                  StoreShared.create(r, b),
                                                  LoadShared.create(a, r)]))
    assert _kinds(p) == ["StoreShared", "StoreShared", "Synchronize", "LoadShared"]


def test_a_write_after_a_read_gets_a_barrier_and_an_existing_one_counts():
    p = insert_barriers(_program(lambda a, b, r: [
        StoreShared.create(r, a), Synchronize.create(), LoadShared.create(a, r),
        StoreShared.create(r, a)]))
    assert _kinds(p) == ["StoreShared", "Synchronize", "LoadShared", "Synchronize",
                         "StoreShared"]


def test_a_loop_that_touches_shared_memory_ends_each_iteration_with_a_barrier():
    k = Var.create("k")

    def body(a, b, r):
        step = [StoreShared.create(r, a), LoadShared.create(a, r)]
        return [For(k, Const.create(0), Const.create(2), "serial", SeqStmt.create(step))]

    p = insert_barriers(_program(body))
    assert _kinds(p) == ["For", "StoreShared", "Synchronize", "LoadShared", "Synchronize"]


def test_the_pipelined_gemm_gets_one_barrier_per_iteration_as_a_hand_written_one():
    """The pipeline's barrier after the wait orders both the landed stage and the reuse of the
    stage read last iteration; insert_barriers adds none (no second one at the body's end)."""
    gemm = next(c for c in CONFIGS if c[0] == "gemm_partial")
    p = insert_barriers(lowered_program(lower(make(gemm).func, A100_SXM)))
    assert _kinds(p) == ["For", "Synchronize", "LoadShared", "LoadShared"]


def test_a_read_of_a_global_tensor_the_block_wrote_gets_a_barrier():
    """The VM sees a block's global stores at its next instruction (as the interpreter does):
    another thread's element read back waits at a barrier; different tensors need none."""
    g = GlobalTensor.create("g", "float32", (16, 32))
    h = GlobalTensor.create("h", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    body = [AllocateRegister.create(r), LoadGlobal.create(g, r), StoreGlobal.create(r, h),
            LoadGlobal.create(h, r), StoreGlobal.create(r, g)]
    p = insert_barriers(BlockProgram.create("p", (g, h), (1,), 128, body))
    kinds = [type(s).__name__ for s in walk(p.body) if type(s).__name__ != "SeqStmt"]
    assert kinds == ["AllocateRegister", "LoadGlobal", "StoreGlobal", "Synchronize",
                     "LoadGlobal", "StoreGlobal"]  # (the barrier also ordered the read of g)
