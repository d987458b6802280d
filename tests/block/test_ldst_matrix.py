"""ldmatrix / stmatrix for a load_shared / store_shared on its own (block/ldst_matrix.py, printed
by codegen/block_cuda/ldst_matrix.py): selection records a MatrixPlan where every register
pair of the 16-bit tile is a row piece of an 8x8 matrix one instruction moves (the mma A, B and
C layouts), stmatrix only for sm_90 and later, and keeps the vector or element loop elsewhere;
the printed lane addresses, evaluated on the CPU with the instructions' semantics, move every
register of every thread to or from its element's shared offset; the kernels compile for
sm_90a and sm_80 and, on the GPU, compute what the VM and torch do."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    BlockProgram,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedSlice,
    SharedTensor,
    StoreGlobal,
    StoreShared,
)
from tilecraft.block.ldmatrix import Ldmatrix, find_move, shared_offsets
from tilecraft.block.ldst_matrix import MatrixPlan, Stmatrix
from tilecraft.block.prepare import prepare
from tilecraft.block.select import VectorPlan
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.codegen.block_cuda.printer import BlockPrinter
from tilecraft.ir import Const, For, If, SeqStmt, Var
from tilecraft.ir.visitor import walk
from tilecraft.layout import column_major, make_swizzled_layout, replicate, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16 as ATOM
from tilecraft.layout.shared import strided
from tilecraft.targets import A100_SXM, H100_SXM

A = spatial(4, 1) * ATOM.a  # [64, 16]: four warps over M
A2 = spatial(4, 1).local(1, 2) * ATOM.a  # [64, 32]: two k blocks per warp
B = replicate(4, 2) * ATOM.b  # [16, 8]: every warp holds the whole B block
C = spatial(4, 1) * ATOM.c  # [64, 8]
C2 = spatial(4, 1).local(1, 4) * ATOM.c  # [64, 32]
ROWS = {(64, 16): spatial(64, 2).local(1, 8), (16, 8): spatial(16, 1).local(1, 8).replicate(8),
        (64, 8): spatial(64, 1).local(1, 8).replicate(2), (64, 32): spatial(32, 4).local(2, 8)}


def _program(load=None, store=None, shape=(64, 16), shared=None, dtype="float16",
             staged: int | None = None) -> BlockProgram:
    """y = x * 2 + 1 through shared memory: x loaded from global in `store` (default: rows of
    16 bytes per thread), store_shared into `sx` (laid out by `shared`), load_shared in `load`
    (default: the same rows), arithmetic, store_global. `staged`: sx is [2, *shape] (stage
    stride `staged` elements) and both transfers use stage s of a loop (offset variable) over
    one stage, through a shared_slice."""
    m, n = shape
    gx, gy = (GlobalTensor.create(nm, dtype, shape) for nm in ("x", "y"))
    whole = (2, m, n) if staged else shape
    layout = strided(whole, (staged, n, 1)) if staged else shared
    sx = SharedTensor.create("sx", dtype, whole, layout)
    rin = RegisterTensor.create("rin", dtype, store or ROWS[shape])
    t, u = (RegisterTensor.create(nm, dtype, load or ROWS[shape]) for nm in ("t", "u"))
    s = Var.create("s")
    if staged:
        sl = SharedSlice.create(sx, [s], "st")
        target, head = sl.out, [sl]
    else:
        target, head = sx, []
    body = [AllocateRegister.create(rin), LoadGlobal.create(gx, rin, offset=(0, 0)), *head,
            StoreShared.create(rin, target), AllocateRegister.create(t),
            LoadShared.create(target, t), AllocateRegister.create(u),
            BinaryOp.create("*", t, 2.0, u), BinaryOp.create("+", u, 1.0, u),
            StoreGlobal.create(u, gy, offset=(0, 0))]
    if staged:
        body = [For(s, Const.create(1), Const.create(1), "serial", SeqStmt.create(body))]
    return BlockProgram.create("through", (gx, gy), (1,), 128,
                               [AllocateShared.create(sx), *body])


def _plans(program: BlockProgram, target=None) -> dict:
    """'load' / 'store' -> the plan of the program's load_shared / store_shared (or None)."""
    prepared = prepare(program, target)
    out = {}
    for s in walk(prepared.program.body):
        if isinstance(s, (LoadShared, StoreShared)):
            out["load" if isinstance(s, LoadShared) else "store"] = prepared.plans.get(id(s))
    return out


