"""ldmatrix for the operands of a dot on mma.sync that reads them from shared memory
(block/ldmatrix.py, printed by codegen/block_cuda/mma.py): selection picks it where the
instruction delivers exactly the registers the load's layout says (also .trans for operands
stored MN-major, and for transposed operands that are views of the loaded tile), keeps scalar
loads elsewhere; the printed lane addresses, evaluated on the CPU with ldmatrix's semantics,
give every thread the elements its layout says; the kernels compile without spills and, on
the GPU, compute what torch does."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
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
    StoreShared,
    Synchronize,
)
from tilecraft.block.barriers import insert_barriers
from tilecraft.block.ldmatrix import Ldmatrix, ScalarBlock
from tilecraft.block.select import FromSharedPlan, select_instructions
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.codegen.block_cuda.printer import BlockPrinter
from tilecraft.ir import Const, For, SeqStmt, Var
from tilecraft.ir.visitor import walk
from tilecraft.layout import column_major, make_swizzled_layout, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16 as ATOM
from tilecraft.layout.shared import strided
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import A100_SXM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm import matmul  # noqa: E402

BIG = dict(block_M=128, block_N=256, block_K=64, threads=256)


def _gemm(m, n, k, bm=64, bn=64, bk=32, trans_a=False, trans_b=False, dtype="float16"):
    """C (float32) = A @ B with A stored [K, M] when trans_a and B stored [N, K] when trans_b."""

    @T.prim_func
    def gemm_t(A: T.Tensor((k, m) if trans_a else (m, k), dtype),
               B: T.Tensor((n, k) if trans_b else (k, n), dtype),
               C: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bk, bm) if trans_a else (bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk) if trans_b else (bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=2):
                if trans_a:
                    T.copy(A[ko * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(C_f, C[by * bm, bx * bn])

    return gemm_t


def _lowered(func) -> BlockProgram:
    return lowered_program(lower(func, A100_SXM))


def _operand_loads(program: BlockProgram) -> dict[str, list]:
    """Operand name -> its loads (Ldmatrix / ScalarBlock) over the k steps of every fused dot."""
    out: dict[str, list] = {}
    for plan in select_instructions(insert_barriers(program)).values():
        if isinstance(plan, FromSharedPlan):
            for kstep in plan.ksteps:
                for x in kstep.loads:
                    out.setdefault(x.operand.buffer.name, []).append(x)
    return out


def _funcs(loads: list) -> set:
    return {x.func if isinstance(x, Ldmatrix) else "scalar" for x in loads}


def _one_warp_dot(a_layout, staged: bool = False, k: int = 16, n: int = 8) -> BlockProgram:
    """One block of 128 threads: C[64, n] = A[64, k] @ B[k, n], A through a shared tile laid
    out by `a_layout`, B through a row-major one, both loaded into the mma operand layouts (B's
    register blocks column-major: with n = 16 a k step's two B blocks are not adjacent).
    `staged`: A's tile is the stage `s` of a [2, 64, k] tensor (a loop over s adds both
    stages' products: A's offset is a variable)."""
    ga, gb = GlobalTensor.create("a", "float16", (64, k)), GlobalTensor.create("b", "float16",
                                                                              (k, n))
    gc = GlobalTensor.create("c", "float32", (64, n))
    sa = SharedTensor.create("sa", "float16", ((2, 64, k) if staged else (64, k)), a_layout)
    sb = SharedTensor.create("sb", "float16", (k, n))
    acc = RegisterTensor.create("acc", "float32", spatial(4, 1).local(1, n // 8) * ATOM.c)
    ta = RegisterTensor.create("ta", "float16", spatial(4, 1).local(1, k // 16) * ATOM.a)
    tb = RegisterTensor.create("tb", "float16", replicate(4, 2).column_local(k // 16, n // 8)
                                * ATOM.b)
    s = Var.create("s")
    ra = RegisterTensor.create("ra", "float16", spatial(64, 2).local(1, k // 2))
    copies = ([AllocateRegister.create(ra), LoadGlobal.create(ga, ra, offset=(0, 0))]
              + [StoreShared.create(ra, sa, offset=(k, 0, 0)) for k in (0, 1)]
              if staged else [CopyAsync.create(sa, ga, offset=(0, 0))])
    dot = [AllocateRegister.create(ta),
           LoadShared.create(sa, ta, offset=(s, 0, 0) if staged else (0, 0),
                             dims=(1, 2) if staged else None),
           AllocateRegister.create(tb), LoadShared.create(sb, tb),
           Dot.create(ta, tb, acc, out=acc)]
    body = [AllocateShared.create(sa), AllocateShared.create(sb), *copies,
            CopyAsync.create(sb, gb, offset=(0, 0)),
            CopyAsyncCommitGroup.create(), CopyAsyncWaitGroup.create(0), Synchronize.create(),
            AllocateRegister.create(acc, init=0.0),
            For(s, Const.create(0), Const.create(2), "serial", SeqStmt.create(dot))
            if staged else SeqStmt.create(dot),
            StoreGlobal.create(acc, gc, offset=(0, 0))]
    return BlockProgram.create("one", (ga, gb, gc), (1,), 128, body)


def test_the_gemm_example_loads_both_operands_by_ldmatrix_on_sm80():
    for kw in ({}, BIG):
        loads = _operand_loads(_lowered(matmul(256, 256, 256, **kw).func))
        a, b = (next(v for n, v in loads.items() if n.startswith(p)) for p in ("A_", "B_"))
        assert _funcs(a) == {"tc::ldmatrix_x4"}  # A stored [M, K]: K-major rows
        assert _funcs(b) == {"tc::ldmatrix_x4_trans"}  # B stored [K, N]: N-major, transposed
        assert all(len(x.regs) == 4 for x in a + b)  # two B blocks per ldmatrix.x4


def test_transposed_operands_are_views_of_tiles_loaded_by_ldmatrix():
    loads = _operand_loads(_lowered(_gemm(128, 128, 64, trans_b=True)))
    assert _funcs(next(v for n, v in loads.items() if n.startswith("B_"))) == {"tc::ldmatrix_x4"}
    loads = _operand_loads(_lowered(_gemm(128, 128, 64, trans_a=True)))
    assert _funcs(next(v for n, v in loads.items() if n.startswith("A_"))) == {
        "tc::ldmatrix_x4_trans"}  # A stored [K, M]
    source = print_cuda(_lowered(_gemm(128, 128, 64, trans_b=True))).source
    assert "memcpy" not in source  # the view is fused: no copy between register arrays


def test_rows_that_are_not_16_byte_aligned_fall_back_to_scalar_loads():
    loads = _operand_loads(_one_warp_dot(strided((64, 16), (17, 1))))  # rows of 17 elements
    assert _funcs(loads["ta"]) == {"scalar"} and all(isinstance(x, ScalarBlock)
                                                     for x in loads["ta"])
    assert _funcs(loads["tb"]) == {"tc::ldmatrix_x2_trans"}  # one n8 block: two matrices


def test_an_operand_stored_mn_major_is_loaded_by_ldmatrix_trans():
    assert _funcs(_operand_loads(_one_warp_dot(column_major(64, 16)))["ta"]) == {
        "tc::ldmatrix_x4_trans"}
    assert _funcs(_operand_loads(_one_warp_dot(make_swizzled_layout((64, 16), 16)))["ta"]) \
        == {"tc::ldmatrix_x4"}


def _c_eval(expr: str, env: dict) -> int:
    """A printed index expression (non-negative ints: C `/` floors) for the values in `env`."""
    return eval(expr.replace("/", "//"), {"__builtins__": {}}, env)


def _check_printed_addresses(program: BlockProgram, values: dict | None = None) -> int:
    """Evaluate every printed ldmatrix's lane addresses and apply ldmatrix's semantics (lane l
    gives row l % 8 of matrix l // 8; thread t gets row t // 4, columns 2 (t % 4) + {0, 1}, or
    the transpose): each thread must receive, in each register, the shared offset of the element
    the load's layout gives it there (variables in offsets take `values`). Returns the number
    of ldmatrix checked."""
    values = values or {}
    program = insert_barriers(program)
    plans = select_instructions(program)
    printer = BlockPrinter(program, plans)
    nt, checked = program.num_threads, 0
    for plan in plans.values():
        if not isinstance(plan, FromSharedPlan):
            continue
        names = {printer.var_name(v): n for v, n in values.items()}
        env = [{"tid": t, **names} for t in range(nt)]  # + each operand's base row
        for op, base in plan.bases.items():
            text = printer.lane_address(base, plan.loads[op], plan.tiles[op])
            for e in env:
                e[f"{printer.tensor(op)}row"] = _c_eval(text, dict(e))
        for x in (x for k in plan.ksteps for x in k.loads if isinstance(x, Ldmatrix)):
            load, tile = plan.loads[x.operand], plan.tiles[x.operand]
            printer.lines = []
            printer.move_matrices(x, load, tile, plan.bases)
            line = next(x for x in printer.lines if "tc::ldmatrix" in x)
            expr = re.search(r", &\w+\[(.*)\]\);$", line).group(1)
            addr = [_c_eval(expr, e) for e in env]
            offset = [values[o] if isinstance(o, Var) else int(o.value) for o in load.offset]
            for t in range(nt):
                w, lane = divmod(t, 32)
                for q, r in enumerate(x.regs):
                    for e in (0, 1):
                        row, col = ((2 * (lane % 4) + e, lane // 4) if x.trans
                                    else (lane // 4, 2 * (lane % 4) + e))
                        got = addr[w * 32 + 8 * q + row] + col
                        idx = list(offset)
                        for d, c in zip(load.dims, tile.layout.map(t, r + e)):
                            idx[d] += int(c)
                        assert got == load.src.layout.offset(*idx), (x, t, r + e)
            checked += 1
    return checked


@pytest.mark.parametrize("program", [
    lambda: _lowered(matmul(256, 256, 256).func),
    lambda: _lowered(_gemm(128, 128, 64, trans_b=True)),
    lambda: _lowered(_gemm(128, 128, 64, trans_a=True)),
    lambda: _one_warp_dot(column_major(64, 16)),
    lambda: _one_warp_dot(make_swizzled_layout((64, 32), 16), k=32),
    lambda: _one_warp_dot(make_swizzled_layout((64, 32), 16), k=32, n=16),
], ids=["gemm", "transpose_B", "transpose_A", "a_mn_major", "two_k_steps", "b_blocks_apart"])
def test_printed_lane_addresses_deliver_the_layouts_registers(program):
    assert _check_printed_addresses(program()) > 0


def test_b_blocks_apart_in_registers_share_one_ldmatrix_x4_through_a_temporary():
    program = _one_warp_dot(make_swizzled_layout((64, 32), 16), k=32, n=16)
    assert {x.regs for x in _operand_loads(program)["tb"]} == {(0, 2, 8, 10), (4, 6, 12, 14)}
    source = print_cuda(program).source
    assert "tc::ldmatrix_x4_trans(m, &sb_[" in source
    assert "reinterpret_cast<tc::u32*>(tb_)[4] = m[2];" in source
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    assert compile_cuda(source, "sm_80", name="one_kernel").resources.spill_stores == 0


def test_a_variable_stage_offset_keeps_ldmatrix_with_added_offsets_only():
    layout = make_swizzled_layout((2, 64, 32), 16)
    flat = make_swizzled_layout((64, 32), 16)  # the same without stages: XOR for k steps
    assert any(x.xor for x in _operand_loads(_one_warp_dot(flat, k=32))["ta"])
    program = _one_warp_dot(layout, staged=True, k=32)
    loads = _operand_loads(program)["ta"]  # the k step flips swizzled bits: an add instead
    assert _funcs(loads) == {"tc::ldmatrix_x4"} and all(not x.xor for x in loads)
    (s,) = {o for x in walk(program.body) if isinstance(x, LoadShared) for o in x.offset
            if isinstance(o, Var)}
    assert _check_printed_addresses(program, {s: 1}) == 4  # two k steps of A and of B
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = np.full((64, 8), np.nan, np.float32)
    program.run(a, b, c)  # both stages hold A: twice the product
    np.testing.assert_allclose(c, 2 * a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kw", [{}, BIG], ids=["default", "128x256x64"])
def test_the_printed_gemm_compiles_without_spills(arch, kw):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    printed = print_cuda(_lowered(matmul(256, 256, 256, **kw).func))
    assert "tc::ldmatrix_x4(" in printed.source and "tc::ldmatrix_x4_trans(" in printed.source
    res = compile_cuda(printed.source, arch, name=printed.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0


def test_the_vm_runs_the_fallback_program_as_before():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = np.full((64, 8), np.nan, np.float32)
    _one_warp_dot(strided((64, 16), (17, 1))).run(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


# ---- on the GPU (the lead runs these) ------------------------------------------------------------

GPU_CASES = [
    ("gemm_default", lambda: matmul(256, 256, 256, 128, 128, 32, num_stages=3,
                                     threads=128).func, False, "float16"),
    ("gemm_128x256x64", lambda: matmul(512, 512, 256, **BIG).func, False, "float16"),
    ("gemm_bf16", lambda: matmul(256, 256, 128, dtype="bfloat16").func, False, "bfloat16"),
    ("gemm_partial", lambda: matmul(200, 136, 72).func, False, "float16"),
    ("transpose_B", lambda: _gemm(256, 128, 128, trans_b=True), True, "float16"),
    ("transpose_B_bf16", lambda: _gemm(128, 128, 96, trans_b=True, dtype="bfloat16"), True,
     "bfloat16"),
    ("transpose_A", lambda: _gemm(128, 128, 64, trans_a=True), False, "float16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_the_printed_gemm_matches_torch_on_the_gpu(case):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel

    name, make, trans_b, dtype = case
    func = make()
    program = _lowered(func)
    a_shape, b_shape, c_shape = (tuple(p.shape) for p in func.params)
    tdt = getattr(torch, dtype)
    a = torch.randn(a_shape, dtype=tdt, device="cuda")
    b = torch.randn(b_shape, dtype=tdt, device="cuda")
    c = torch.full(c_shape, float("nan"), dtype=getattr(torch, func.params[2].dtype.name),
                   device="cuda")
    kernel = build_block_kernel(program, "sm_90a" if torch.cuda.get_device_capability()[0] >= 9
                                else "sm_80")
    assert "tc::ldmatrix_x4" in kernel.source
    kernel(a, b, c)
    torch.cuda.synchronize()
    aa = a.float().T if name == "transpose_A" else a.float()
    bb = b.float().T if trans_b else b.float()
    want = aa @ bb
    err = (c.float() - want).norm() / want.norm()
    assert err.item() < 1e-2, name


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    (strided((64, 16), (17, 1)), False, 16), (column_major(64, 16), False, 16),
    (make_swizzled_layout((64, 32), 16), False, 32),
    (make_swizzled_layout((2, 64, 32), 16), True, 32)],
    ids=["scalar_fallback", "ldmatrix_trans", "ldmatrix", "ldmatrix_staged"])
@pytest.mark.parametrize("n", [8, 16])
def test_a_dot_from_shared_memory_matches_the_vm_on_the_gpu(case, n):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel

    a_layout, staged, k = case
    program = _one_warp_dot(a_layout, staged, k, n)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c_vm = np.full((64, n), np.nan, np.float32)
    program.run(a, b, c_vm)
    args = [torch.from_numpy(x).cuda() for x in (a, b, np.full((64, n), np.nan, np.float32))]
    build_block_kernel(program)(*args)
    torch.cuda.synchronize()
    np.testing.assert_allclose(args[2].cpu().numpy(), c_vm, rtol=1e-3, atol=1e-3)
