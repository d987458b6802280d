"""Block programs on the GPU: the printer's CUDA compiles (NVRTC, sm_90a) and, on a GPU, gives
what the block VM gives (the VM is the specification): loads/stores through layouts, shared
layouts with swizzles, copy_async, element-wise ops, casts, reductions and dot (their SIMT
forms, staged through shared memory)."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.block import (
    AllocateGlobal,
    AllocateRegister,
    BinaryOp,
    BlockProgram,
    Cast,
    GlobalTensor,
    LoadGlobal,
    ReduceRegister,
    RegisterTensor,
    StoreGlobal,
    UnaryOp,
)
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import spatial

from .programs import here, matmul

ROWS = spatial(16, 8).local(1, 4)  # a [16, 32] tile over 128 threads


def _elementwise_and_reduce() -> BlockProgram:
    """y = cast_f16(max(x * 3 + 1, 0)) and z = row sums of x (float32), on a 32 x 32 tensor
    in two blocks of 16 rows."""
    gx = GlobalTensor.create("x", "float32", (32, 32))
    gy = GlobalTensor.create("y", "float16", (32, 32))
    gz = GlobalTensor.create("z", "float32", (32,))
    x, t = (RegisterTensor.create(n, "float32", ROWS) for n in ("xr", "t"))
    y = RegisterTensor.create("yr", "float16", ROWS)
    z = RegisterTensor.create("zr", "float32", ROWS.reduce(1, keepdim=False))
    prog = BlockProgram.create("ew", (gx, gy, gz), (2,), 128, [])
    (bi,) = prog.block_vars
    body = [AllocateRegister.create(x), AllocateRegister.create(t), AllocateRegister.create(y),
            AllocateRegister.create(z), LoadGlobal.create(gx, x, offset=(bi * 16, 0)),
            BinaryOp.create("*", x, 3.0, t), BinaryOp.create("+", t, 1.0, t),
            BinaryOp.create("max", t, 0.0, t), UnaryOp.create("neg", t, t),
            UnaryOp.create("abs", t, t), Cast.create(t, y),
            StoreGlobal.create(y, gy, offset=(bi * 16, 0)),
            ReduceRegister.create(x, z, dim=1, kind="sum"),
            StoreGlobal.create(z, gz, offset=(bi * 16,))]
    return BlockProgram.create("ew", (gx, gy, gz), (2,), 128, body, block_vars=(bi,))


def _compile(program):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    source, name = print_cuda(program)[:2]
    return compile_cuda(source, "sm_90a", name=name).resources


@pytest.mark.parametrize("shared", [False, True])
def test_the_figure_2_matmul_compiles_without_spills(shared):
    res = _compile(matmul(128, 16, 64, shared=shared))
    assert res.spill_stores == 0 and res.spill_loads == 0


def test_elementwise_and_reduce_compile():
    res = _compile(_elementwise_and_reduce())
    assert res.spill_stores == 0


def test_user_names_never_collide_with_the_printers():
    from tilecraft.layout import column_spatial

    source = print_cuda(matmul(128, 16, 64, shared=True)).source  # tensors `acc`, `tc`
    assert "float acc_[4];" in source and "half tc_[4];" in source
    simt = _tiled_matmul(b_layout=column_spatial(32, 4).local(1, 8))  # a SIMT dot
    assert "float acc = acc_[li];" in print_cuda(simt)[0]  # the printer's own `acc`


def test_an_instruction_the_printer_lacks_is_tc502_at_its_line():
    gx = GlobalTensor.create("x", "float32", (16, 32))
    ws = GlobalTensor.create("ws", "float32", (16, 32))
    line = here() + 1
    body = [AllocateGlobal.create(ws)]
    with pytest.raises(TilecraftError) as e:
        print_cuda(BlockProgram.create("p", (gx,), (1,), 128, body))
    assert e.value.code == "TC502" and e.value.span.line == line


def _gpu_args(arrays):
    import torch

    return [torch.from_numpy(a).cuda() for a in arrays]


@pytest.mark.gpu
@pytest.mark.parametrize("shared", [False, True])
def test_matmul_on_the_gpu_matches_the_vm(shared):
    from tilecraft.codegen.block_cuda import build_block_kernel

    m, n, k = 128, 16, 64
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c_vm = np.full((m, n), np.nan, np.float16)
    prog = matmul(m, n, k, shared=shared)
    prog.run(a, b, c_vm)
    args = _gpu_args([a, b, np.full((m, n), np.nan, np.float16)])
    build_block_kernel(prog)(*args)
    c = args[2].cpu().numpy()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3
    np.testing.assert_allclose(c.astype(np.float32), c_vm.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_elementwise_and_reduce_on_the_gpu_match_the_vm():
    from tilecraft.codegen.block_cuda import build_block_kernel

    prog = _elementwise_and_reduce()
    x = np.random.default_rng(4).standard_normal((32, 32)).astype(np.float32)
    vm = [x, np.full((32, 32), np.nan, np.float16), np.full(32, np.nan, np.float32)]
    prog.run(*vm)
    args = _gpu_args([x, vm[1] * 0, vm[2] * 0])
    build_block_kernel(prog)(*args)
    np.testing.assert_array_equal(args[1].cpu().numpy(), vm[1])  # exact ops: bit for bit
    # float32 sums in another order: within a few ulp of the row's sum of magnitudes
    bound = 1e-6 * np.abs(x.astype(np.float64)).sum(1)
    assert (np.abs(args[2].cpu().numpy() - vm[2]) <= bound).all()


def _tiled_matmul(b_layout=None) -> BlockProgram:
    """C[64 x 32] per block = A[64 x K] @ B[K x 32] with 32-wide k steps: per warp 16 rows, four
    16x8 C blocks and two k16 steps each (an mma plan of 8 steps); `b_layout` replaces B's."""
    from tilecraft.block import Dot
    from tilecraft.ir import Const, For, SeqStmt, Var
    from tilecraft.layout import local, replicate
    from tilecraft.layout.atoms import MMA_M16N8K16_F16 as ATOM

    m, n, k = 128, 64, 96
    ga, gb = (GlobalTensor.create(x, "float16", s) for x, s in (("a", (m, k)), ("b", (k, n))))
    gc = GlobalTensor.create("c", "float32", (m, n))
    acc = RegisterTensor.create("acc", "float32", spatial(4, 1).local(1, 4) * ATOM.c)
    ta = RegisterTensor.create("ta", "float16", spatial(4, 1).local(1, 2) * ATOM.a)
    tb = RegisterTensor.create("tb", "float16", b_layout or replicate(4) * local(2, 4) * ATOM.b)
    prog = BlockProgram.create("mm", (ga, gb, gc), (m // 64, n // 32), 128, [])
    bi, bj = prog.block_vars
    kk = Var.create("kk")
    step = [LoadGlobal.create(ga, ta, offset=(bi * 64, kk * 32)),
            LoadGlobal.create(gb, tb, offset=(kk * 32, bj * 32)), Dot.create(ta, tb, acc, out=acc)]
    body = [AllocateRegister.create(acc, init=0.0), AllocateRegister.create(ta),
            AllocateRegister.create(tb),
            For(kk, Const.create(0), Const.create(k // 32), "serial", SeqStmt.create(step)),
            StoreGlobal.create(acc, gc, offset=(bi * 64, bj * 32))]
    return BlockProgram.create("mm", (ga, gb, gc), prog.grid, 128, body, block_vars=(bi, bj))


def test_dot_is_selected_by_layout_division():
    from tilecraft.block import Dot
    from tilecraft.block.select import select_instructions
    from tilecraft.ir.visitor import walk

    prog = _tiled_matmul()
    (dot,) = [s for s in walk(prog.body) if isinstance(s, Dot)]
    plan = select_instructions(prog)[id(dot)]
    assert plan.steps == ((0, 0, 0), (0, 1, 4), (1, 0, 1), (1, 1, 5), (2, 0, 2), (2, 1, 6),
                          (3, 0, 3), (3, 1, 7))
    assert print_cuda(prog)[0].count("tc::mma_m16n8k16_f16_f32(") == 8


def test_a_dot_no_atom_divides_is_printed_as_simt():
    from tilecraft.layout import column_spatial

    prog = _tiled_matmul(b_layout=column_spatial(32, 4).local(1, 8))  # B: one k row per lane
    assert "tc::mma" not in print_cuda(prog)[0]
    _compile(prog)


@pytest.mark.gpu
@pytest.mark.parametrize("mma", [True, False])
def test_a_tiled_matmul_on_the_gpu_matches_the_vm(mma):
    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.layout import column_spatial

    prog = _tiled_matmul(None if mma else column_spatial(32, 4).local(1, 8))
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 96)).astype(np.float16)
    b = rng.standard_normal((96, 64)).astype(np.float16)
    c_vm = np.full((128, 64), np.nan, np.float32)
    prog.run(a, b, c_vm)
    args = _gpu_args([a, b, np.full((128, 64), np.nan, np.float32)])
    kernel = build_block_kernel(prog)
    assert ("tc::mma" in kernel.source) == mma
    kernel(*args)
    c = args[2].cpu().numpy()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() / np.abs(ref).max() < 1e-5
    np.testing.assert_allclose(c, c_vm, rtol=1e-4, atol=1e-4)


def _copy_program(col_step: int) -> BlockProgram:
    """copy_async of a 16 x 32 f16 tile at column k * col_step, then back out through registers."""
    from tilecraft.block import (
        AllocateShared,
        CopyAsync,
        CopyAsyncCommitGroup,
        CopyAsyncWaitGroup,
        LoadShared,
        SharedTensor,
        Synchronize,
    )
    from tilecraft.ir import Var

    gx = GlobalTensor.create("x", "float16", (16, 64))
    gy = GlobalTensor.create("y", "float16", (16, 32))
    s = SharedTensor.create("s", "float16", (16, 32))
    r = RegisterTensor.create("r", "float16", ROWS)
    k = Var.create("k")
    body = [AllocateShared.create(s), AllocateRegister.create(r),
            CopyAsync.create(s, gx, offset=(0, k * col_step)), CopyAsyncCommitGroup.create(),
            CopyAsyncWaitGroup.create(0), Synchronize.create(), LoadShared.create(s, r),
            StoreGlobal.create(r, gy)]
    return BlockProgram.create("cp", (gx, gy, k), (1,), 128, body)


def test_copy_async_is_cp_async_when_every_16_byte_chunk_is_whole():
    printed = print_cuda(_copy_program(col_step=8))
    assert "tc::cp_async_16(" in printed.source and "tc::cp_async_wait<0>();" in printed.source
    assert printed.align == {"x": 16, "y": 8}  # launch checks (y: stores of 4 halves)
    odd = print_cuda(_copy_program(col_step=4))  # k * 4 halves: chunks may straddle 16 bytes
    assert "tc::cp_async_16(" not in odd.source and odd.align == {"y": 8}


@pytest.mark.gpu
@pytest.mark.parametrize("col_step", [8, 4])
def test_copy_async_on_the_gpu_matches_the_vm(col_step):
    from tilecraft.codegen.block_cuda import build_block_kernel

    prog = _copy_program(col_step)
    x = np.random.default_rng(6).standard_normal((16, 64)).astype(np.float16)
    y_vm = np.full((16, 32), np.nan, np.float16)
    prog.run(x, y_vm, 3)
    args = _gpu_args([x, np.full((16, 32), np.nan, np.float16)])
    build_block_kernel(prog)(*args, 3)
    np.testing.assert_array_equal(args[1].cpu().numpy(), y_vm)


def test_a_row_reduction_uses_shuffles_when_the_layout_allows():
    source = print_cuda(_elementwise_and_reduce()).source  # rows over 8 lanes each
    assert "// sum over dim 1: shuffles [1, 2, 4], across warps []" in source
    assert "stage0" not in source  # not staged through shared memory


def test_loads_and_stores_move_consecutive_registers_as_vectors():
    printed = print_cuda(_elementwise_and_reduce())  # 4 consecutive columns per thread
    assert printed.source.count("// load in vectors of 4") == 1  # x: float32, 16 bytes
    assert printed.source.count("// store in vectors of 4") == 1  # y (f16); z: one per thread
    assert printed.align == {"x": 16, "y": 8}


def test_a_dot_reads_operands_it_alone_uses_from_shared_memory_step_by_step():
    import sys as _sys
    from pathlib import Path as _Path

    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.targets import A100_SXM

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1] / "codegen"))
    from example_configs import CONFIGS, make

    gemm = next(c for c in CONFIGS if c[0] == "gemm_partial")  # on sm_80: a dot (mma.sync)
    source = print_cuda(lowered_program(lower(make(gemm).func, A100_SXM))).source
    assert "operands from shared memory" in source
    assert source.count("inside the dot below") == 4  # two loads, two allocations
    assert "tc::ldmatrix_x4(" in source and "tc::ldmatrix_x4_trans(" in source  # per k step


