"""T.fma is a fused multiply-add: a * b + c rounded once (CUDA's fmaf / fma / __hfma), on scalar
expressions (T.Parallel) and on register tensors (one block instruction); on integers the plain
expression. The interpreter rounds it exactly (checked against fractions, including products
that land on a midpoint of the type), and the GPU matches it bit for bit."""

import bisect
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.interp.evaluate import fused_multiply_add
from tilecraft.interp.values import store_cast
from tilecraft.layout import spatial
from tilecraft.runtime import compile_cuda

N = 4096
ROWS = spatial(16, 8).local(1, 16)  # [16, 128] over 128 threads
NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def operands(dtype: str, n: int, seed: int = 0):
    """Random a, b, c, half of them with products on (or near) a midpoint of the type and a
    tiny c: where rounding twice and rounding once differ."""
    rng = np.random.default_rng(seed)
    npt = NP[dtype]
    a = rng.standard_normal(n).astype(npt)
    b = rng.standard_normal(n).astype(npt)
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 2, n).astype(float))).astype(npt)
    h = n // 2
    a[:h] = (rng.integers(1, 64, h) * 2.0 ** rng.integers(-3, 3, h)).astype(npt)
    b[:h] = (rng.integers(1, 64, h) + 0.5).astype(npt)
    return a, b, c


def exact(a, b, c, dtype: str) -> np.ndarray:
    """a * b + c rounded to nearest even in `dtype`, by fractions."""
    npt = NP[dtype]
    if dtype == "float32":
        out = []
        for x, y, z in zip(a, b, c):
            v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            f = np.float32(float(v))
            near = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
            out.append(min(near, key=lambda q: (abs(Fraction(float(q)) - v),
                                                int(np.array(q).view(np.int32)) & 1)))
        return np.array(out, dtype=np.float64)
    codes = np.arange(65536, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        vals = codes.view(npt).astype(np.float64)
    keep = np.isfinite(vals)
    order = np.argsort(vals[keep], kind="stable")
    fin, bits = vals[keep][order], codes[keep][order]
    fr = [Fraction(v) for v in fin]
    out = []
    for x, y, z in zip(a, b, c):
        v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        i = bisect.bisect_left(fr, v)
        near = [j for j in (i - 1, i) if 0 <= j < len(fr)]
        out.append(fin[min(near, key=lambda j: (abs(fr[j] - v), int(bits[j]) & 1))])
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("dtype", sorted(NP))
def test_the_interpreter_rounds_once_exactly(dtype):
    a, b, c = operands(dtype, 1500)
    got = store_cast(dt.resolve(dtype), fused_multiply_add(a, b, c, dt.resolve(dtype)))
    want = exact(a, b, c, dtype)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want)
    twice = (a.astype(np.float64) * b).astype(NP[dtype]).astype(np.float64) + c
    assert (twice.astype(NP[dtype]).astype(np.float64) != want).any()  # (the cases matter)


def test_float64_fma_is_exact_with_ieee_overflow_and_signed_zeros():
    f64 = dt.resolve("float64")

    def fma(a, b, c):
        return float(fused_multiply_add(np.float64(a), np.float64(b), np.float64(c), f64))

    a, b = 1 + 2.0 ** -30, 1 - 2.0 ** -30
    assert fma(a, b, -1.0) == -(2.0 ** -60) and a * b - 1.0 == 0.0  # (two roundings lose it)
    exact = Fraction(2e154) * Fraction(1e154) - Fraction(1e308)
    assert fma(2e154, 1e154, -1e308) == float(exact)  # (the product alone overflows)
    assert fma(1e200, 1e200, 0.0) == np.inf and fma(-1e200, 1e200, 0.0) == -np.inf
    assert np.signbit(fma(-0.0, 1.0, -0.0)) and np.signbit(fma(-1.0, 0.0, -0.0))
    assert not np.signbit(fma(1.0, 1.0, -1.0)) and not np.signbit(fma(-0.0, 1.0, 0.0))


