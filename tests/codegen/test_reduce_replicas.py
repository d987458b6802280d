"""A row reduction that crosses warps leaves the same bits in every thread that holds the row:
each thread combines the warps' partials in one order (a balanced tree), so every element of
the row sees one value, as on the interpreter (before, each thread summed its partners in its
own order and replicas could differ in the last bits)."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda

N = 8192


@tilecraft.jit
@T.prim_func
def row_sum_everywhere(X: T.Tensor((2, N), "float32"), Y: T.Tensor((2, N), "float32")):
    with T.Kernel(1, threads=1024) as bx:
        x = T.alloc_fragment((2, N), "float32")
        s = T.alloc_fragment((2,), "float32")
        T.copy(X[0, 0], x)
        T.reduce_sum(x, s, dim=1)
        for i, j in T.Parallel(2, N):
            x[i, j] = s[i]  # each element reads the copy of the thread that holds it
        T.copy(x, Y[0, 0])


def _x():
    g = torch.Generator().manual_seed(7)
    return torch.randn(2, N, generator=g) * torch.logspace(-6, 6, N)  # order-sensitive sums


def test_cross_warp_partials_combine_as_one_tree():
    src = generate_cuda(row_sum_everywhere.func, "sm_90a").source
    assert "rbase" in src and "(tid ^" not in src


def test_interpreter_gives_every_element_of_a_row_one_sum():
    y = torch.zeros(2, N)
    row_sum_everywhere(_x(), y)
    assert (y == y[:, :1]).all()


@pytest.mark.gpu
def test_gpu_gives_every_element_of_a_row_one_sum():
    y = torch.zeros(2, N, device="cuda")
    row_sum_everywhere(_x().cuda(), y)
    assert (y == y[:, :1]).all(), (y.min(1), y.max(1))
    torch.testing.assert_close(y[:, 0].double().cpu(), _x().double().sum(1), rtol=1e-5, atol=1e-3)
