"""A T.Pipelined loop whose body stores to a global tensor does not prefetch copies from that
tensor: iteration k + S - 1's copy would read it before iteration k's store, where the
interpreter runs the iterations in order (each row below adds the previous, updated row)."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM

R, C = 8, 128


def running_sum(stored: bool):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((R, C), "float32"), B: T.Tensor((R, C), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((1, C), "float32")
            f = T.alloc_fragment((1, C), "float32")
            for r in T.Pipelined(R - 1, num_stages=3):
                T.copy(A[r, 0], s)
                T.copy(s, f)
                for i, j in T.Parallel(1, C):
                    f[i, j] = f[i, j] + A[r + 1, j]
                if stored:
                    T.copy(f, A[r + 1, 0])
                else:
                    T.copy(f, B[r + 1, 0])

    return k


def test_a_copy_from_a_tensor_the_body_stores_to_is_not_prefetched():
    assert not lower(running_sum(True).func, H100_SXM).pipelines
    (plan,) = lower(running_sum(False).func, H100_SXM).pipelines.values()
    assert [b.name for b in plan.buffers] == ["s"]


def _a():
    return torch.randn(R, C, generator=torch.Generator().manual_seed(2))


def test_interpreter_reads_the_rows_the_loop_stored():
    a, b = _a(), torch.zeros(R, C)
    want = torch.cumsum(a, 0)
    running_sum(True)(a, b)
    torch.testing.assert_close(a, want)


@pytest.mark.gpu
def test_gpu_reads_the_rows_the_loop_stored():
    a, b = _a(), torch.zeros(R, C)
    running_sum(True)(a, b)
    ga, gb = _a().cuda(), torch.zeros(R, C).cuda()
    running_sum(True)(ga, gb)
    torch.testing.assert_close(ga.cpu(), a)
