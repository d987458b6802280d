"""Float32 math functions on the GPU stay within a few ulp of the interpreter's (numpy's,
correctly rounded or nearly): docs/language.md "Semantics". `T.sigmoid` is one hardware
reciprocal of `1 + exp(-x)` (include/tilecraft/math.cuh: no IEEE division, whose slow path
serialised RMSNorm+SiLU), so its results below 2^-126 (x < -87.3) may be flushed to zero."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T

N = 4096
TINY = np.float32(2.0 ** -126)

# (function, inputs, max ulp of the interpreter's result)
CASES = {
    "sigmoid": (T.sigmoid, np.linspace(-100, 100, N, dtype=np.float32), 4),
    "exp": (T.exp, np.linspace(-87, 88, N, dtype=np.float32), 2),
    "log": (T.log, np.geomspace(1e-30, 1e30, N).astype(np.float32), 2),
    "tanh": (T.tanh, np.linspace(-12, 12, N, dtype=np.float32), 2),
    "sqrt": (T.sqrt, np.geomspace(1e-30, 1e30, N).astype(np.float32), 1),
    "rsqrt": (T.rsqrt, np.geomspace(1e-30, 1e30, N).astype(np.float32), 2),
}


def apply(fn):
    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // 256, threads=128) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = fn(X[bx * 256 + i])

    return k


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of float32 ulp at `want` (normal numbers)."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_interpreter_computes_in_float32(name):
    fn, x, _ = CASES[name]
    y = torch.zeros(N)
    apply(fn)(torch.from_numpy(x), y)
    assert y.dtype == torch.float32 and np.isfinite(y.numpy()).all()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_math_is_within_a_few_ulp_of_the_interpreter(name):
    fn, x, bound = CASES[name]
    want = torch.zeros(N)
    apply(fn)(torch.from_numpy(x), want)
    got = torch.full((N,), float("nan"), device="cuda")
    apply(fn)(torch.from_numpy(x).cuda(), got)
    got, want = got.cpu().numpy(), want.numpy()
    normal = np.abs(want) >= TINY
    assert ulps(got[normal], want[normal]).max() <= bound
    assert (np.abs(got[~normal] - want[~normal]) <= TINY).all()  # flushed or subnormal
