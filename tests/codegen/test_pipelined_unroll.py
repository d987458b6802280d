"""`T.Pipelined(n, num_stages=S, unroll=u)`: a hint to the CUDA compiler (`#pragma unroll u` on
the pipelined loop; a loop keeping a wgmma in flight stays rolled), with the same results on
the interpreter; a negative count is TC108 at the user's line."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError


def _sum_rows(unroll: int):
    @tilecraft.jit
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64, 256), "float16"), B: T.Tensor((64, 32), "float32")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((64, 32), "float16")
                acc = T.alloc_fragment((64, 32), "float32")
                T.clear(acc)
                for ko in T.Pipelined(8, num_stages=3, unroll=unroll):
                    T.copy(A[0, ko * 32], a)
                    for i, j in T.Parallel(64, 32):
                        acc[i, j] += a[i, j]
                T.copy(acc, B)

        return k

    return factory()


def test_the_unroll_hint_reaches_the_cuda_source():
    from tilecraft.codegen.cuda.build import generate_cuda

    source = generate_cuda(_sum_rows(3).func, "sm_90a").source
    assert "#pragma unroll 3\n" in source
    assert "#pragma unroll 3\n" not in generate_cuda(_sum_rows(0).func, "sm_90a").source


def test_the_unrolled_loop_computes_the_same_on_the_interpreter():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 256)).astype(np.float16)
    want = a.astype(np.float64).reshape(64, 8, 32).sum(axis=1)
    for u in (0, 3):
        b = np.zeros((64, 32), np.float32)
        _sum_rows(u)(a, b)
        np.testing.assert_allclose(b, want, rtol=1e-5)


def test_a_negative_unroll_is_refused_at_its_line():
    with pytest.raises(TilecraftError) as err:
        _sum_rows(-1)
    assert err.value.code == "TC108" and "unroll=-1" in str(err.value)
    assert err.value.span is not None and err.value.span.line is not None


@pytest.mark.gpu
def test_the_unrolled_loop_on_the_gpu_matches_the_interpreter():
    import torch

    a = torch.randn(64, 256, dtype=torch.float16)
    want = torch.zeros(64, 32)
    _sum_rows(3)(a.numpy(), want.numpy())
    got = torch.zeros(64, 32, device="cuda")
    _sum_rows(3)(a.cuda(), got)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
