"""abs of 8/16-bit signed integers on the GPU wraps like the interpreter's (abs(MIN) is MIN) also
where a later max or min reads it: the generated code computes it with a 32-bit `abs.s32` and
never leaves PTX `abs.s16` to ptxas (CUDA 13.0's ptxas turned it into a 32-bit IABS and dropped
the sign extension after it: abs(-32768) reached the next max as +32768)."""

import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda

from tests.codegen.test_semantics_compile import _ptx
from tests.interp import semantics_kernels as K

N = 64


def abs_then_max(dtype):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[i] = T.max(T.abs(A[i]), 3)

    return k


def _abs_ops(func, pattern: str = r"\babs\.\w+") -> set[str]:
    return set(re.findall(pattern, _ptx(generate_cuda(func, "sm_90a").source)))


@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_narrow_absmax_reduction_takes_abs_in_32_bits(dtype, clear):
    # an `abs.s32`, or the block printer's `x < 0 ? -x : x` on the value widened to 32 bits
    ops = _abs_ops(K.reduction(64, 64, dtype, "absmax", clear=clear).func,
                   r"\b(?:abs|neg)\.\w+")
    assert ops and ops <= {"abs.s32", "neg.s32"}, ops


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_narrow_elementwise_abs_takes_abs_in_32_bits(dtype):
    assert _abs_ops(abs_then_max(dtype).func) <= {"abs.s32"}


def _rows_with_the_minimum(dtype: str, rows: int, cols: int) -> np.ndarray:
    lo, hi = K.INT_RANGES[dtype]
    g = np.random.default_rng(5)
    a = g.integers(-20, 20, (rows, cols)).astype(dtype)
    a[0, :] = lo  # absmax: MIN; with an old value 3: 3
    a[1, ::2] = lo  # MIN beside small values: the largest small |x|
    if rows > 2:  # (2, 1024) has no third row
        a[2, :] = hi
    return a


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_interpreter_absmax_of_rows_with_the_minimum(dtype):
    lo = K.INT_RANGES[dtype][0]
    a = _rows_with_the_minimum(dtype, 4, 64)
    b = np.full(4, 3, dtype=dtype)
    K.reduction(4, 64, dtype, "absmax", clear=False)(a, b)
    small = [max(abs(int(v)) for v in row if v != lo) for row in a[1:2]]
    assert b[:3].tolist() == [3, max(3, small[0]), K.INT_RANGES[dtype][1]]
    x = np.array([lo, -5, 5, 2], dtype=dtype)
    out = np.zeros(N, dtype=dtype)
    abs_then_max(dtype)(np.resize(x, N), out)
    assert out[:4].tolist() == [3, 5, 5, 3]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 64), (2, 1024)])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_gpu_narrow_absmax_with_the_minimum_matches_the_interpreter(dtype, shape):
    a = torch.from_numpy(_rows_with_the_minimum(dtype, *shape))
    for clear in (True, False):
        b = torch.full((shape[0],), 3, dtype=a.dtype)
        kernel = K.reduction(*shape, dtype, "absmax", clear=clear)
        cpu, gpu = b.clone(), b.cuda()
        kernel(a, cpu)
        kernel(a.cuda(), gpu)
        assert torch.equal(cpu, gpu.cpu()), (clear, cpu[:4], gpu[:4])
    x = torch.from_numpy(np.resize(np.array([K.INT_RANGES[dtype][0], -5, 5, 2], dtype), N))
    cpu, gpu = torch.zeros(N, dtype=x.dtype), torch.zeros(N, dtype=x.dtype, device="cuda")
    abs_then_max(dtype)(x, cpu)
    abs_then_max(dtype)(x.cuda(), gpu)
    assert torch.equal(cpu, gpu.cpu())
