"""Signed integer T.max/T.min of a negated value keep the negation on the GPU. NVRTC 13.0 folds
`max(max(-a, b), c)` into one three-input VIMNMX3 and drops the minus (the H100 stored 1 where
the interpreter gave 0: fuzz seed 700523); signed 32-bit and narrower min/max print as PTX
max.s32/min.s32, which that fold does not see."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tests.codegen.test_semantics_compile import _ptx

N = 256


def neg_max3(dtype, op):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype),
          D: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                v = -A[i]
                v = op(v, B[i])
                v = op(v, C[i])
                D[i] = v

    return k


CASES = [(d, op) for d in ("int32", "int16", "int8") for op in (T.max, T.min)]


def _inputs(dtype):
    g = torch.Generator().manual_seed(5)
    t = getattr(torch, dtype)
    return [torch.randint(-40, 40, (N,), generator=g).to(t) for _ in range(3)]


def _want(a, b, c, op):
    f = np.maximum if op is T.max else np.minimum
    return f(f(-a.numpy(), b.numpy()), c.numpy())


@pytest.mark.parametrize("dtype,op", CASES)
def test_signed_min_max_print_as_ptx_min_max(dtype, op):
    ptx = _ptx(generate_cuda(neg_max3(dtype, op).func, "sm_90a").source)
    assert f"{'max' if op is T.max else 'min'}.s32" in ptx


@pytest.mark.parametrize("dtype,op", CASES)
def test_interpreter_min_max_of_a_negated_value(dtype, op):
    a, b, c = _inputs(dtype)
    d = torch.zeros_like(a)
    neg_max3(dtype, op)(a, b, c, d)
    assert np.array_equal(d.numpy(), _want(a, b, c, op))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,op", CASES)
def test_gpu_min_max_of_a_negated_value_matches_the_interpreter(dtype, op):
    a, b, c = _inputs(dtype)
    d = torch.zeros_like(a).cuda()
    neg_max3(dtype, op)(a.cuda(), b.cuda(), c.cuda(), d)
    assert np.array_equal(d.cpu().numpy(), _want(a, b, c, op))