def _funcs(plan) -> tuple:
    return tuple(x.func for x in plan.moves) if isinstance(plan, MatrixPlan) else plan


@pytest.mark.parametrize("load, shape, shared, funcs", [
    (A, (64, 16), None, ("tc::ldmatrix_x4",)),
    (A, (64, 16), column_major(64, 16), ("tc::ldmatrix_x4_trans",)),
    (B, (16, 8), None, ("tc::ldmatrix_x2_trans",)),  # B stored [K, N]: N-major
    (C, (64, 8), None, ("tc::ldmatrix_x2",)),
    (A2, (64, 32), make_swizzled_layout((64, 32), 16), ("tc::ldmatrix_x4",) * 2),
    (C2, (64, 32), make_swizzled_layout((64, 32), 16), ("tc::ldmatrix_x4",) * 2),
], ids=["A", "A_mn_major", "B", "C", "A_two_k_blocks", "C_four_n_blocks"])
def test_a_load_shared_in_an_mma_layout_is_ldmatrix(load, shape, shared, funcs):
    plan = _plans(_program(load=load, shape=shape, shared=shared))["load"]
    assert _funcs(plan) == funcs and all(isinstance(x, Ldmatrix) for x in plan.moves)
    if len(funcs) > 1:  # one lane address, the other moves relative to it
        assert plan.base is not None and all(x.xor is not None for x in plan.moves)


def test_a_layout_no_matrix_divides_keeps_the_vector_or_element_loop():
    assert _plans(_program())["load"] == VectorPlan(8, None)  # 8 consecutive per thread
    rows17 = _plans(_program(load=A, shared=strided((64, 16), (17, 1))))  # rows not aligned
    assert rows17["load"] is None
    half_rows = make_swizzled_layout((64, 32), 32)  # (4-byte chunks: 8 halves of a row split)
    assert not isinstance(_plans(_program(load=C2, shape=(64, 32), shared=half_rows))["load"],
                          MatrixPlan)
    f32 = _plans(_program(load=A, dtype="float32"))["load"]  # not a 16-bit type
    assert not isinstance(f32, MatrixPlan)
    source = print_cuda(_program(load=A, shared=strided((64, 16), (17, 1)))).source
    assert "ldmatrix" not in source and "t_[li] = sx_[" in source


def test_find_move_checks_every_thread_of_every_warp():
    program = _program(load=A)
    load = next(s for s in walk(program.body) if isinstance(s, LoadShared))
    offs = shared_offsets(load, load.out, 128)
    assert find_move(load.out, offs, (0, 2, 4, 6)).func == "tc::ldmatrix_x4"
    assert find_move(load.out, offs, (0, 2, 4, 6), Stmatrix).func == "tc::stmatrix_x4"
    bad = offs.copy()
    bad[127, 5] += 1  # one register of the last thread of the last warp elsewhere
    assert find_move(load.out, bad, (0, 2, 4, 6)) is None
    assert find_move(load.out, bad, (0, 2)) is not None  # (registers 0..3 still are)


@pytest.mark.parametrize("target, stmatrix", [(H100_SXM, True), (A100_SXM, False),
                                              (H100_SXM.with_arch("sm_80"), False),
                                              (None, False)],
                         ids=["sm_90a", "sm_80", "h100_as_sm_80", "no_target"])
