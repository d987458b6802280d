"""A global -> shared T.copy outside a multi-stage pipeline is an asynchronous copy when its tile
depends on the block or is a large weight (passes/lowering/context.py `lands_async`), and copies
issued one after another share one wait (block/merge_waits.py); the block VM's results do not
change, nor the copies the switch `async_copies` turns off or a pipelined kernel keeps."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
)
from tilecraft.block.merge_waits import merge_waits
from tilecraft.block.program import BlockProgram
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.ir import BufferLoad, Const
from tilecraft.ir.visitor import walk
from tilecraft.layout import spatial
from tilecraft.options import CompileOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from flash_attention import flash_attention  # noqa: E402
from layernorm import layernorm  # noqa: E402


def _kinds(func, **switches) -> list[str]:
    state = generate_cuda(func, options=CompileOptions.for_arch("sm_90a", **switches)).state
    return [type(s).__name__ for s in walk(state.block_program.body)]


def test_wide_rows_and_their_large_weights_copy_asynchronously_with_one_wait():
    kinds = _kinds(layernorm(4096, 16384).func)
    assert kinds.count("CopyAsync") == 3 and "LoadGlobal" not in kinds  # X, weight, bias
    assert kinds.count("CopyAsyncWaitGroup") == 1


def test_small_weights_stay_loads_the_rows_copy_asynchronously():
    kinds = _kinds(layernorm(16384, 4096).func)  # 8 KB weight and bias: L1 keeps them
    assert kinds.count("CopyAsync") == 1 and kinds.count("LoadGlobal") == 2


def test_the_switch_keeps_copies_in_registers():
    kinds = _kinds(layernorm(4096, 16384).func, async_copies=False)
    assert "CopyAsync" not in kinds and kinds.count("LoadGlobal") == 3


def test_a_pipelined_kernel_keeps_its_other_copies_in_registers():
    func = flash_attention(1, 2, 256, 64, False, block_M=128, block_N=64).func
    state = generate_cuda(func, "sm_80").state
    q = [s for s in walk(state.block_program.body)
         if isinstance(s, (LoadGlobal, CopyAsync)) and s.src.buffer.name == "Q"]
    assert q and all(isinstance(s, LoadGlobal) for s in q)  # (its wait would hold back K, V)


@pytest.mark.parametrize("async_copies", [True, False])
def test_the_vm_computes_the_same_either_way(async_copies):
    import torch

    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program

    func = layernorm(30, 96).func
    program = lowered_program(lower(func, CompileOptions.for_arch(
        "sm_90a", async_copies=async_copies)))
    g = torch.Generator().manual_seed(1)
    x, w, b = (torch.randn(*s, generator=g).half() for s in ((30, 96), (96,), (96,)))
    y = np.zeros((30, 96), np.float16)
    program.run(x.numpy(), w.numpy(), b.numpy(), y)
    want = torch.nn.functional.layer_norm(x.double(), (96,), w.double(), b.double(), 1e-5)
    np.testing.assert_allclose(y.astype(np.float64), want.numpy(), rtol=2e-2, atol=2e-2)


# ---- merge_waits --------------------------------------------------------------------------
def _program(between):
    """Two copies into shared tiles, each committed and waited for, `between(a_s, b_s, r)`
    after the first wait; then b_s is loaded and stored."""
    a = GlobalTensor.create("a", "float32", (16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    a_s = SharedTensor.create("a_s", "float32", (16, 32))
    b_s = SharedTensor.create("b_s", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", spatial(16, 8).local(1, 4))
    body = [AllocateShared.create(a_s), AllocateShared.create(b_s), AllocateRegister.create(r),
            CopyAsync.create(a_s, a), CopyAsyncCommitGroup.create(),
            CopyAsyncWaitGroup.create(0), *between(a_s, b_s, a, r),
            CopyAsyncCommitGroup.create(), CopyAsyncWaitGroup.create(0),
            LoadShared.create(b_s, r), StoreGlobal.create(r, out)]
    return BlockProgram.create("p", (a, out), (1,), 128, body)


def _waits(program) -> int:
    return sum(isinstance(s, CopyAsyncWaitGroup) for s in walk(program.body))


def test_copies_issued_one_after_another_share_one_wait():
    p = _program(lambda a_s, b_s, a, r: [CopyAsync.create(b_s, a)])
    merged = merge_waits(p)
    assert _waits(p) == 2 and _waits(merged) == 1
    data = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    for program in (p, merged):
        out = np.zeros((16, 32), np.float32)
        program.run(data, out)
        np.testing.assert_array_equal(out, data)


def test_a_wait_stays_before_a_read_a_rewrite_or_an_expression_that_reads_memory():
    reads = _program(lambda a_s, b_s, a, r: [LoadShared.create(a_s, r),
                                            CopyAsync.create(b_s, a)])
    again = _program(lambda a_s, b_s, a, r: [CopyAsync.create(a_s, a)])  # (landing order)
    index = BufferLoad(SharedTensor.create("i_s", "int32", (1,)).buffer, (Const.create(0),))
    offset = _program(lambda a_s, b_s, a, r: [CopyAsync.create(b_s, a, offset=(index, 0))])
    init = _program(lambda a_s, b_s, a, r: [  # (an allocation whose initial value reads a_s)
        AllocateRegister.create(RegisterTensor.create("q", "float32", r.layout), init=BufferLoad(
            a_s.buffer, (Const.create(0),) * 2)), CopyAsync.create(b_s, a)])
    for p in (reads, again, offset, init):
        assert _waits(merge_waits(p)) == 2


# ---- forward_copies -------------------------------------------------------------------------
def test_a_wide_rows_tiles_read_back_in_place_come_straight_to_registers():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from rmsnorm_silu import rmsnorm_silu

    gen = generate_cuda(rmsnorm_silu(4096, 16384, BLOCK_M=1, BLOCK_C=16384, threads=1024).func,
                        "sm_90a")  # (16 values a thread; the example's default takes 256 threads)
    kinds = [type(s).__name__ for s in walk(gen.state.block_program.body)]
    assert "CopyAsync" not in kinds and "LoadShared" not in kinds
    assert kinds.count("LoadGlobal") == 2 and kinds.count("View") == 3  # X twice, gamma once
    assert gen.launch.smem <= 4096  # (the reduction's partials alone)
    narrow = generate_cuda(rmsnorm_silu(16384, 4096).func, "sm_90a").state.block_program
    assert any(isinstance(s, LoadShared) for s in walk(narrow.body))  # 16 KB: left in shared


def _forwardable(loads=(0, 0), reread=False):
    """a's first rows -> a_s by copy_async, loaded back twice (the first at `loads`: not all of
    a_s unless zero); `reread`: a scalar read of a_s too."""
    from tilecraft.block import View  # noqa: F401 (the rewrite's instruction)
    from tilecraft.ir import BufferStore

    a = GlobalTensor.create("a", "float16", (64, 1024))
    out = GlobalTensor.create("out", "float16", (64, 1024))
    a_s = SharedTensor.create("a_s", "float16", (32, 1024))  # 64 KB, 16 registers a thread
    lay = spatial(32, 32).local(1, 32)
    r1, r2 = (RegisterTensor.create(n, "float16", lay) for n in ("r1", "r2"))
    body = [AllocateShared.create(a_s), CopyAsync.create(a_s, a), CopyAsyncCommitGroup.create(),
            CopyAsyncWaitGroup.create(0), AllocateRegister.create(r1),
            LoadShared.create(a_s, r1, offset=loads), AllocateRegister.create(r2),
            LoadShared.create(a_s, r2), StoreGlobal.create(r2, out)]
    if reread:
        body.append(BufferStore(out.buffer, (Const.create(0),) * 2,
                                BufferLoad(a_s.buffer, (Const.create(0),) * 2)))
    return BlockProgram.create("p", (a, out), (1,), 1024, body)


def test_forward_copies_keeps_the_results_and_refuses_partial_or_other_reads():
    from tilecraft.block.forward_copies import forward_copies

    p = _forwardable()
    done = forward_copies(p)
    kinds = [type(s).__name__ for s in walk(done.body)]
    assert kinds.count("View") == 2 and "CopyAsync" not in kinds and "AllocateShared" not in kinds
    data = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float16)
    for program in (p, done):
        out = np.zeros((64, 1024), np.float16)
        program.run(data, out)
        np.testing.assert_array_equal(out[:32], data[:32])
    for other in (_forwardable(loads=(32, 0)), _forwardable(reread=True)):
        assert any(isinstance(s, CopyAsync) for s in walk(forward_copies(other).body))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, threads", [("rmsnorm_silu", 1024), ("rmsnorm_silu", None),
                                             ("layernorm", None), ("softmax", None)])
def test_wide_rows_on_the_gpu(kernel, threads):
    """16384-wide rows: forwarded (RMSNorm on 1024 threads), asynchronous with their weights
    (RMSNorm on 256 threads, layernorm), asynchronous (softmax), against float64 torch."""
    import importlib

    import torch
    import torch.nn.functional as F

    M, N = 64, 16384
    x = torch.randn(M, N, device="cuda").half()
    w = (1 + 0.1 * torch.randn(N, device="cuda")).half()
    b = (0.1 * torch.randn(N, device="cuda")).half()
    xd = x.double()
    tile = {} if threads is None else {"BLOCK_M": 1, "BLOCK_C": N, "threads": threads}
    fn = getattr(importlib.import_module(kernel), kernel)(M, N, **tile)
    if kernel == "rmsnorm_silu":
        got = fn(x, w)
        want = F.silu(xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-5) * w.double())
    elif kernel == "layernorm":
        got = fn(x, w, b)
        want = F.layer_norm(xd, (N,), w.double(), b.double(), 1e-5)
    else:
        got, want = fn(x), torch.softmax(xd, -1)
    err = ((got.double() - want).norm() / want.norm()).item()
    assert err < 1e-3, err
