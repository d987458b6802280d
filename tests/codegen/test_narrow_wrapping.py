"""8/16-bit integer `+ - *` wrap on the GPU like the interpreter's also where a later shift, min
or max reads the result: the generated code does them as 32-bit PTX and converts back, never
leaving a 16-bit `neg.s16`/`add.s16` to ptxas (CUDA 13.0's ptxas kept -(-32768) as +32768 in a
32-bit register: `(-a) >> 15` gave 1 and `min(-a, 16384)` 16384; fuzz seeds 710958, 713708)."""

import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda

from tests.codegen.test_semantics_compile import _ptx

N = 256
TOP = {"int8": 7, "int16": 15}


def wrap_then_read(dtype):
    top = TOP[dtype]

    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N, 4), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                B[i, 0] = (-A[i]) >> top
                B[i, 1] = T.min(-A[i], 3)
                B[i, 2] = (A[i] + A[i]) >> top
                B[i, 3] = T.max(A[i] * 3, -2)

    return k


def _inputs(dtype):
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    a = np.random.default_rng(4).integers(lo, hi + 1, N).astype(dtype)
    a[:4] = [lo, hi, -1, lo + 1]
    return a


def _want(a):
    with np.errstate(over="ignore"):
        top = a.dtype.itemsize * 8 - 1
        return np.stack([(-a) >> top, np.minimum(-a, 3), (a + a) >> top, np.maximum(a * 3, -2)], 1)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_narrow_arithmetic_is_32_bit_ptx(dtype):
    ptx = _ptx(generate_cuda(wrap_then_read(dtype).func, "sm_90a").source)
    assert not re.search(r"\b(neg|add|sub|mul\.lo)\.[su]16\b", ptx)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_interpreter_wraps_narrow_arithmetic_before_the_shift_and_min(dtype):
    a = _inputs(dtype)
    b = np.zeros((N, 4), dtype)
    wrap_then_read(dtype)(a, b)
    assert np.array_equal(b, _want(a))
    assert b[0, 0] == -1 and b[0, 1] == np.iinfo(dtype).min  # -MIN wraps to MIN


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_gpu_wraps_narrow_arithmetic_like_the_interpreter(dtype):
    a = _inputs(dtype)
    b = torch.zeros((N, 4), dtype=getattr(torch, dtype)).cuda()
    wrap_then_read(dtype)(torch.from_numpy(a).cuda(), b)
    assert np.array_equal(b.cpu().numpy(), _want(a))