def test_a_store_shared_in_the_mma_c_layout_is_stmatrix_on_sm_90_only(target, stmatrix):
    plan = _plans(_program(store=C, shape=(64, 8)), target)["store"]
    if stmatrix:
        assert _funcs(plan) == ("tc::stmatrix_x2",) and isinstance(plan.moves[0], Stmatrix)
    else:
        assert plan == VectorPlan(2, None)  # the register pairs, as before


def test_transfers_under_control_flow_on_the_thread_index_keep_the_loop():
    program = _program(load=A)
    tx = Var.create("tx")
    cond = If(tx < 64, program.body)
    program = dataclasses.replace(program, body=SeqStmt.create([cond]), thread_vars=(tx,),
                                  thread_extents=(128,))
    assert not isinstance(_plans(program)["load"], MatrixPlan)


@pytest.mark.parametrize("stride, selected", [(16 * 16 + 8, True), (16 * 16 + 4, False)])
def test_a_slice_whose_start_is_not_16_byte_aligned_keeps_the_loop(stride, selected):
    plans = _plans(_program(load=A, store=A, staged=stride), H100_SXM)
    assert isinstance(plans["load"], MatrixPlan) == selected
    assert isinstance(plans["store"], MatrixPlan) == selected


_MOVE = re.compile(r"tc::(ld|st)matrix_x(\d)(_trans)?\((.*)\);$")


def _c_eval(expr: str, env: dict) -> int:
    """A printed index expression (non-negative ints: C `/` floors) for the values in `env`."""
    return eval(expr.replace("/", "//"), {"__builtins__": {}}, env)


