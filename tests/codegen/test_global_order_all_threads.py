"""Global memory that the block's threads write in one statement and read or overwrite in a later
one (tile ops, T.Parallel) is ordered by a barrier, as the interpreter runs statements one after
the other: a thread may read an element another thread wrote."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tests.codegen.test_block_level_stores import _syncs_between
from tilecraft.codegen.cuda.build import generate_cuda

N = 1024


@tilecraft.jit
@T.prim_func
def write_then_read_shifted(A: T.Tensor((N + 8,), "int32"), B: T.Tensor((N,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((N,), "int32")
        for i in T.Parallel(N):
            A[i + 8] = A[i + 8] * 3 + i
        T.copy(A[0], f)  # element i was written by another thread
        T.copy(f, B[0])


@tilecraft.jit
@T.prim_func
def read_then_overwrite_shifted(A: T.Tensor((N + 8,), "int32"), B: T.Tensor((N,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((N,), "int32")
        T.copy(A[8], f)
        for i in T.Parallel(N):
            A[i] = i  # overwrites what another thread read
        T.copy(f, B[0])


@tilecraft.jit
@T.prim_func
def independent(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((N,), "int32")
        T.copy(A[0], f)
        for i in T.Parallel(N):
            f[i] = f[i] + 1
        T.copy(f, B[0])


def _src(k) -> str:
    return generate_cuda(k.func, "sm_90a").source.split('extern "C"')[1]


def test_a_read_of_what_other_threads_wrote_waits_at_a_barrier():
    assert _syncs_between(_src(write_then_read_shifted), "A_[i_ + 8] =", "// load_global(A,") == 1


def test_an_overwrite_of_what_other_threads_read_waits_at_a_barrier():
    src = _src(read_then_overwrite_shifted)
    assert _syncs_between(src, "// load_global(A,", "// for i in parallel(") == 1


def test_reads_and_writes_of_different_tensors_need_no_barrier():
    assert "__syncthreads" not in _src(independent)


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randint(-50, 50, (N + 8,), generator=g, dtype=torch.int32)


def test_interpreter_runs_the_statements_in_order():
    a = _inputs()
    want = torch.cat([a[:8], a[8:] * 3 + torch.arange(N, dtype=torch.int32)])
    b = torch.zeros(N, dtype=torch.int32)
    write_then_read_shifted(a, b)
    assert torch.equal(a, want) and torch.equal(b, want[:N])
    a = _inputs()
    b = torch.zeros(N, dtype=torch.int32)
    want_b = a[8:].clone()
    read_then_overwrite_shifted(a, b)
    assert torch.equal(b, want_b) and np.array_equal(a[:N].numpy(), np.arange(N))


@pytest.mark.gpu
@pytest.mark.parametrize("k", [write_then_read_shifted, read_then_overwrite_shifted],
                         ids=lambda k: k.func.name)
def test_gpu_orders_the_block_statements_like_the_interpreter(k):
    for _ in range(5):  # a race shows as run-to-run differences too
        a, b = _inputs(), torch.zeros(N, dtype=torch.int32)
        ga, gb = a.cuda(), b.cuda()
        k(a, b)
        k(ga, gb)
        assert torch.equal(ga.cpu(), a) and torch.equal(gb.cpu(), b)
