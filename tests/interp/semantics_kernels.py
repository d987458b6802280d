"""Kernels that pin down the language's arithmetic semantics (docs/language.md, "Semantics").

The interpreter tests (tests/interp/test_semantics.py) check them against Python/numpy
references; the GPU tests (tests/codegen/test_semantics_compile.py) run the same kernels on the
GPU and compare with the interpreter bit for bit."""

import numpy as np
import torch

import tilecraft
import tilecraft.language as T

N = 64


@tilecraft.jit
@T.prim_func
def divmod_negative(A: T.Tensor((N,), "int32"), B: T.Tensor((5, 2 * N), "int32"), s: T.int32):
    """Floor // and % of let-bound values, a scalar parameter, loop variables and block indices
    combined with negative constants."""
    with T.Kernel(2, threads=64) as bx:
        for i in T.Parallel(N):
            v = A[i] - 40
            B[0, bx * N + i] = v // 7 + (bx - 1) // 3
            B[1, bx * N + i] = v % 7 + s % 5 + (bx - 3) % 4
            B[2, bx * N + i] = i // 4 + (i - 32) % 5 + (i - 40) // 6
            B[3, bx * N + i] = v // -3 + v % -3 + s // (i - 32 + 2 * N)
        for k in T.serial(-3, 3):
            B[4, k + 3 + bx * 6] = k // 2 * 10 + k % 2 + s // 4


@tilecraft.jit
@T.prim_func
def int_division(A: T.Tensor((N,), "int64"), D: T.Tensor((N,), "int64"),
                 B: T.Tensor((3, N), "int64"), X: T.Tensor((N,), "int8"),
                 Y: T.Tensor((N,), "int8"), C: T.Tensor((3, N), "int8")):
    """`/` truncates, `//` floors, `%` is floor modulo, exactly in int64 and wrapping in int8."""
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            B[0, i] = A[i] / D[i]
            B[1, i] = A[i] // D[i]
            B[2, i] = A[i] % D[i]
            C[0, i] = X[i] / Y[i]
            C[1, i] = X[i] // Y[i]
            C[2, i] = X[i] % Y[i]


def float_divmod(dtype):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), D: T.Tensor((N,), dtype), B: T.Tensor((2, N), dtype)):
        """`//` is floor(a / b), `%` is a - floor(a / b) * b, each step rounded in the dtype."""
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[0, i] = A[i] // D[i]
                B[1, i] = A[i] % D[i]

    return k


@tilecraft.jit
@T.prim_func
def wrapping(X: T.Tensor((N,), "int8"), Y: T.Tensor((N,), "int8"), U: T.Tensor((N,), "uint8"),
             W: T.Tensor((N,), "int32"), L: T.Tensor((N,), "int64"),
             C8: T.Tensor((8, N), "int8"), C32: T.Tensor((4, N), "int32"),
             C64: T.Tensor((2, N), "int64"), CU: T.Tensor((2, N), "uint8")):
    """Integer arithmetic wraps modulo 2^bits of the result type (intermediate results too)."""
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            C8[0, i] = X[i] * Y[i]
            C8[1, i] = X[i] + Y[i]
            C8[2, i] = (X[i] + Y[i]) // 2  # the int8 sum wraps before the division
            C8[3, i] = -X[i]
            C8[4, i] = X[i] << 3
            C8[5, i] = X[i] + 100 + 100  # a constant takes X's type; 200 would not fit
            C8[6, i] = T.if_then_else(X[i] + Y[i] > X[i], 1, 0)
            C8[7, i] = T.abs(X[i])
            CU[0, i] = U[i] - 15
            CU[1, i] = U[i] * U[i]
            C32[0, i] = W[i] * W[i]
            C32[1, i] = T.if_then_else(W[i] + 1 > W[i], 1, 0)  # false for INT_MAX
            C32[2, i] = W[i] << (i - 8)  # counts outside [0, 32): 0
            C32[3, i] = W[i] >> (i - 8)  # ... and the sign
            C64[0, i] = L[i] * L[i] + L[i]
            C64[1, i] = L[i] << i


def nan_min_max(dtype):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((2, N), dtype)):
        """T.max / T.min propagate NaN from either operand."""
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                C[0, i] = T.max(A[i], B[i])
                C[1, i] = T.min(A[i], B[i])

    return k


