"""A 32-bit integer expression cast to an 8/16-bit type keeps its arithmetic 32-bit. NVVM
narrowed `T.cast(T.cast(-l, "int8"), "int16")` (l uint32) to shl.b16 / neg.s16 / shr.s16, and ptxas of CUDA 13.0
keeps that neg.s16 result unextended in a 32-bit register: for l = 0xFF80 the H100 gave +128
where the interpreter gives -128 (fuzz seed 3207775). tc::cast passes the 32-bit value through
an opaque move first."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tests.codegen.test_semantics_compile import _ptx

N = 256


def negate_then_narrow(dtype):
    @tilecraft.jit
    @T.prim_func
    def k(L: T.Tensor((N,), "uint32"), D: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                D[i] = T.cast(T.cast(T.cast(-L[i], dtype), "int16"), "int32") | T.cast(bx, "int32")

    return k


NARROW = ["int8", "int16", "uint8", "uint16"]


def _inputs():
    # low bytes 0x80 / low halves 0x8000: the values whose negation overflows the narrow type
    base = np.array([0xFF80, 0x8000, 0x80, 0x7F, 0, 1, 0xFFFFFFFF, 0x12348000], np.uint64)
    vals = np.resize(base, N) + (np.arange(N, dtype=np.uint64) // len(base)) * 0x10000
    return torch.from_numpy((vals % 2**32).astype(np.int64)).to(torch.uint32)


def _want(l, dtype):
    neg = (-l.numpy().astype(np.uint32)).astype(np.uint32)
    return neg.astype(getattr(np, dtype)).astype(np.int16).astype(np.int32)


@pytest.mark.parametrize("dtype", NARROW)
def test_no_sixteen_bit_negation_in_the_ptx(dtype):
    ptx = _ptx(generate_cuda(negate_then_narrow(dtype).func, "sm_90a").source)
    assert "neg.s16" not in ptx and "sub.s16" not in ptx


@pytest.mark.parametrize("dtype", NARROW)
def test_interpreter_narrowing_cast_of_a_negation(dtype):
    l = _inputs()
    d = torch.zeros(N, dtype=torch.int32)
    negate_then_narrow(dtype)(l, d)
    assert np.array_equal(d.numpy(), _want(l, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", NARROW)
def test_gpu_narrowing_cast_of_a_negation_matches_the_interpreter(dtype):
    l = _inputs()
    d = torch.zeros(N, dtype=torch.int32).cuda()
    negate_then_narrow(dtype)(l.cuda(), d)
    assert np.array_equal(d.cpu().numpy(), _want(l, dtype))
