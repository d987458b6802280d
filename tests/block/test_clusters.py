"""Thread-block clusters (docs/language.md, "Clusters"): `T.Kernel(..., cluster_dims=...)`,
`T.cluster_rank()`, `T.cluster_sync()` and `T.remote(buf, rank)[idx]`. A cluster's split sum
runs on the interpreter, on the VM bit for bit as on the interpreter (its shared buffers in the
arena too), prints `__cluster_dims__` and `tc::ld_remote`, compiles for sm_90a and on a GPU
gives the interpreter's bits. Reads the program does not order after their writes, reads of a
block that has ended and the forms tilecraft does not take are located errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import interp
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

from .refusals import refused


@tilecraft.jit
def cluster_sum(N, S, BN=64, first_sync=True, last_sync=True):
    """Y = 2 * sum over the S rows of X: the S blocks of column tile bn form a cluster; each
    doubles its row into shared memory, then adds its 1/S of the tile from every block's."""

    @T.prim_func
    def k(X: T.Tensor((S, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // BN, S, threads=64, cluster_dims=(1, S)) as (bn, bs):
            part = T.alloc_shared((BN,), "float32")
            for i in T.Parallel(BN):
                part[i] = X[bs, bn * BN + i] * 2.0
            if first_sync:
                T.cluster_sync()
            R = BN // S
            acc = T.alloc_fragment((R,), "float32")
            T.clear(acc)
            for p in T.serial(S):
                for i in T.Parallel(R):
                    acc[i] += T.remote(part, p)[T.cluster_rank() * R + i]
            for i in T.Parallel(R):
                Y[bn * BN + T.cluster_rank() * R + i] = acc[i]
            if last_sync:
                T.cluster_sync()

    return k


@tilecraft.jit
def ranks(GX, GY, CX, CY):
    """R[by, bx] = the block's cluster rank; Q[by, bx] = block (rank + 1) % size's bx * 100 +
    by, read through T.remote from the neighbour's shared memory."""

    @T.prim_func
    def k(R: T.Tensor((GY, GX), "int32"), Q: T.Tensor((GY, GX), "int32")):
        with T.Kernel(GX, GY, threads=32, cluster_dims=(CX, CY)) as (bx, by):
            me = T.alloc_shared((1,), "int32")
            me[0] = bx * 100 + by
            T.cluster_sync()
            R[by, bx] = T.cluster_rank()
            Q[by, bx] = T.remote(me, (T.cluster_rank() + 1) % T.cluster_size())[0]
            T.cluster_sync()

    return k


def _args(N, S, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((S, N)).astype(np.float32), np.zeros(N, np.float32)]


def test_a_clusters_split_sum_on_the_interpreter():
    x, y = _args(512, 4)
    interp.run(cluster_sum(512, 4).func, [x, y])
    want = np.zeros(512, np.float32)
    for p in range(4):  # (in slice order, as the kernel adds)
        want += x[p] * np.float32(2.0)
    np.testing.assert_array_equal(y, want)


def test_ranks_are_x_fastest_within_each_cluster():
    r, q = np.zeros((4, 6), np.int32), np.zeros((4, 6), np.int32)
    interp.run(ranks(6, 4, 3, 2).func, [r, q])
    by, bx = np.mgrid[0:4, 0:6]
    rank = bx % 3 + 3 * (by % 2)
    np.testing.assert_array_equal(r, rank)
    nxt = (rank + 1) % 6  # the neighbour's (bx, by): same cluster origin, rank nxt
    np.testing.assert_array_equal(q, (bx - bx % 3 + nxt % 3) * 100 + (by - by % 2 + nxt // 3))


@pytest.mark.parametrize("arena", [False, True], ids=["tensors", "arena"])
@pytest.mark.parametrize("case", ["sum", "ranks"])
def test_the_vm_runs_the_lowered_program_as_the_interpreter(case, arena):
    from tilecraft.block.vm import run

    if case == "sum":
        func, args = cluster_sum(512, 4).func, _args(512, 4, seed=3)
    else:
        func, args = ranks(6, 4, 3, 2).func, [np.zeros((4, 6), np.int32)] * 2
    want, got = [a.copy() for a in args], [a.copy() for a in args]
    interp.run(func, want)
    program = lowered_program(lower(func, H100_SXM))
    assert program.cluster is not None
    run(program, got, arena=arena)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_a_read_before_the_writers_barrier_is_tc411():
    x, y = _args(512, 4)
    with pytest.raises(TilecraftError) as info:
        interp.run(cluster_sum(512, 4, first_sync=False).func, [x, y])
    assert info.value.code == "TC411" and "before that block allocated it" in info.value.message


def test_a_read_of_a_block_that_has_ended_is_tc411():
    x, y = _args(512, 4)
    with pytest.raises(TilecraftError) as info:
        interp.run(cluster_sum(512, 4, last_sync=False).func, [x, y])
    assert info.value.code == "TC411" and "which has ended" in info.value.message
    assert "T.cluster_sync() after the last" in info.value.hint


def _source(func, arch="sm_90a") -> str:
    return print_cuda(lowered_program(lower(func, H100_SXM)), arch).source


def test_the_source_declares_the_cluster_and_maps_remote_reads():
    src = _source(cluster_sum(512, 4).func)
    assert "__cluster_dims__(1, 4, 1) __launch_bounds__(64, 1)" in src
    assert src.count("tc::cluster_sync();") == 2
    assert "tc::ld_remote(part_[" in src
    assert "__syncthreads" not in src  # (the cluster's barrier orders the block too)
    assert "gridDim" not in src  # (clustered blocks are never launched in reverse)


def test_clusters_compile_for_sm90a():
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    for func in (cluster_sum(1024, 8).func, ranks(6, 4, 3, 2).func):
        printed = print_cuda(lowered_program(lower(func, H100_SXM)), "sm_90a")
        assert compile_cuda(printed.source, "sm_90a", name=printed.name) \
            .resources.spill_stores == 0


def test_clusters_on_sm80_are_tc502():
    with pytest.raises(TilecraftError) as info:
        _source(cluster_sum(512, 4).func, "sm_80")
    assert info.value.code == "TC502" and "sm_90" in info.value.hint and "sm_80" in str(info.value)


# ---- refused forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("dims, grid, what", [((3, 1), (8, 1), "no compile-time multiple"),
                                              ((4, 4), (8, 8), "16 blocks"),
                                              ((1, 1, 2), (8, 2), "2-D grid")])
def test_clusters_that_do_not_tile_the_grid_are_tc108(dims, grid, what):
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(*grid, threads=32, cluster_dims=dims) as (bx, by):  # ERR
                A[bx] = 1.0

    assert what in refused(factory, "TC108").message


def test_cluster_calls_without_clusters_are_tc108():
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "int32")):
            with T.Kernel(8, threads=32) as bx:
                A[bx] = T.cluster_rank()  # ERR

    assert "cluster_dims" in refused(factory, "TC108").hint


def test_remote_of_a_fragment_and_a_store_to_remote_arerefused():
    def fragment():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(8, threads=32, cluster_dims=2) as bx:
                f = T.alloc_fragment((32,), "float32")
                T.clear(f)
                A[bx] = T.remote(f, 0)[0]  # ERR

    def store():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(8, threads=32, cluster_dims=2) as bx:
                s = T.alloc_shared((32,), "float32")
                T.remote(s, 1)[0] = A[bx]  # ERR

    assert "shared buffer" in refused(fragment, "TC108").hint
    refused(store, "TC103")


def test_cluster_sync_inside_parallel_is_tc108():
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(8, threads=32, cluster_dims=2) as bx:
                for i in T.Parallel(32):
                    A[i] = 1.0
                    T.cluster_sync()  # ERR

    refused(factory, "TC108")


def test_cluster_sync_on_some_threads_is_tc502():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32, cluster_dims=2) as bx:
            tx = T.get_thread_binding()
            if tx < 16:
                T.cluster_sync()  # ERR
            A[bx] = 1.0

    refused(lambda: _source(k), "TC502")


