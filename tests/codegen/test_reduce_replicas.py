"""A row reduction that crosses warps leaves the same bits in every thread that holds the row,
so every element of the row sees one value, as on the interpreter (before, each thread summed
its partners in its own order and replicas could differ in the last bits).

Two forms: when a row spans at least as many lanes as warps, each lane reads one warp's partial
and a butterfly of shuffles combines them (a + b == b + a at every step, so all lanes agree);
otherwise the row goes through shared memory and every thread holding it sums it in one fixed
order."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.layout import column_spatial, local, spatial

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


@tilecraft.jit
@T.prim_func
def row_sum_over_two_lanes(X: T.Tensor((16, 32), "float32"), Y: T.Tensor((16, 32), "float32")):
    with T.Kernel(1, threads=256) as bx:
        x = T.alloc_fragment((16, 32), "float32")
        s = T.alloc_fragment((16,), "float32")
        # row = lane % 16; a row's 32 values: 8 warps x 2 lanes x 2 registers
        T.annotate_layout({x: spatial(1, 8) * column_spatial(16, 2) * local(1, 2)})
        T.copy(X[0, 0], x)
        T.reduce_sum(x, s, dim=1)
        for i, j in T.Parallel(16, 32):
            x[i, j] = s[i]
        T.copy(x, Y[0, 0])


def _x(rows=2, n=N):
    g = torch.Generator().manual_seed(7)
    return torch.randn(rows, n, generator=g) * torch.logspace(-6, 6, n)  # order-sensitive sums


def _reduce_lines(kernel):
    src = generate_cuda(kernel.func, "sm_90a").source
    start = src.index("// reduce_sum(")
    return src[start:src.index("// for i, j in parallel(", start)]


def test_a_row_over_many_lanes_combines_warp_partials_by_shuffle():
    body = _reduce_lines(row_sum_everywhere)  # 32 lanes x 16 warps per row
    assert body.count("scratch[j * 1024 + rbase + pick]") == 1  # one load per thread
    assert "group[" not in body and "(tid ^" not in body
    assert body.count("__shfl_xor_sync") == 5 + 4  # in-warp, then across the 16 warps


def test_a_row_over_fewer_lanes_than_warps_combines_in_one_order():
    body = _reduce_lines(row_sum_over_two_lanes)  # 2 lanes x 8 warps per row
    assert "pick" not in body and "(tid ^" not in body and "__shfl" not in body
    # the row's 32 values, staged, summed from the first to the last by each of its 16 holders
    assert ("for (int r = 0; r < 32; ++r) "
            "acc = acc + stage0[(tid % 16) * 32 + r];") in body


@pytest.mark.parametrize("kernel, rows, n", [(row_sum_everywhere, 2, N),
                                             (row_sum_over_two_lanes, 16, 32)])
def test_interpreter_gives_every_element_of_a_row_one_sum(kernel, rows, n):
    y = torch.zeros(rows, n)
    kernel(_x(rows, n), y)
    assert (y == y[:, :1]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, rows, n", [(row_sum_everywhere, 2, N),
                                             (row_sum_over_two_lanes, 16, 32)])
def test_gpu_gives_every_element_of_a_row_one_sum(kernel, rows, n):
    y = torch.zeros(rows, n, device="cuda")
    kernel(_x(rows, n).cuda(), y)
    assert (y == y[:, :1]).all(), (y.min(1), y.max(1))
    ref = _x(rows, n).double().sum(1)
    torch.testing.assert_close(y[:, 0].double().cpu(), ref, rtol=1e-5, atol=1e-3)