def reduction(rows, cols, dtype, kind, dst_dtype=None, clear=True, threads=128):
    """`T.reduce_<kind>` of a (rows, cols) tile into (rows,); with clear=False the old values
    of B are combined in."""
    dd = dst_dtype or dtype

    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((rows, cols), dtype), B: T.Tensor((rows,), dd)):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((rows, cols), dtype)
            r = T.alloc_fragment((rows,), dd)
            T.copy(A[0, 0], x)
            T.copy(B[0], r)
            getattr(T, "reduce_" + kind)(x, r, dim=1, clear=clear)
            T.copy(r, B[0])

    return k


def float_to_int(src, dst):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), src), B: T.Tensor((N,), dst)):
        """Float -> int conversions truncate, saturate and take NaN to 0."""
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[i] = A[i]

    return k


@tilecraft.jit
@T.prim_func
def mixed_compare(U: T.Tensor((N,), "uint32"), S: T.Tensor((N,), "int32"),
                  C: T.Tensor((2, N), "int32")):
    """Comparisons of mixed integer types compare values (uint32 7 > int32 -1)."""
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            C[0, i] = T.if_then_else(U[i] > S[i], 1, 0)
            C[1, i] = T.if_then_else(S[i] < U[i], 1, 0)


def fp8_arith(dtype):
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((3, N), dtype)):
        """fp8 arithmetic computes in float and rounds to fp8 after every operation."""
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[0, i] = A[i] * A[i] + A[i]
                B[1, i] = T.max(A[i] * 3, A[i] - 0.3)
                B[2, i] = T.if_then_else(A[i] * 2 > A[i], A[i], -A[i])

    return k


# ---- inputs -------------------------------------------------------------------------------


def _wrapping_inputs():
    rng = np.random.default_rng(7)  # the same inputs on every call (CPU and GPU runs)
    x = torch.tensor(rng.integers(-128, 128, N), dtype=torch.int8)
    y = torch.tensor(rng.integers(-128, 128, N), dtype=torch.int8)
    x[:3] = torch.tensor([127, -128, 100], dtype=torch.int8)
    y[:3] = torch.tensor([1, -1, 100], dtype=torch.int8)
    u = torch.tensor(rng.integers(0, 256, N), dtype=torch.uint8)
    w = torch.tensor(rng.integers(-2**31, 2**31, N), dtype=torch.int32)
    w[:2] = torch.tensor([2**31 - 1, -2**31], dtype=torch.int32)
    big = torch.tensor(rng.integers(-2**62, 2**62, N), dtype=torch.int64)
    return x, y, u, w, big


def run_wrapping(device="cpu"):
    """Run `wrapping` on fixed inputs on `device`: (inputs, outputs)."""
    x, y, u, w, big = (t.to(device) for t in _wrapping_inputs())
    outs = [torch.zeros(8, N, dtype=torch.int8, device=device),
            torch.zeros(4, N, dtype=torch.int32, device=device),
            torch.zeros(2, N, dtype=torch.int64, device=device),
            torch.zeros(2, N, dtype=torch.uint8, device=device)]
    wrapping(x, y, u, w, big, *outs)
    return (x, y, u, w, big), outs


def nan_inputs(dtype, device="cpu"):
    """Random pairs with NaN on either side, on both, and +-inf."""
    t = getattr(torch, dtype)
    g = torch.Generator().manual_seed(11)
    a = torch.randn(N, dtype=torch.float64, generator=g)
    b = torch.randn(N, dtype=torch.float64, generator=g)
    a[::4] = float("nan")
    b[1::4] = float("nan")
    a[2::8] = b[2::8] = float("nan")
    a[5], b[5] = float("inf"), float("-inf")
    return a.to(t).to(device), b.to(t).to(device)


INT_RANGES = {"int8": (-128, 127), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1), "uint8": (0, 255), "uint16": (0, 2**16 - 1),
              "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}


def reduce_inputs(dtype, rows, cols, seed=1):
    """Values that stress a reduction: the type's extremes, for floats NaN and +-inf rows."""
    g = np.random.default_rng(seed)
    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]
        a = g.integers(lo, hi, (rows, cols), dtype=np.dtype(dtype), endpoint=True)
        a[0, :] = lo  # a row of minimums: max is the minimum (identity must not leak)
        a[1, :] = hi
        return a
    a = g.standard_normal((rows, cols)).astype(np.float32)
    a[0, :] = -np.inf
    a[1, 3] = np.nan
    return a
