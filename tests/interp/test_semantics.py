"""The interpreter follows the language's arithmetic semantics (docs/language.md, "Semantics"):
floor // and %, wrapping integers, NaN-propagating max/min, exact integer reductions, saturating
float -> int stores, TC410 for integer division by zero."""

import math

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError

from . import semantics_kernels as K
from .semantics_kernels import INT_RANGES, nan_inputs, reduce_inputs, run_wrapping

N = K.N
rng = np.random.default_rng(0)


def _wrap(values, dtype) -> np.ndarray:
    """Python ints wrapped to a numpy integer dtype (two's complement)."""
    bits = np.dtype(dtype).itemsize * 8
    out = [(int(v) & ((1 << bits) - 1)) for v in values]
    if np.issubdtype(dtype, np.signedinteger):
        out = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in out]
    return np.array(out, dtype=object).astype(dtype)


def test_floor_division_and_modulo_of_negative_values():
    a = torch.arange(N, dtype=torch.int32)
    b = torch.full((5, 2 * N), -999, dtype=torch.int32)
    s = -9
    K.divmod_negative(a, b, s)
    ref = np.full((5, 2 * N), -999)
    for bx in range(2):
        for i in range(N):
            v = i - 40
            j = bx * N + i
            ref[0, j] = v // 7 + (bx - 1) // 3
            ref[1, j] = v % 7 + s % 5 + (bx - 3) % 4
            ref[2, j] = i // 4 + (i - 32) % 5 + (i - 40) // 6
            ref[3, j] = v // -3 + v % -3 + s // (i - 32 + 2 * N)
        for k in range(-3, 3):
            ref[4, k + 3 + bx * 6] = k // 2 * 10 + k % 2 + s // 4
    np.testing.assert_array_equal(b.numpy(), ref)


