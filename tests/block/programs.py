"""Block programs built directly in Python (no frontend), shared by the tests."""

from __future__ import annotations

import sys

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
    Cast,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    Dot,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    Synchronize,
)
from tilecraft.ir import Const, For, SeqStmt, Var
from tilecraft.layout import local, make_swizzled_layout, replicate, spatial

BM, BN, BK = 64, 8, 16
THREADS = 128  # four warps stacked along M
# Tilus Figure 2's mma.m16n8k16 layouts, one copy per warp (B replicated over the warps)
ACC = spatial(4, 1).local(2, 1).spatial(8, 4).local(1, 2)
A_TILE = spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2)
B_TILE = replicate(4, 2) * local(2, 1).column_spatial(4, 8).local(2, 1)


def here() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def serial(var: Var, extent: int, body: list) -> For:
    return For(var, Const.create(0), Const.create(extent), "serial", SeqStmt.create(body))


def matmul(m: int, n: int, k: int, shared: bool = False) -> BlockProgram:
    """C = A @ B (f16 x f16 -> f32 accumulator -> f16), Figure 2 with f16 weights; with
    `shared`, the tiles go global -> shared (copy_async, a swizzled A) -> registers."""
    ga = GlobalTensor.create("a", "float16", (m, k))
    gb = GlobalTensor.create("b", "float16", (k, n))
    gc = GlobalTensor.create("c", "float16", (m, n))
    acc = RegisterTensor.create("acc", "float32", ACC)
    ta = RegisterTensor.create("ta", "float16", A_TILE)
    tb = RegisterTensor.create("tb", "float16", B_TILE)
    tc = RegisterTensor.create("tc", "float16", ACC)
    prog = BlockProgram.create("matmul", (ga, gb, gc), (m // BM, n // BN), THREADS, [])
    bi, bj = prog.block_vars
    bk = Var.create("bk")
    if shared:
        sa = SharedTensor.create("sa", "float16", (BM, BK), make_swizzled_layout((BM, BK), 16))
        sb = SharedTensor.create("sb", "float16", (BK, BN))
        prologue = [AllocateShared.create(sa), AllocateShared.create(sb)]
        step = [CopyAsync.create(sa, ga, offset=(bi * BM, bk * BK)),
                CopyAsync.create(sb, gb, offset=(bk * BK, bj * BN)),
                CopyAsyncCommitGroup.create(), CopyAsyncWaitGroup.create(0),
                Synchronize.create(),
                LoadShared.create(sa, ta), LoadShared.create(sb, tb),
                Dot.create(ta, tb, acc, out=acc),
                Synchronize.create()]
    else:
        prologue = []
        step = [LoadGlobal.create(ga, ta, offset=(bi * BM, bk * BK)),
                LoadGlobal.create(gb, tb, offset=(bk * BK, bj * BN)),
                Dot.create(ta, tb, acc, out=acc)]
    body = prologue + [
        AllocateRegister.create(acc, init=0.0),
        AllocateRegister.create(ta),
        AllocateRegister.create(tb),
        serial(bk, k // BK, step),
        AllocateRegister.create(tc),
        Cast.create(acc, tc),
        StoreGlobal.create(tc, gc, offset=(bi * BM, bj * BN)),
    ]
    return BlockProgram.create("matmul", (ga, gb, gc), prog.grid, THREADS, body,
                               block_vars=(bi, bj))
