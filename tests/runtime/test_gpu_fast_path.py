"""The launch fast path on a real GPU (marked `gpu`; skipped without one): a kernel called many
times with new tensors of a known signature computes on each call's own tensors (never on a
stale pointer or tensor map), and still refuses bad calls after good ones."""

import sys
from pathlib import Path

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.runtime import RuntimeKernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402

pytestmark = pytest.mark.gpu


def fp16(*shape):
    return torch.randn(*shape, dtype=torch.float16, device="cuda")


def test_a_cached_gemm_is_right_on_every_call_with_new_tensors():
    kernel = gemm.matmul(256, 256, 256)
    plain_source = kernel._cuda_kernel()
    plain = RuntimeKernel(plain_source.compiled, plain_source.params, plain_source.launch_spec,
                          plain_source.source)  # C passed in
    pairs = [(fp16(256, 256), fp16(256, 256)) for _ in range(8)]
    outs, passed = [], []
    for i in range(400):  # back to back, no sync: each call's pointers and tensor maps
        a, b = pairs[i % len(pairs)]
        outs.append((a, b, kernel(a, b)))
        c = torch.full((256, 256), float("nan"), dtype=torch.float16, device="cuda")
        plain(b, a, c)
        passed.append((b, a, c))
    torch.cuda.synchronize()
    assert plain.fast_call is not None and kernel._fast is not None  # the fast path ran
    for a, b, c in outs[-16:] + passed[-16:]:
        torch.testing.assert_close(c.float(), gemm.reference(a, b), atol=0.1, rtol=1e-2)
    assert len({c.data_ptr() for _, _, c in outs[-8:]}) > 1  # outputs are new tensors


def axpy_kernel():
    """Y += alpha * X over a dynamic length m (a float32 scalar and a dim-bound one)."""
    m = T.dynamic("m")

    @T.prim_func
    def axpy(X: T.Tensor((m,), "float32"), Y: T.Tensor((m,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < m:
                    Y[bx * 128 + i] = Y[bx * 128 + i] + alpha * X[bx * 128 + i]

    return tilecraft.compile(axpy, target="cuda")


def test_a_dynamic_kernel_with_a_scalar_is_right_for_every_size():
    kernel = axpy_kernel()
    for n in (1000, 1000, 1000, 77, 4096, 77, 1000):
        for alpha in (0.5, -2.0):
            x = torch.randn(n, device="cuda")
            y = torch.randn(n, device="cuda")
            expected = y + alpha * x
            kernel(x, y, alpha)
            torch.testing.assert_close(y, expected)


def test_bad_calls_after_good_ones_are_refused_on_the_gpu():
    kernel = gemm.matmul(256, 256, 256)
    a, b = fp16(256, 256), fp16(256, 256)
    for _ in range(3):
        kernel(a, b)
    bad = [
        ((fp16(256, 128), b), "TC302"),
        ((a.float(), b), "TC303"),
        ((a.cpu(), b), "TC304"),
        ((fp16(256, 256).t(), b), "TC306"),
        ((a,), "TC301"),
    ]
    for args, code in bad:
        with pytest.raises(tilecraft.TilecraftError) as info:
            kernel(*args)
        assert info.value.code == code
    torch.testing.assert_close(kernel(a, b).float(), gemm.reference(a, b), atol=0.1,
                               rtol=1e-2)