def test_integer_division_is_exact_in_int64_and_wraps_in_int8():
    a = torch.tensor([(-1) ** i * (2**62 + 12345 * i + 1) for i in range(N)], dtype=torch.int64)
    d = torch.tensor([(-1) ** (i // 2) * (3 + i) for i in range(N)], dtype=torch.int64)
    x = torch.tensor(rng.integers(-128, 128, N), dtype=torch.int8)
    x[:4] = -128
    y = torch.tensor(rng.choice([-3, -2, -1, 1, 2, 5, 7], N), dtype=torch.int8)
    y[:2] = -1
    b = torch.zeros(3, N, dtype=torch.int64)
    c = torch.zeros(3, N, dtype=torch.int8)
    K.int_division(a, d, b, x, y, c)
    av, dv = a.tolist(), d.tolist()
    trunc = [abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1) for p, q in zip(av, dv)]
    np.testing.assert_array_equal(b[0].numpy(), trunc)  # float64 would be off beyond 2^53
    np.testing.assert_array_equal(b[1].numpy(), [p // q for p, q in zip(av, dv)])
    np.testing.assert_array_equal(b[2].numpy(), [p % q for p, q in zip(av, dv)])
    xv, yv = x.tolist(), y.tolist()
    t8 = [abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1) for p, q in zip(xv, yv)]
    np.testing.assert_array_equal(c[0].numpy(), _wrap(t8, np.int8))  # -128 / -1 wraps to -128
    np.testing.assert_array_equal(c[1].numpy(), _wrap([p // q for p, q in zip(xv, yv)], np.int8))
    np.testing.assert_array_equal(c[2].numpy(), [p % q for p, q in zip(xv, yv)])


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_float_floordiv_and_mod_use_the_floor_of_the_rounded_quotient(dtype):
    npt = np.dtype(dtype)
    a = np.array([1.0, -1.0, 7.5, -7.5, 5.0, 0.3, -0.0, 3.0] * (N // 8), dtype=npt)
    d = np.array([0.1, 0.1, -2.0, 2.0, 0.0, 0.1, 1.0, -0.0] * (N // 8), dtype=npt)
    out = torch.zeros(2, N, dtype=getattr(torch, dtype))
    K.float_divmod(dtype)(torch.from_numpy(a), torch.from_numpy(d), out)
    ct = np.dtype(np.float32) if dtype == "float16" else npt  # 16-bit: float32, one rounding
    x, y = a.astype(ct), d.astype(ct)
    with np.errstate(all="ignore"):
        q = np.floor((x / y).astype(ct))
        r = (x - (q * y).astype(ct)).astype(ct)
    np.testing.assert_array_equal(out[0].numpy(), q.astype(npt))
    np.testing.assert_array_equal(out[1].numpy(), r.astype(npt))
    # not Python's fmod-based float modulo: 1.0 % 0.1 is 0.0999... in Python
    assert out[1, 0].item() != pytest.approx(math.fmod(1.0, 0.1), abs=1e-3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_float_modulo_does_not_overflow_in_its_steps(dtype):
    """floor(a / b) * b = -71936 is past float16's range; the result 26688 is not."""
    t = getattr(torch, dtype)
    a, d = torch.full((N,), -45248.0).to(t), torch.full((N,), 35968.0).to(t)
    out = torch.zeros(2, N, dtype=t)
    K.float_divmod(dtype)(a, d, out)
    want = (a.float() - torch.floor(a.float() / d.float()) * d.float()).to(t)
    assert torch.isfinite(out[1]).all() and torch.equal(out[1], want)
    assert torch.equal(out[0], torch.full((N,), -2.0).to(t))


def test_integer_arithmetic_wraps_modulo_2_to_the_bits():
    (x, y, u, w, big), (c8, c32, c64, cu) = run_wrapping()
    xv, yv, uv, wv, bv = x.tolist(), y.tolist(), u.tolist(), w.tolist(), big.tolist()
    w8 = [_wrap([p + q], np.int8)[0] for p, q in zip(xv, yv)]
    exp8 = [_wrap([p * q for p, q in zip(xv, yv)], np.int8), w8,
            [int(s) // 2 for s in w8], _wrap([-p for p in xv], np.int8),
            _wrap([p << 3 for p in xv], np.int8), _wrap([p + 200 for p in xv], np.int8),
            [int(s > p) for s, p in zip(w8, xv)], _wrap([abs(p) for p in xv], np.int8)]
    for row, e in enumerate(exp8):
        np.testing.assert_array_equal(c8[row].numpy(), e, err_msg=f"int8 row {row}")
    np.testing.assert_array_equal(cu[0].numpy(), _wrap([p - 15 for p in uv], np.uint8))
    np.testing.assert_array_equal(cu[1].numpy(), _wrap([p * p for p in uv], np.uint8))
    np.testing.assert_array_equal(c32[0].numpy(), _wrap([p * p for p in wv], np.int32))
    assert c32[1, 0].item() == 0 and c32[1, 1:].tolist() == [1] * (N - 1)  # INT_MAX + 1 wraps
    shl = [_wrap([p << (i - 8)], np.int32)[0] if 0 <= i - 8 < 32 else 0 for i, p in enumerate(wv)]
    shr = [p >> (i - 8) if 0 <= i - 8 < 32 else (-1 if p < 0 else 0) for i, p in enumerate(wv)]
    np.testing.assert_array_equal(c32[2].numpy(), shl)
    np.testing.assert_array_equal(c32[3].numpy(), shr)
    np.testing.assert_array_equal(c64[0].numpy(), _wrap([p * p + p for p in bv], np.int64))
    np.testing.assert_array_equal(c64[1].numpy(), _wrap([p << i for i, p in enumerate(bv)],
                                                        np.int64))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_max_and_min_propagate_nan(dtype):
    a, b = nan_inputs(dtype)
    c = torch.zeros(2, N, dtype=a.dtype)
    K.nan_min_max(dtype)(a, b, c)
    torch.testing.assert_close(c[0], torch.maximum(a, b), rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(c[1], torch.minimum(a, b), rtol=0, atol=0, equal_nan=True)
    assert c[0].isnan().sum().item() == (a.isnan() | b.isnan()).sum().item()


def _reduce_ref(a: np.ndarray, kind: str, acc: np.dtype) -> np.ndarray:
    if a.dtype.kind in "iu":
        x = a.astype(acc)  # the accumulator: abs and sums wrap in it
        with np.errstate(all="ignore"):
            x = np.abs(x) if kind.startswith("abs") else x
            py = {"sum": sum, "abssum": sum, "max": max, "absmax": max, "min": min}[kind]
            return _wrap([py(int(v) for v in row) for row in x], acc)
    x = np.abs(a.astype(np.float64)) if kind.startswith("abs") else a.astype(np.float64)
    return {"sum": np.sum, "abssum": np.sum, "max": np.max, "absmax": np.max,
            "min": np.min}[kind](x, axis=1)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "uint64"])
def test_integer_reductions_are_exact_and_wrap_in_their_type(dtype, kind):
    a = reduce_inputs(dtype, 4, 256)
    b = np.zeros(4, dtype=np.dtype(dtype))
    K.reduction(4, 256, dtype, kind)(a, b)
    np.testing.assert_array_equal(b, _reduce_ref(a, kind, np.dtype(dtype)))


def test_int64_reductions_are_exact_beyond_2_to_the_53():
    a = np.full((2, 64), 2**60 + 1, dtype=np.int64)
    a[1, 0] = 2**62 + 3
    b = np.zeros(2, np.int64)
    K.reduction(2, 64, "int64", "sum")(a, b)
    np.testing.assert_array_equal(b, _wrap([(2**60 + 1) * 64, (2**60 + 1) * 63 + 2**62 + 3],
                                            np.int64))
    K.reduction(2, 64, "int64", "max")(a, b)
    assert b.tolist() == [2**60 + 1, 2**62 + 3]


def test_int8_reduction_into_int32_accumulates_in_int32():
    a = np.full((2, 64), 100, dtype=np.int8)
    a[1] = -128
    b = np.zeros(2, np.int32)
    K.reduction(2, 64, "int8", "sum", dst_dtype="int32")(a, b)
    assert b.tolist() == [6400, -128 * 64]
    K.reduction(2, 64, "int8", "absmax", dst_dtype="int32")(a, b)
    assert b.tolist() == [100, 128]  # abs in int32: no wrap


def test_reduction_without_clear_combines_the_old_values():
    a = reduce_inputs("int16", 4, 64)
    b = np.array([5, -7, 2**15 - 1, -2**15], dtype=np.int16)
    old = b.copy()
    K.reduction(4, 64, "int16", "sum", clear=False)(a, b)
    np.testing.assert_array_equal(b, _wrap([int(o) + sum(int(v) for v in r)
                                            for o, r in zip(old, a)], np.int16))


@pytest.mark.parametrize("kind", ["absmax", "abssum"])
@pytest.mark.parametrize("dtype", list(INT_RANGES))
def test_abs_reductions_without_clear_combine_the_old_value_as_it_is(dtype, kind):
    """max(old, absmax(row)) and old + abssum(row), abs wrapping in the type, old not abs'd:
    an int16 row of -32768 with an old 3 gives 3."""
    lo, hi = INT_RANGES[dtype]
    a = reduce_inputs(dtype, 4, 64)  # rows 0 and 1: the type's minimum and maximum
    a[3] = 1
    old = [3, lo, hi, max(lo, -5)]  # -5 with a row of 1s: 1 and 59, not 5 and 69
    b = np.array(old, dtype=np.dtype(dtype))
    K.reduction(4, 64, dtype, kind, clear=False)(a, b)
    absw = [_wrap([abs(int(v)) for v in row], np.dtype(dtype)).tolist() for row in a]
    if kind == "absmax":
        want = [max([o, *r]) for o, r in zip(old, absw)]
    else:
        want = _wrap([o + sum(r) for o, r in zip(old, absw)], np.dtype(dtype)).tolist()
    assert b.tolist() == want
    if dtype == "int16" and kind == "absmax":
        assert b[0] == 3

@pytest.mark.parametrize("kind", ["max", "min", "absmax", "sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_reductions_propagate_nan_and_keep_infinities(dtype, kind):
    a = reduce_inputs("float", 4, 64).astype(dtype)
    b = np.zeros(4, dtype=dtype)
    K.reduction(4, 64, dtype, kind)(a, b)
    ref = _reduce_ref(a, kind, np.dtype(dtype))
    np.testing.assert_allclose(b, ref, rtol=1e-6, equal_nan=True)
    assert np.isnan(b[1]) and b[0] == ref[0] and np.isinf(b[0])  # a row of -inf


@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "int32", "uint32", "int64"])
@pytest.mark.parametrize("src", ["float32", "float16"])
def test_float_to_int_stores_truncate_saturate_and_send_nan_to_0(src, dst):
    vals = [0.0, -0.9, 0.9, 1.5, -1.5, 126.7, 127.9, -128.9, 200.0, -200.0, 255.5, 256.0, 3e4,
            -3e4, 65504.0, -65504.0, float("inf"), float("-inf"), float("nan"), 1e9, -1e9, 3e9]
    vals = (vals * N)[:N]
    a = torch.tensor(vals, dtype=getattr(torch, src))
    b = torch.zeros(N, dtype=getattr(torch, dst))
    K.float_to_int(src, dst)(a, b)
    lo, hi = INT_RANGES[dst]
    ref = [0 if math.isnan(v) else int(min(max(math.trunc(v) if math.isfinite(v) else v, lo), hi))
           for v in a.double().tolist()]
    assert b.tolist() == ref


def test_mixed_signedness_comparisons_compare_values():
    u = torch.tensor(rng.integers(0, 2**32, N), dtype=torch.uint32)
    s = torch.tensor(rng.integers(-2**31, 2**31, N), dtype=torch.int32)
    u[0], s[0] = 7, -1
    c = torch.zeros(2, N, dtype=torch.int32)
    K.mixed_compare(u, s, c)
    uv, sv = u.tolist(), s.tolist()
    assert c[0].tolist() == [int(p > q) for p, q in zip(uv, sv)]
    assert c[1].tolist() == [int(q < p) for p, q in zip(uv, sv)]


def test_int64_cumsum_is_exact_beyond_2_to_the_53():
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((4,), "int64"), B: T.Tensor((4,), "int64")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((4,), "int64")
            T.copy(A[0], s)
            T.cumsum(s, dim=0)
            T.copy(s, B[0])

    a = np.array([2**60 + 1, 3, 2**61 + 5, 7], np.int64)
    b = np.zeros(4, np.int64)
    k(a, b)
    assert b.tolist() == np.cumsum(a).tolist()


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_fp8_arithmetic_rounds_after_every_operation(dtype):
    import ml_dtypes

    f8 = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[dtype]
    a = np.random.default_rng(2).standard_normal(N).astype(f8)
    b = np.zeros((3, N), f8)
    K.fp8_arith(dtype)(a, b)

    def r(x):  # one fp8 rounding (saturating, as the GPU's __NV_SATFINITE)
        fmax = float(ml_dtypes.finfo(f8).max)
        return np.clip(np.asarray(x, np.float32), -fmax, fmax).astype(f8).astype(np.float32)

    x = a.astype(np.float32)
    np.testing.assert_array_equal(b[0].astype(np.float32), r(r(x * x) + x))
    np.testing.assert_array_equal(b[1].astype(np.float32),
                                  np.maximum(r(x * r(3.0)), r(x - r(0.3))))
    np.testing.assert_array_equal(b[2].astype(np.float32), np.where(r(x * 2) > x, x, -x))


# ---- integer division by zero ------------------------------------------------------------


@tilecraft.jit
@T.prim_func
def divide_unguarded(A: T.Tensor((N,), "int32"), D: T.Tensor((N,), "int32"),
                     B: T.Tensor((N,), "int32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            B[i] = A[i] // D[i]  # the division line


@tilecraft.jit
@T.prim_func
def divide_guarded(A: T.Tensor((N,), "int32"), D: T.Tensor((N,), "int32"),
                   B: T.Tensor((2, N), "int32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            if D[i] != 0:
                B[0, i] = A[i] % D[i]
            B[1, i] = T.if_then_else(D[i] == 0, -1, A[i] / D[i])


def test_integer_division_by_zero_is_tc410_at_its_line():
    a = torch.arange(N, dtype=torch.int32)
    d = torch.ones(N, dtype=torch.int32)
    d[17] = 0
    with pytest.raises(TilecraftError) as err:
        divide_unguarded(a, d, torch.zeros(N, dtype=torch.int32))
    assert err.value.code == "TC410"
    assert err.value.line == _line_of("B[i] = A[i] // D[i]  # the division line")


def test_division_by_zero_under_an_if_or_in_an_unused_branch_is_not_an_error():
    a = torch.arange(N, dtype=torch.int32) - 20
    d = torch.tensor([0, 3, -3, 7] * (N // 4), dtype=torch.int32)
    b = torch.full((2, N), 99, dtype=torch.int32)
    divide_guarded(a, d, b)
    av, dv = a.tolist(), d.tolist()
    assert b[0].tolist() == [p % q if q else 99 for p, q in zip(av, dv)]
    assert b[1].tolist() == [-1 if q == 0 else int(p / q) for p, q in zip(av, dv)]


def _line_of(text: str) -> int:
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return n
    raise AssertionError(text)
