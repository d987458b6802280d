"""inf and NaN flow through the interpreter's tile ops by IEEE rules, as on the GPU, without
numpy RuntimeWarnings reaching the user (a gemm of inf - inf warned from inside tilecraft)."""

import warnings

import torch

import tilecraft
import tilecraft.language as T


@tilecraft.jit
@T.prim_func
def gemm_then_rowsum(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32"),
                     C: T.Tensor((16, 16), "float32"), R: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared((16, 16), "float32")
        b = T.alloc_shared((16, 16), "float32")
        c = T.alloc_fragment((16, 16), "float32")
        r = T.alloc_fragment((16,), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.clear(c)
        T.gemm(a, b, c)
        T.reduce_sum(c, r, dim=1)
        T.copy(c, C)
        T.copy(r, R)


def test_a_gemm_over_infinities_gives_nan_without_numpy_warnings():
    a = torch.full((16, 16), float("inf"))
    a[0, 0] = -float("inf")
    c, r = torch.zeros(16, 16), torch.zeros(16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gemm_then_rowsum(a, torch.ones(16, 16), c, r)
    assert torch.isnan(c[0]).all() and torch.isinf(c[1]).all() and torch.isnan(r[0])
