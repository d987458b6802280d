"""The examples in examples/ against their torch references: GEMMs, norms, softmax, element-wise,
and each example script run end to end.

Inputs are fresh random tensors each run; outputs are NaN-poisoned before the kernel runs; the
check is relative error (1e-2 for fp16 data, tighter for fp32) and no NaN.
"""

import re
import runpy

import elementwise_add as add_example
import gemm as gemm_example
import layernorm as layernorm_example
import pytest
import rmsnorm_silu as rms_example
import softmax as softmax_example
import splitk_gemm as splitk_example
import torch

from .conftest import EXAMPLES
from .harness import assert_close, call_poisoned

FP16_TOL = 1e-2
FP32_TOL = 1e-5


@pytest.mark.parametrize("relu", [False, True], ids=["gemm", "gemm_relu"])
@pytest.mark.parametrize(
    "M, N, K, block_M, block_N, block_K",
    [
        (256, 256, 128, 128, 128, 32),
        (200, 136, 72, 64, 64, 32),  # no dimension a multiple of its tile
    ],
)
def test_gemm_matches_torch(device, M, N, K, block_M, block_N, block_K, relu):
    kernel = gemm_example.matmul(M, N, K, block_M, block_N, block_K, relu=relu)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = call_poisoned(kernel, a, b)
    assert c.dtype == torch.float16
    assert_close(c, gemm_example.reference(a, b, relu), FP16_TOL)
    if relu:
        assert (c >= 0).all()


@pytest.mark.parametrize("M, N, K, split_k", [(128, 128, 512, 4), (100, 72, 200, 3)])
def test_splitk_gemm_accumulates_into_c(device, M, N, K, split_k):
    kernel = splitk_example.splitk_gemm(M, N, K, split_k=split_k)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c0 = torch.randn(M, N, dtype=torch.float32, device=device)
    c = c0.clone()
    kernel(a, b, c)  # C += A @ B: every split adds its partial product atomically
    assert_close(c, splitk_example.reference(a, b, c0), FP32_TOL)


def test_elementwise_add_one_kernel_serves_several_sizes(device):
    kernel = add_example.elementwise_add()
    func = kernel.func
    for m in (1000, 5555, 1024):
        a = torch.randn(m, device=device)
        b = torch.randn(m, device=device)
        c = call_poisoned(kernel, a, b)
        assert c.shape == (m,)
        assert_close(c, add_example.reference(a, b), FP32_TOL)
        c = kernel(a, b)  # out_idx allocates the output at the call's size
        assert_close(c, add_example.reference(a, b), FP32_TOL)
    assert add_example.elementwise_add() is kernel and kernel.func is func  # prepared once


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M, C", [(100, 160), (64, 320), (37, 96), (16, 1024)])
def test_rmsnorm_silu_matches_torch(device, M, C, dtype):
    kernel = rms_example.rmsnorm_silu(M, C, dtype=dtype)
    tdtype = getattr(torch, dtype)
    x = (2 * torch.randn(M, C, device=device)).to(tdtype)
    gamma = (1 + 0.1 * torch.randn(C, device=device)).to(tdtype)
    y = call_poisoned(kernel, x, gamma)
    assert_close(y, rms_example.reference(x, gamma), FP16_TOL)


def test_rmsnorm_silu_sums_squares_in_fp32(device):
    """Values whose squares overflow fp16 (300^2 * 320 > 65504) still normalize."""
    M, C = 32, 320
    kernel = rms_example.rmsnorm_silu(M, C)
    x = (300 * torch.randn(M, C, device=device)).clamp(-6e4, 6e4).half()
    gamma = torch.ones(C, dtype=torch.float16, device=device)
    y = call_poisoned(kernel, x, gamma)
    assert torch.isfinite(y).all()
    assert_close(y, rms_example.reference(x, gamma), FP16_TOL)


@pytest.mark.parametrize("M, N", [(64, 512), (50, 300), (8, 64)])
def test_softmax_matches_torch(device, M, N):
    kernel = softmax_example.softmax(M, N)
    x = (3 * torch.randn(M, N, device=device)).half()
    y = call_poisoned(kernel, x)
    assert_close(y, softmax_example.reference(x), FP16_TOL)
    torch.testing.assert_close(y.float().sum(-1), torch.ones(M, device=device), atol=1e-2, rtol=0)


@pytest.mark.parametrize("M, N", [(64, 256), (30, 96)])
def test_layernorm_matches_torch(device, M, N):
    kernel = layernorm_example.layernorm(M, N)
    x = (1 + torch.randn(M, N, device=device)).half()
    weight = (1 + 0.1 * torch.randn(N, device=device)).half()
    bias = (0.1 * torch.randn(N, device=device)).half()
    y = call_poisoned(kernel, x, weight, bias)
    assert_close(y, layernorm_example.reference(x, weight, bias), FP16_TOL)


def test_demo_runs_gemm_and_flash_attention(device, capsys):
    import demo

    errors = demo.main(device)
    assert set(errors) == {"gemm", "flash_attention"}
    assert all(e < FP16_TOL for e in errors.values()), errors
    assert "rel err" in capsys.readouterr().out


SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_script_runs_and_reports_small_error(script, capsys):
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    errors = [float(x) for x in re.findall(r"rel err ([0-9.e+-]+|nan)", out)]
    assert errors, f"{script} printed no relative error:\n{out}"
    assert all(e < FP16_TOL for e in errors), out


def test_rmsnorm_silu_refuses_a_chunk_that_does_not_divide_the_row():
    """A 96-wide chunk of 160 channels would leave 64 of them out of both passes."""
    with pytest.raises(ValueError, match="BLOCK_C = 96 does not divide C = 160"):
        rms_example.rmsnorm_silu(100, 160, BLOCK_C=96)
