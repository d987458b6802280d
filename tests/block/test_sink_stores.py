"""sink_stores: a store of loaded registers goes below the asynchronous copies after it (the
prologue's copies no longer wait for the load's data), and nowhere it could change a result."""

import numpy as np
import pytest

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    BlockProgram,
    CopyAsync,
    CopyAsyncBulk,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
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
from tilecraft.block.prepare import prepare
from tilecraft.block.sink_stores import sink_stores
from tilecraft.block.smem_plan import plan_shared
from tilecraft.ir import BufferLoad, Const
from tilecraft.ir.visitor import walk, walk_expr
from tilecraft.layout import spatial

ROWS = spatial(16, 8).local(1, 4)


def _tensors():
    g = GlobalTensor.create("g", "float32", (2, 16, 32))
    out = GlobalTensor.create("out", "float32", (16, 32))
    s = SharedTensor.create("s", "float32", (16, 32))
    x = SharedTensor.create("x", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", ROWS)
    q = RegisterTensor.create("q", "float32", ROWS)
    return g, out, s, x, r, q


def _program(prologue, make_tail=None):
    """out = g[0] + g[1]: g[0] through `s` by registers, g[1] through `x` by a copy;
    `prologue(s, x, r, g)` lists what comes between the allocations and the wait."""
    g, out, s, x, r, q = _tensors()
    tail = [CopyAsyncWaitGroup.create(0), LoadShared.create(s, r), LoadShared.create(x, q),
            BinaryOp.create("+", r, q, r), StoreGlobal.create(r, out)]
    body = [AllocateShared.create(s), AllocateShared.create(x), AllocateRegister.create(r),
            AllocateRegister.create(q), *prologue(s, x, r, g), *tail]
    return BlockProgram.create("p", (g, out), (1,), 128, body)


def _order(program) -> list[str]:
    names = {"LoadGlobal": "load", "StoreShared": "store", "CopyAsync": "copy",
             "CopyAsyncBulk": "copy", "CopyAsyncCommitGroup": "commit", "Synchronize": "sync",
             "CopyAsyncWaitGroup": "wait", "MbarrierInit": "init"}
    return [names[type(s).__name__] for s in program.body.stmts if type(s).__name__ in names]


def _run(program) -> np.ndarray:
    data = np.random.default_rng(0).standard_normal((2, 16, 32)).astype(np.float32)
    out = np.zeros((16, 32), np.float32)
    program.run(data, out)
    return out, data[0] + data[1]


def _barrier_after_the_store(sunk) -> None:
    """On the GPU a barrier orders the moved store before the other threads' reads."""
    placed = insert_barriers(sunk, plan_shared(sunk.body))
    kinds = [type(s).__name__ for s in placed.body.stmts]
    assert "Synchronize" in kinds[kinds.index("StoreShared"):kinds.index("LoadShared")]


def test_a_loaded_store_goes_below_the_copies_after_it_and_the_results_stay():
    p = _program(lambda s, x, r, g: [
        LoadGlobal.create(g, r, offset=(0, 0, 0)), StoreShared.create(r, s),
        CopyAsync.create(x, g, offset=(1, 0, 0)), CopyAsyncCommitGroup.create()])
    sunk = sink_stores(p)
    assert _order(sunk) == ["load", "copy", "store", "commit", "wait"]
    for program in (p, sunk):
        got, want = _run(program)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    _barrier_after_the_store(sunk)


def test_two_loads_go_out_before_either_store_waits():
    g, out, s, x, r, q = _tensors()
    z = SharedTensor.create("z", "float32", (16, 32))
    t = RegisterTensor.create("t", "float32", ROWS)
    body = [AllocateShared.create(s), AllocateShared.create(x), AllocateShared.create(z),
            AllocateRegister.create(r), AllocateRegister.create(q), AllocateRegister.create(t),
            LoadGlobal.create(g, r, offset=(0, 0, 0)), StoreShared.create(r, s),
            LoadGlobal.create(g, t, offset=(1, 0, 0)), StoreShared.create(t, z),
            CopyAsync.create(x, g, offset=(1, 0, 0)), CopyAsyncCommitGroup.create(),
            CopyAsyncWaitGroup.create(0), LoadShared.create(s, r), LoadShared.create(z, q),
            BinaryOp.create("+", r, q, r), StoreGlobal.create(r, out)]
    p = BlockProgram.create("p", (g, out), (1,), 128, body)
    sunk = sink_stores(p)
    assert _order(sunk) == ["load", "load", "copy", "store", "store", "commit", "wait"]
    got, want = _run(sunk)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_with_tma_the_store_passes_the_mbarrier_setup_and_its_barrier():
    g, out, s, x, r, q = _tensors()
    bars = SharedTensor.create("bars", "uint64", (1,))
    body = [AllocateShared.create(s), AllocateShared.create(x), AllocateShared.create(bars),
            AllocateRegister.create(r), AllocateRegister.create(q),
            LoadGlobal.create(g, r, offset=(0, 0, 0)), StoreShared.create(r, s),
            MbarrierInit.create(bars, 1), Synchronize.create(),
            MbarrierExpect.create(bars, 0, 16 * 32 * 4),
            CopyAsyncBulk.create(x, g, (1, 0, 0), bars, 0),
            MbarrierWait.create(bars, 0, 0), LoadShared.create(s, r), LoadShared.create(x, q),
            BinaryOp.create("+", r, q, r), StoreGlobal.create(r, out)]
    p = BlockProgram.create("p", (g, out), (1,), 128, body)
    sunk = sink_stores(p)
    assert _order(sunk) == ["load", "init", "sync", "copy", "store"]
    got, want = _run(sunk)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    _barrier_after_the_store(sunk)


def test_what_a_store_may_not_pass():
    def stays(prologue):
        p = _program(prologue)
        assert sink_stores(p) is p

    # no copy after it
    stays(lambda s, x, r, g: [LoadGlobal.create(g, r, offset=(0, 0, 0)),
                              StoreShared.create(r, s), LoadGlobal.create(g, r, (1, 0, 0)),
                              StoreShared.create(r, x)])
    # a copy into its own tensor, through a slice of it
    def into_itself(s, x, r, g):
        big = SharedTensor.create("big", "float32", (2, 16, 32))
        part = SharedSlice.create(big, [1], "part")
        return [AllocateShared.create(big), part,
                LoadGlobal.create(g, r, offset=(0, 0, 0)), StoreShared.create(r, part.out),
                SharedSlice.create(big, [1], "again"),
                CopyAsync.create(x, g, offset=(1, 0, 0)), CopyAsyncCommitGroup.create()]
    p = _program(into_itself)
    sunk = sink_stores(p)
    assert sunk is p  # the second slice names the store's bytes: the store stops before it
    # its registers rewritten before the copy
    stays(lambda s, x, r, g: [LoadGlobal.create(g, r, offset=(0, 0, 0)),
                              StoreShared.create(r, s), LoadGlobal.create(g, r, (1, 0, 0)),
                              CopyAsync.create(x, g, offset=(1, 0, 0)),
                              CopyAsyncCommitGroup.create()])
    # a wait in between
    stays(lambda s, x, r, g: [LoadGlobal.create(g, r, offset=(0, 0, 0)),
                              StoreShared.create(r, s), CopyAsyncWaitGroup.create(0),
                              CopyAsync.create(x, g, offset=(1, 0, 0)),
                              CopyAsyncCommitGroup.create()])
    # registers that were computed, not loaded
    stays(lambda s, x, r, g: [LoadGlobal.create(g, r, offset=(0, 0, 0)),
                              BinaryOp.create("+", r, r, r), StoreShared.create(r, s),
                              CopyAsync.create(x, g, offset=(1, 0, 0)),
                              CopyAsyncCommitGroup.create()])


def test_the_prepared_program_of_a_tilus_kernel_is_sunk_and_still_correct():
    p = _program(lambda s, x, r, g: [
        LoadGlobal.create(g, r, offset=(0, 0, 0)), StoreShared.create(r, s),
        CopyAsync.create(x, g, offset=(1, 0, 0)), CopyAsyncCommitGroup.create()])
    prepared = prepare(p, None).program
    kinds = [type(s).__name__ for s in prepared.body.stmts]
    assert kinds.index("CopyAsync") < kinds.index("StoreShared")
    got, want = _run(prepared)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_decode_kernel_requests_its_first_tiles_before_storing_its_scales():
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.options import CompileOptions
    from tilecraft.quant.qmm import choose_config
    from tilecraft.quant.qmm_kernel import qmm_kernel

    def first(body, kinds):
        names = [type(s).__name__ for s in body.stmts]
        return min(names.index(k) for k in kinds if k in names)

    for wtype, n in (("uint4", 1024), ("int4", 28672)):  # cp.async, then TMA
        cfg = choose_config(16, n, 8192, 4, 128, wtype)
        func = qmm_kernel(16, n, 8192, wtype, "float16", 128, 0, True, False, **cfg).func
        for sink in (True, False):
            opts = CompileOptions.for_arch("sm_90a", sink_stores=sink)
            body = generate_cuda(func, options=opts).state.prepared.program.body
            while not hasattr(body, "stmts"):  # (the lets around the kernel's body)
                body = body.body
            copy = first(body, ("CopyAsync", "CopyAsyncBulk"))
            assert (copy < first(body, ("StoreShared",))) == sink, (wtype, sink)


def test_a_store_whose_tensor_a_copys_offset_reads_stays_above_the_copy():
    g, out, s, x, r, q = _tensors()
    idx = GlobalTensor.create("idx", "int32", (16, 32))
    idx_s = SharedTensor.create("idx_s", "int32", (16, 32))
    ri = RegisterTensor.create("ri", "int32", ROWS)
    body = [AllocateShared.create(idx_s), AllocateShared.create(x), AllocateRegister.create(ri),
            AllocateRegister.create(q), LoadGlobal.create(idx, ri), StoreShared.create(ri, idx_s),
            CopyAsync.create(x, g, offset=(BufferLoad(idx_s.buffer, (Const.create(0),) * 2), 0,
                                           0)),
            CopyAsyncCommitGroup.create(), CopyAsyncWaitGroup.create(0), LoadShared.create(x, q),
            StoreGlobal.create(q, out)]
    p = BlockProgram.create("p", (idx, g, out), (1,), 128, body)
    assert sink_stores(p) is p


def _indexed_rows():
    """A row index staged in shared memory, read by the pipelined copies' offsets (a shared
    tensor that no instruction reads as a tile)."""
    import tilecraft.language as T

    @T.prim_func
    def rows(Idx: T.Tensor((128,), "int32"), A: T.Tensor((1024, 256), "float16"),
             Y: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            idx_s = T.alloc_shared((128,), "int32")
            A_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 32), "float32")
            f = T.alloc_fragment((64, 32), "float32")
            T.copy(Idx[0], idx_s)
            T.clear(acc)
            for ko in T.Pipelined(8, num_stages=2):
                T.copy(A[idx_s[0], ko * 32], A_s)
                T.copy(A_s, f)
                for i, j in T.Parallel(64, 32):
                    acc[i, j] += f[i, j]
            T.copy(acc, Y[0, 0])

    rng = np.random.default_rng(0)
    idx = np.zeros(128, np.int32)
    idx[0] = 512
    a = rng.standard_normal((1024, 256)).astype(np.float16)
    want = sum(a[512:576, k * 32:(k + 1) * 32].astype(np.float32) for k in range(8))
    return rows, [idx, a, np.zeros((64, 32), np.float32)], want