def scalar_fma(dtype: str):
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype),
          Y: T.Tensor((N,), dtype)):
        with T.Kernel(N // 256, threads=128) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = T.fma(A[bx * 256 + i], B[bx * 256 + i], C[bx * 256 + i])

    return k


def register_fma(dtype: str):
    @T.prim_func
    def k(A: T.Tensor((N // 128, 128), dtype), B: T.Tensor((N // 128, 128), dtype),
          C: T.Tensor((N // 128, 128), dtype), Y: T.Tensor((N // 128, 128), dtype)):
        with T.Kernel(N // 2048, threads=128) as bi:
            a = T.load_global(A, layout=ROWS, offset=[bi * 16, 0])
            b = T.load_global(B, layout=ROWS, offset=[bi * 16, 0])
            c = T.load_global(C, layout=ROWS, offset=[bi * 16, 0])
            T.store_global(T.fma(a, b, c), Y, offset=[bi * 16, 0])

    return k


def run(make, dtype: str, device: str, a, b, c) -> np.ndarray:
    t = [torch.from_numpy(np.asarray(x).astype(np.float32)).to(TORCH[dtype]).to(device)
         for x in (a, b, c)]
    if make is register_fma:
        t = [x.view(N // 128, 128) for x in t]
    y = torch.full_like(t[0], float("nan"))
    tilecraft.jit(make(dtype))(*t, y)
    return y.float().cpu().numpy().reshape(-1).astype(np.float64)


@pytest.mark.parametrize("make", [scalar_fma, register_fma], ids=["parallel", "register"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_both_levels_round_once_on_the_interpreter(make, dtype):
    a, b, c = operands(dtype, N, seed=1)
    np.testing.assert_array_equal(run(make, dtype, "cpu", a, b, c),
                                  store_cast(dt.resolve(dtype), fused_multiply_add(
                                      a, b, c, dt.resolve(dtype))).astype(np.float64))


def test_integer_fma_is_the_plain_expression():
    from tilecraft.ir import BinOp, Call, Var

    assert T.fma(7, 5, -3) == 32  # (Python numbers: at parse time)
    i = Var.create("i", "int32")
    assert isinstance(T.fma(i, 5, -3), BinOp)
    x = Var.create("x", "float16")
    f = T.fma(x, 2.0, 1.0)
    assert isinstance(f, Call) and f.op == "fma" and f.dtype.name == "float16"
    assert T.fma(2.0, 3.0, x).dtype.name == "float16"  # (as 2.0 * 3.0 + x: folded first)


@pytest.mark.parametrize("make", [scalar_fma, register_fma], ids=["parallel", "register"])
def test_the_cuda_source_calls_one_fused_instruction(make):
    pytest.importorskip("cuda.bindings.nvrtc")
    gen = generate_cuda(make("float16"), "sm_90a")
    assert "__hfma(" in gen.source and "__hmul_rn(" not in gen.source
    assert compile_cuda(gen.source, "sm_90a", name=gen.name).resources.spill_stores == 0


@pytest.mark.gpu
@pytest.mark.parametrize("make", [scalar_fma, register_fma], ids=["parallel", "register"])
@pytest.mark.parametrize("dtype", sorted(NP))
def test_the_gpu_matches_the_interpreter_bit_for_bit(make, dtype):
    a, b, c = operands(dtype, N, seed=2)
    want = run(make, dtype, "cpu", a, b, c)
    got = run(make, dtype, "cuda", a, b, c)
    np.testing.assert_array_equal(got, want)


def test_register_operands_that_do_not_broadcast_are_tc603_at_the_users_line():
    from tilecraft.diagnostics import TilecraftError

    with pytest.raises(TilecraftError) as e:

        @T.prim_func
        def bad(A: T.Tensor((16, 128), "float16"), B: T.Tensor((16, 64), "float16")):
            with T.Kernel(1, threads=128) as bi:
                a = T.load_global(A, layout=ROWS, offset=[bi * 16, 0])
                b = T.load_global(B, layout=spatial(16, 8).local(1, 8))
                T.store_global(T.fma(a, b, 1.0), A)  # ERR

        tilecraft.jit(bad)(torch.zeros(16, 128).half(), torch.zeros(16, 64).half())

    assert e.value.code == "TC603" and "# ERR" in e.value.span.source_line()