def test_cluster_sync_inside_t_pipelined_is_tc502():
    @T.prim_func
    def k(A: T.Tensor((8, 256), "float32"), B: T.Tensor((8, 32), "float32")):
        with T.Kernel(8, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((32,), "float32")
            for j in T.Pipelined(8, num_stages=2):
                T.copy(A[bx, j * 32], s)
                T.cluster_sync()  # ERR
                T.copy(s, B[bx, 0])

    refused(lambda: _source(k), "TC502")


def test_a_swizzled_block_order_with_clusters_is_tc502():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(8, 8, threads=32, cluster_dims=(2, 1)) as (bx, by):
            T.use_swizzle(4)  # ERR
            A[by, bx] = 1.0

    refused(lambda: _source(k), "TC502")


# ---- on the GPU -------------------------------------------------------------------------------
def _gpu_gives_the_interpreters_bits(func, args, calls=1, poison=None):
    """`func` on the GPU `calls` times (output `poison` filled with NaN before each) leaves
    every tensor as the interpreter leaves it."""
    import torch

    want = [a.copy() for a in args]
    interp.run(func, want)
    kernel = tilecraft.compile(func, target="cuda")
    dev = [torch.from_numpy(a.copy()).cuda() for a in args]
    for _ in range(calls):
        if poison is not None:
            dev[poison].fill_(float("nan"))
        kernel(*dev)
        torch.cuda.synchronize()
        for a, b in zip(want, dev):
            np.testing.assert_array_equal(b.cpu().numpy(), a)


@pytest.mark.gpu
@pytest.mark.parametrize("S", [2, 4, 8])
def test_split_sums_on_the_gpu_are_the_interpreters_bits(S):
    N = 64 * 256
    _gpu_gives_the_interpreters_bits(cluster_sum(N, S).func, _args(N, S, seed=7), calls=5,
                                     poison=1)


@pytest.mark.gpu
def test_ranks_and_neighbours_on_the_gpu_match_the_interpreter():
    _gpu_gives_the_interpreters_bits(ranks(12, 8, 3, 2).func,
                                     [np.full((8, 12), -1, np.int32) for _ in range(2)])


def test_a_remote_read_shaped_like_the_loop_stays_a_shared_access():
    """A shared tile read at the loop's own indices is loaded into registers before the loop
    (passes/lowering/parallel.py); a T.remote read of it must stay an address in shared
    memory (mapa maps shared addresses only): the examples' split RMSNorm reads so."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from rmsnorm_silu import rmsnorm_silu

    src = _source(rmsnorm_silu(256, 4096, split=2).func)
    assert "tc::ld_remote(mine_[" in src


def _example(name):
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    return importlib.import_module(name)


def _norm_case(name, M, N, split, device):
    import torch

    mod = _example(name)
    g = torch.Generator().manual_seed(11)
    x = (3 * torch.randn(M, N, generator=g)).half().to(device)
    w = (1 + 0.1 * torch.randn(N, generator=g)).half().to(device)
    b = (0.1 * torch.randn(N, generator=g)).half().to(device)
    args = {"softmax": [x], "rmsnorm_silu": [x, w], "layernorm": [x, w, b]}[name]
    y = getattr(mod, name)(M, N, split=split)(*args)
    ref = mod.reference(*args).double()
    return ((y.double().cpu() - ref.cpu()).norm() / ref.norm()).item()


@pytest.mark.parametrize("name", ["softmax", "rmsnorm_silu", "layernorm"])
def test_the_examples_rows_split_over_a_cluster_on_the_interpreter(name):
    assert _norm_case(name, 5, 1024, 2, "cpu") < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm_silu", "layernorm"])
def test_the_examples_rows_split_over_a_cluster_on_the_gpu(name, split):
    assert _norm_case(name, 300, 8192, split, "cuda") < 1e-3


# ---- what a review found (session 20) -------------------------------------------------------
@tilecraft.jit
def own_index():
    """Y[b] = the peer's s at the index this block's s[0] holds."""

    @T.prim_func
    def k(A: T.Tensor((2, 8), "int32"), Y: T.Tensor((2,), "int32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((8,), "int32")
            for i in T.Parallel(8):
                s[i] = A[bx, i]
            T.cluster_sync()
            Y[bx] = T.remote(s, 1 - T.cluster_rank())[s[0]]
            T.cluster_sync()

    return k


@tilecraft.jit
def masked_ranks():
    """Elements 0 and 1 read block i's s[0]; the others (rank i outside the cluster) none."""

    @T.prim_func
    def k(Y: T.Tensor((2, 8), "float32"), Z: T.Tensor((2, 8), "float32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((1,), "float32")
            s[0] = T.cast(bx, "float32") + 5.0
            T.cluster_sync()
            for i in T.Parallel(8):
                if i < 2:
                    Y[bx, i] = T.remote(s, i)[0]
                Z[bx, i] = T.if_then_else(i < 2, T.remote(s, i)[0], 0.0)
            T.cluster_sync()

    return k


def _run_both(func, args):
    from tilecraft.block.vm import run

    want = [a.copy() for a in args]
    interp.run(func, want)
    for arena in (False, True):
        got = [a.copy() for a in args]
        run(lowered_program(lower(func, H100_SXM)), got, arena=arena)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)
    return want


def test_remote_indices_are_the_readers_values():
    A = np.array([[3, 10, 11, 12, 13, 14, 15, 16], [5, 20, 21, 22, 23, 24, 25, 26]], np.int32)
    _, y = _run_both(own_index().func, [A, np.zeros(2, np.int32)])
    np.testing.assert_array_equal(y, [A[1, A[0, 0]], A[0, A[1, 0]]])
    assert "tc::ld_remote(s_[s_[0]]" in _source(own_index().func)


def test_ranks_an_if_masks_off_read_nothing():
    y, z = _run_both(masked_ranks().func, [np.zeros((2, 8), np.float32)] * 2)
    for out in (y, z):
        np.testing.assert_array_equal(out[:, :2], [[5, 6], [5, 6]])
        np.testing.assert_array_equal(out[:, 2:], 0)


@pytest.mark.parametrize("case", ["read_before_write_barrier", "write_after_read"])
def test_reads_that_race_a_write_are_tc411(case):
    @T.prim_func
    def raw(A: T.Tensor((2, 32), "float32"), Y: T.Tensor((2, 32), "float32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                s[i] = A[bx, i]
            for i in T.Parallel(32):
                Y[bx, i] = T.remote(s, 0)[i]  # (rank 1: rank 0 may still be writing)
            T.cluster_sync()

    @T.prim_func
    def war(A: T.Tensor((2, 32), "float32"), Y: T.Tensor((2, 32), "float32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                s[i] = A[bx, i]
            T.cluster_sync()
            for i in T.Parallel(32):
                Y[bx, i] = T.remote(s, 1 - T.cluster_rank())[i]
            for i in T.Parallel(32):
                s[i] = -1.0  # (the peer may still be reading)
            T.cluster_sync()

    func = raw if case == "read_before_write_barrier" else war
    args = [np.arange(64, dtype=np.float32).reshape(2, 32), np.zeros((2, 32), np.float32)]
    with pytest.raises(TilecraftError) as info:
        interp.run(func, args)
    assert info.value.code == "TC411"
    assert "T.cluster_sync() between" in info.value.hint


def test_a_shared_tile_read_at_other_elements_and_remotely_is_stillrefused():
    @T.prim_func
    def k(A: T.Tensor((2, 128), "float32"), Y: T.Tensor((2, 64), "float32")):
        with T.Kernel(2, threads=64, cluster_dims=2) as bx:
            s = T.alloc_shared((128,), "float32")
            T.copy(A[bx, 0], s)
            T.cluster_sync()
            for i in T.Parallel(64):
                s[i] = A[bx, i] * 2.0
                Y[bx, i] = s[63 - i] + T.remote(s, 1 - T.cluster_rank())[64 + i]  # ERR
            T.cluster_sync()

    refused(lambda: _source(k), "TC502")


def test_a_loop_end_read_from_memory_is_read_once():
    @T.prim_func
    def k(Y: T.Tensor((2, 16), "int32")):
        with T.Kernel(2, threads=32) as bx:
            s = T.alloc_shared((1,), "int32")
            s[0] = 4
            for j in T.serial(s[0]):
                Y[bx, j] = j + 1
                s[0] = 1

    y = np.zeros((2, 16), np.int32)
    interp.run(k, [y])
    np.testing.assert_array_equal(y[:, :5], [[1, 2, 3, 4, 0]] * 2)
    assert re.search(r"const int (\w+)end = s_\[0\];\s*for \(int \1 = 0; \1 < \1end;", _source(k))


def test_constant_ranks_outside_the_cluster_and_sub_byte_buffers_are_tc108():
    def rank():
        @T.prim_func
        def k(Y: T.Tensor((2,), "float32")):
            with T.Kernel(2, threads=32, cluster_dims=2) as bx:
                s = T.alloc_shared((4,), "float32")
                Y[bx] = T.remote(s, 2)[0]  # ERR

    def nibbles():
        @T.prim_func
        def k(Y: T.Tensor((2,), "int8")):
            with T.Kernel(2, threads=32, cluster_dims=2) as bx:
                s = T.alloc_shared((4,), "int4")
                Y[bx] = T.remote(s, 1)[0]  # ERR

    assert "from 0 to 1" in refused(rank, "TC108").hint
    assert "standard type" in refused(nibbles, "TC108").hint


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["own_index", "masked_ranks"])
def test_the_reviews_cases_on_the_gpu_match_the_interpreter(case):
    if case == "own_index":
        func = own_index().func
        args = [np.array([[3, 10, 11, 12, 13, 14, 15, 16], [5, 20, 21, 22, 23, 24, 25, 26]],
                         np.int32), np.zeros(2, np.int32)]
    else:
        func = masked_ranks().func
        args = [np.full((2, 8), -7, np.float32), np.full((2, 8), -7, np.float32)]
    _gpu_gives_the_interpreters_bits(func, args)


def test_a_write_after_another_blocks_read_is_tc411_at_the_read():
    """Rank 0 reads rank 1's tile; rank 1 (which runs after it) overwrites the tile before the
    next barrier: caught when the barrier opens, located at the read."""

    @T.prim_func
    def k(A: T.Tensor((2, 32), "float32"), Y: T.Tensor((2, 32), "float32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                s[i] = A[bx, i]
            T.cluster_sync()
            if T.cluster_rank() == 0:
                for i in T.Parallel(32):
                    Y[bx, i] = T.remote(s, 1)[i]  # ERR
            for i in T.Parallel(32):
                s[i] = -1.0
            T.cluster_sync()

    args = [np.arange(64, dtype=np.float32).reshape(2, 32), np.zeros((2, 32), np.float32)]
    err = refused(lambda: interp.run(k, args), "TC411")
    assert "block rank 1 wrote `s`" in err.message and "before the next" in err.message


def test_a_remote_index_outside_the_buffer_is_tc401_on_the_interpreter_and_the_vm():
    from tilecraft.block.vm import run

    @T.prim_func
    def k(Y: T.Tensor((2, 8), "float32")):
        with T.Kernel(2, threads=32, cluster_dims=2) as bx:
            s = T.alloc_shared((8,), "float32")
            for i in T.Parallel(8):
                s[i] = 1.0
            T.cluster_sync()
            for i in T.Parallel(8):
                Y[bx, i] = T.remote(s, 1 - T.cluster_rank())[i + 4]
            T.cluster_sync()

    for go in (lambda y: interp.run(k, [y]),
               lambda y: run(lowered_program(lower(k, H100_SXM)), [y], arena=True)):
        with pytest.raises(TilecraftError) as info:
            go(np.zeros((2, 8), np.float32))
        assert info.value.code == "TC401" and "index 11" in str(info.value)