def _check_printed_moves(program: BlockProgram, target, values: dict | None = None) -> int:
    """Evaluate every printed ldmatrix/stmatrix's lane addresses and apply the instruction's
    map (lane l gives row l % 8 of matrix l // 8; thread t's word q is row t // 4, columns
    2 (t % 4) + {0, 1} of matrix q, or the transpose): every register of every thread must
    move to or from the shared offset of the element the tile's layout gives it there, each
    register once. Returns the number of moves checked."""
    prepared = prepare(program, target)
    printer = BlockPrinter(prepared.program, prepared.plans)
    nt, checked = program.num_threads, 0
    names = {printer.var_name(v): n for v, n in (values or {}).items()}
    for s in walk(prepared.program.body):
        if not isinstance(prepared.plans.get(id(s)), MatrixPlan):
            continue
        printer.lines = []
        assert printer.matrix_transfer(s)
        tile, row = s.tile, f"{printer.tensor(s.tile)}row"
        env = [{"tid": t, **names} for t in range(nt)]
        moved = np.zeros((nt, tile.layout.local_size), int)
        for line in (x.strip() for x in printer.lines):
            if line.startswith(f"const int {row} = "):
                for e in env:
                    e[row] = _c_eval(line.split(" = ", 1)[1].split(";")[0], dict(e))
                continue
            m = _MOVE.match(line)
            if m is None:
                continue
            kind, num, trans, args = m.group(1), int(m.group(2)), bool(m.group(3)), m.group(4)
            mem, reg = args.split(", reinterpret_cast") if kind == "st" else \
                args.split(", &", 1)[::-1]
            mem = re.fullmatch(r"&?\w+\[(.*)\]", mem.strip()).group(1)
            r0 = int(re.search(r"\[(\d+)\]\)$", reg).group(1))
            addr = [_c_eval(mem, e) for e in env]
            offset = [(values or {})[o] if isinstance(o, Var) else int(o.value) for o in s.offset]
            for t in range(nt):
                w, lane = divmod(t, 32)
                for q in range(num):
                    for e in (0, 1):
                        r, c = (2 * (lane % 4) + e, lane // 4) if trans else \
                            (lane // 4, 2 * (lane % 4) + e)
                        idx = list(offset)
                        for d, x in zip(s.dims, tile.layout.map(t, r0 + 2 * q + e)):
                            idx[d] += int(x)
                        assert addr[w * 32 + 8 * q + r] + c == s.whole.layout.offset(*idx), \
                            (line, t, r0 + 2 * q + e)
                        moved[t, r0 + 2 * q + e] += 1
            checked += 1
        assert (moved == 1).all()
    return checked


@pytest.mark.parametrize("kw, values, moves", [
    (dict(load=A), None, 1), (dict(load=A, shared=column_major(64, 16)), None, 1),
    (dict(load=B, shape=(16, 8)), None, 1), (dict(load=C, store=C, shape=(64, 8)), None, 2),
    (dict(load=A2, store=A2, shape=(64, 32), shared=make_swizzled_layout((64, 32), 16)), None,
     4),
    (dict(load=C2, store=C2, shape=(64, 32), shared=make_swizzled_layout((64, 32), 16, 64)), None,
     4),
    (dict(load=A, store=A, staged=16 * 16 + 8), "s", 2),
], ids=["A", "A_trans", "B_trans", "C", "A2_swizzled", "C2_swizzled", "staged"])
def test_printed_lane_addresses_move_every_register_of_every_thread(kw, values, moves):
    program = _program(**kw)
    if values:
        (s,) = {v for x in walk(program.body) if isinstance(x, For) for v in (x.var,)}
        values = {s: 1}
    assert _check_printed_moves(program, H100_SXM, values) == moves


def test_the_vm_runs_the_programs_as_written():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float16)
    y = np.full((64, 32), np.nan, np.float16)
    _program(load=A2, store=C2, shape=(64, 32), shared=make_swizzled_layout((64, 32), 16)).run(
        x, y)
    np.testing.assert_array_equal(y, x * np.float16(2) + np.float16(1))


def _gemm_shared_epilogue(m, n, k, dtype="float16", bm=128, bn=128, bk=32, threads=128):
    """C = A @ B with the epilogue through shared memory: T.copy(C_local, C_s) (a cast and a
    store_shared of the accumulator layout), then T.copy(C_s, C[...])."""

    @T.prim_func
    def gemm_cs(A: T.Tensor((m, k), dtype), B: T.Tensor((k, n), dtype),
                C: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_s = T.alloc_shared((bm, bn), dtype)
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, bk), num_stages=3):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_local)
            T.copy(C_local, C_s)
            T.copy(C_s, C[by * bm, bx * bn])

    return gemm_cs