def test_indices_of_a_tensor_of_2_31_elements_or_more_are_64_bit():
    gx = GlobalTensor.create("x", "float32", (65536, 65536))  # 2^32 elements
    x = RegisterTensor.create("xr", "float32", ROWS)
    prog = BlockProgram.create("big", (gx,), (4096,), 128, [])
    (bi,) = prog.block_vars
    body = [AllocateRegister.create(x), LoadGlobal.create(gx, x, offset=(bi * 16, 0)),
            StoreGlobal.create(x, gx, offset=(bi * 16, 32))]
    source = print_cuda(BlockProgram.create("big", (gx,), (4096,), 128, body,
                                            block_vars=(bi,))).source
    assert "(long long)bi_ * 16" in source and "(long long)(" in source
    small = print_cuda(_elementwise_and_reduce()).source
    assert "long long" not in small


def test_dynamic_dimensions_are_kernel_arguments_bound_from_the_tensors():
    import sys as _sys
    from pathlib import Path as _Path

    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.targets import H100_SXM

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1] / "codegen"))
    from example_configs import CONFIGS, make

    add = next(c for c in CONFIGS if c[0] == "elementwise_add")
    printed = print_cuda(lowered_program(lower(make(add).func, H100_SXM)))
    assert [v.name for v in printed.dims] == ["m"] and "const int m_)" in printed.source


def test_a_scalar_load_of_shared_memory_outside_a_parallel_loop_reads_through_its_layout():
    """(Every thread reads the element; tests/block/test_block_scalar_code.py has the rest.)"""
    from tilecraft.block import AllocateShared, SharedTensor
    from tilecraft.ir import BufferLoad, LetStmt, Var

    gx = GlobalTensor.create("x", "float32", (16, 32))
    s = SharedTensor.create("s", "float32", (16, 32))
    v = Var.create("v", "float32")
    let = LetStmt(v, BufferLoad.create(s.buffer, (1, 2)))
    body = [AllocateShared.create(s), let]
    source = print_cuda(BlockProgram.create("p", (gx,), (1,), 128, body)).source
    offset = source.split("const float v_ = s_[")[1].split("];")[0]
    assert eval(offset) == 34  # row 1, column 2 of the row-major [16, 32] tile
