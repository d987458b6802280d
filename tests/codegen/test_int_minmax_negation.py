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


# ptxas (12.8-13.3, NVRTC 13.0 on the H100) also fuses a min/max chain whose negated operand is
# a uniform value (`-bx`) or a product by a negative constant (`acc * -4`) into one VIMNMX3 and
# drops the minus (fuzz seeds 2700455, 2702372). Every 32-bit-or-narrower min/max now ends in an
# identity PRMT on sm_90a, so no VIMNMX3 is formed at all.

ROWS, COLS = 4, 64


def neg_block_index(dtype, op):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((ROWS, COLS), dtype), B: T.Tensor((ROWS, COLS), dtype),
          D: T.Tensor((ROWS, COLS), dtype)):
        with T.Kernel(ROWS, threads=64) as bx:
            for i in T.Parallel(COLS):
                D[bx, i] = op(op(A[bx, i] >> 3, T.cast(0 - bx, dtype)), B[bx, i])

    return k


def neg_scaled_accumulator(op):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((ROWS, 4), "int32"), D: T.Tensor((ROWS,), "int32")):
        with T.Kernel(ROWS, threads=32) as bx:
            acc = T.alloc_var("int32")
            acc = A[bx, 0]
            for j in T.serial(3):
                acc = op(A[bx, j + 1], acc * -4)
            acc = op(acc, A[bx, 3])
            D[bx] = acc

    return k


def _block_index_want(a, b, op, dtype):
    f = np.maximum if op is T.max else np.minimum
    neg = (-np.arange(ROWS)).astype(dtype)[:, None]
    return f(f(a >> 3, neg), b)


def _accumulator_want(a, op):
    f = max if op is T.max else min
    out = []
    for row in a.tolist():
        acc = row[0]
        for j in range(3):
            acc = f(row[j + 1], acc * -4)
        out.append(f(acc, row[3]))
    return np.array(out, np.int32)


NEG_CASES = [(d, op) for d in ("int32", "int16", "int8") for op in (T.max, T.min)]
OPS = [T.max, T.min]


def _ints(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-100, 100, shape, generator=g).to(getattr(torch, dtype))


@pytest.mark.parametrize("dtype,op", NEG_CASES)
def test_no_three_input_min_max_in_the_sass(dtype, op):
    sass_mod = pytest.importorskip("tests.codegen.sass")
    if sass_mod.cuobjdump() is None:
        pytest.skip("cuobjdump is not installed")
    from tilecraft.runtime import compile_cuda

    for kernel in (neg_block_index(dtype, op), neg_scaled_accumulator(op)):
        gen = generate_cuda(kernel.func, "sm_90a")
        lines = sass_mod.sass(compile_cuda(gen.source, "sm_90a", name=gen.name).cubin)
        assert not [ln for ln in lines if "VIMNMX3" in ln]


@pytest.mark.parametrize("dtype,op", NEG_CASES)
def test_interpreter_min_max_of_a_negated_block_index(dtype, op):
    a, b = _ints((ROWS, COLS), dtype, 1), _ints((ROWS, COLS), dtype, 2)
    d = torch.zeros_like(a)
    neg_block_index(dtype, op)(a, b, d)
    assert np.array_equal(d.numpy(), _block_index_want(a.numpy(), b.numpy(), op, dtype))


@pytest.mark.parametrize("op", OPS)
def test_interpreter_min_max_of_a_negatively_scaled_accumulator(op):
    a = _ints((ROWS, 4), "int32", 3)
    d = torch.zeros(ROWS, dtype=torch.int32)
    neg_scaled_accumulator(op)(a, d)
    assert np.array_equal(d.numpy(), _accumulator_want(a.numpy(), op))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,op", NEG_CASES)
def test_gpu_min_max_of_a_negated_block_index(dtype, op):
    a, b = _ints((ROWS, COLS), dtype, 1), _ints((ROWS, COLS), dtype, 2)
    d = torch.zeros_like(a).cuda()
    neg_block_index(dtype, op)(a.cuda(), b.cuda(), d)
    assert np.array_equal(d.cpu().numpy(), _block_index_want(a.numpy(), b.numpy(), op, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_gpu_min_max_of_a_negatively_scaled_accumulator(op):
    a = _ints((ROWS, 4), "int32", 3)
    d = torch.zeros(ROWS, dtype=torch.int32).cuda()
    neg_scaled_accumulator(op)(a.cuda(), d)
    assert np.array_equal(d.cpu().numpy(), _accumulator_want(a.numpy(), op))