@tilecraft.jit
def _tilus_scale(M):
    """A Tilus-level kernel: a tile through shared memory, load_shared in the mma A layout,
    arithmetic, store_global."""

    @T.prim_func
    def scale(X: T.Tensor((M, 16), "float16"), Y: T.Tensor((M, 16), "float16")):
        with T.Kernel(M // 64, threads=128) as bi:
            sx = T.allocate_shared("float16", [64, 16])
            T.store_shared(T.load_global(X, layout=ROWS[64, 16], offset=[bi * 64, 0]), sx)
            T.synchronize()
            a = T.load_shared(sx, layout=A)
            T.store_global(a * 2 + 1, Y, offset=[bi * 64, 0])

    return scale


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_programs_compile_with_the_instructions_for_each_arch(arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    printed = print_cuda(_program(load=C2, store=C2, shape=(64, 32),
                                  shared=make_swizzled_layout((64, 32), 16, 64)), arch)
    gemm = generate_cuda(_gemm_shared_epilogue(256, 256, 256), arch)
    tilus = generate_cuda(_tilus_scale(128).func, arch)
    assert "tc::ldmatrix_x4(" in printed.source and "tc::ldmatrix_x4(" in tilus.source
    for source in (printed.source, gemm.source):
        assert ("tc::stmatrix_x4(" in source) == (arch == "sm_90a")
    for src, name in ((printed.source, printed.name), (gemm.source, gemm.name),
                      (tilus.source, tilus.name)):
        res = compile_cuda(src, arch, name=name).resources
        assert res.spill_stores == 0 and res.spill_loads == 0


def test_the_tilus_kernel_and_the_gemm_epilogue_on_the_vm():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(128, 16, generator=g).half()
    y = torch.full_like(x, float("nan"))
    _tilus_scale(128)(x, y)  # CPU tensors: the block VM
    assert torch.equal(y, x * 2 + 1)
    a, b = (torch.randn(*s, generator=g).half() for s in ((128, 64), (64, 128)))
    c = torch.full((128, 128), float("nan"), dtype=torch.float16)
    tilecraft.jit(_gemm_shared_epilogue(128, 128, 64))(a, b, c)
    want = a.float() @ b.float()
    assert ((c.float() - want).norm() / want.norm()).item() < 1e-2


# ---- on the GPU (the lead runs these) ------------------------------------------------------------

GPU_PROGRAMS = {
    "ldmatrix_A": dict(load=A), "ldmatrix_trans_A": dict(load=A, shared=column_major(64, 16)),
    "ldmatrix_trans_B": dict(load=B, shape=(16, 8)),
    "ld_st_C": dict(load=C, store=C, shape=(64, 8)),
    "ld_st_A2_swizzled": dict(load=A2, store=A2, shape=(64, 32),
                              shared=make_swizzled_layout((64, 32), 16)),
    "ld_st_C2_swizzled": dict(load=C2, store=C2, shape=(64, 32),
                              shared=make_swizzled_layout((64, 32), 16, 64)),
    "staged": dict(load=A, store=A, staged=16 * 16 + 8),
    "fallback_rows17": dict(load=A, store=A, shared=strided((64, 16), (17, 1))),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_PROGRAMS))
def test_standalone_matrix_transfers_on_the_gpu_match_the_vm(name):
    from tilecraft.codegen.block_cuda import build_block_kernel

    program = _program(**GPU_PROGRAMS[name])
    shape = tuple(program.params[0].shape)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float16)
    y_vm = np.full(shape, np.nan, np.float16)
    program.run(x, y_vm)
    arch = "sm_90a" if torch.cuda.get_device_capability()[0] >= 9 else "sm_80"
    kernel = build_block_kernel(program, arch)
    assert ("matrix_x" in kernel.source) == (name != "fallback_rows17")
    args = [torch.from_numpy(a).cuda() for a in (x, np.full(shape, np.nan, np.float16))]
    kernel(*args)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(args[1].cpu().numpy(), y_vm)


@pytest.mark.gpu
def test_the_tilus_kernel_on_the_gpu_matches_the_vm():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(256, 16, generator=g).half()
    y_vm = torch.full_like(x, float("nan"))
    kernel = _tilus_scale(256)
    kernel(x, y_vm)
    y = torch.full_like(x, float("nan")).cuda()
    kernel(x.cuda(), y)
    torch.cuda.synchronize()
    assert "tc::ldmatrix_x4(" in kernel.get_kernel_source()
    assert torch.equal(y.cpu(), y_vm)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mnk", [(512, 512, 256), (200, 136, 72)], ids=["full", "partial"])
def test_a_gemm_with_a_shared_epilogue_on_the_gpu_matches_torch(dtype, mnk):
    m, n, k = mnk
    kernel = tilecraft.jit(_gemm_shared_epilogue(m, n, k, dtype))
    tdt = getattr(torch, dtype)
    a = torch.randn(m, k, dtype=tdt, device="cuda")
    b = torch.randn(k, n, dtype=tdt, device="cuda")
    c = torch.full((m, n), float("nan"), dtype=tdt, device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    if torch.cuda.get_device_capability()[0] >= 9:
        assert "tc::stmatrix_x4(" in kernel.get_kernel_source()
    want = a.float() @ b.float()
    assert ((c.float() - want).norm() / want.norm()).item() < 1e-2