@pytest.mark.parametrize("async_copies", [True, False])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_tensor_read_only_by_copy_offsets_keeps_its_bytes_and_its_barrier(arch, async_copies):
    """The arena and the barriers count the shared loads in an instruction's offsets: the index
    kept its own bytes (it had shared them with the stages, or with the mbarriers that
    mbarrier_init writes) and a barrier orders its store (or the wait that lands its copy)
    before the first copy reads it."""
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.options import CompileOptions

    func, args, want = _indexed_rows()
    opts = CompileOptions.for_arch(arch, async_copies=async_copies)
    state = generate_cuda(func, options=opts).state
    arena = state.prepared.arena
    idx_s = next(b for b in arena.offsets if b.name == "idx_s")
    others = [b for b in arena.offsets if b is not idx_s]
    assert all(arena.offsets[b] != arena.offsets[idx_s] for b in others)
    body = list(walk(state.prepared.program.body))
    kinds = [type(s).__name__ for s in body]
    into = next(i for i, s in enumerate(body) if isinstance(s, (StoreShared, CopyAsync))
                and s.dst.buffer is idx_s)
    store = into if kinds[into] == "StoreShared" else kinds.index("CopyAsyncWaitGroup", into)
    copy = min(i for i, s in enumerate(body) if isinstance(s, (CopyAsync, CopyAsyncBulk))
               and any(isinstance(x, BufferLoad) for e in s.offset for x in walk_expr(e)))
    assert "Synchronize" in kinds[store:copy]
    state.prepared.program.run(*args)
    np.testing.assert_allclose(args[2], want, rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
def test_a_tensor_read_only_by_copy_offsets_on_the_gpu():
    import torch

    import tilecraft

    func, args, want = _indexed_rows()
    kernel = tilecraft.compile(func, target="cuda")
    dev = [torch.from_numpy(a).cuda() for a in args]
    for _ in range(3):
        dev[2].fill_(float("nan"))
        kernel(*dev)
        torch.cuda.synchronize()
        np.testing.assert_allclose(dev[2].cpu().numpy(), want, rtol=1e-5, atol=1e-3)
