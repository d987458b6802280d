"""The quantized matmul checked element by element (tests/quant/campaign.py's bound): what the
campaign found wrong (session 28) and a slice of the campaign itself, on the interpreter and
(marked gpu) on the GPU."""

import dataclasses

import pytest
import torch

import tilecraft.quant as quant
import tilecraft.quant.qmm as qmm

from .campaign import check, draw, run
from .helpers import error_here


def _weight(N, K, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(N, K, generator=gen) * 0.05).to(device)


def _assert_within(y, x, qw, bias=None):
    status, detail = check(y, x, qw, bias)
    assert status == "pass", detail


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype, scheme", [("uint4", "asymmetric"), ("int8", "symmetric"),
                                           ("float4_e2m1", "symmetric"), ("uint1", "asymmetric")])
def test_one_scale_a_channel_with_k_split_takes_its_scale_at_each_slice_end(dtype, scheme,
                                                                            device):
    # (the kernel applied a group's scale when the group's last k step passed; a slice of K
    # split under one group never saw it: every output was 0)
    N, K = (64, 4096) if device == "cpu" else (4096, 8192)
    qw = quant.quantize(_weight(N, K, device=device), dtype, group_size=None, scheme=scheme)
    for M in (1, 9, 16):
        assert qmm.choose_config(M, N, K, qw.bits, K, dtype)["split"] > 1  # (what is tested)
        x = torch.randn(M, K, dtype=torch.float16, device=device)
        _assert_within(quant.matmul(x, qw), x, qw)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("M", [1, 9, 100])
def test_bf16_scales_below_f16s_normal_range_meet_f16_activations_exactly(M, device):
    # float8_e5m2's scales (absmax / 57344) are f16 subnormals: converted as they were, 1-2%
    # off; moved by a power of two into f16's normal range, the products are exact again
    w = _weight(128, 512, seed=1, device=device)
    w[3, :128] = 0.0  # (an all-zero group: its scale is the weight's smallest, not 1)
    qw = quant.quantize(w, "float8_e5m2", group_size=128, scale_dtype="bfloat16")
    assert qw.scales.float().abs().min() < 2.0 ** -14
    assert qmm.scale_shift(qw, "float16") > 0 and qmm.scale_shift(qw, "bfloat16") == 0
    x = torch.randn(M, 512, dtype=torch.float16, device=device)
    _assert_within(quant.matmul(x, qw), x, qw)


def test_bf16_scales_in_f16s_range_need_no_shift():
    qw = quant.quantize(_weight(64, 256), "int4", group_size=128, scale_dtype="bfloat16")
    assert qmm.scale_shift(qw, "float16") == 0


def test_bf16_scales_too_wide_for_f16_activations_are_refused():
    qw = quant.quantize(_weight(64, 256), "int4", group_size=128, scale_dtype="bfloat16")
    scales = qw.scales.clone()
    scales[0, 0] = 2.0 ** -40  # (2^34 below the others: no shift puts both in f16's range)
    qw = dataclasses.replace(qw, scales=scales)
    x = torch.randn(2, 256, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "bfloat16 scales" in str(err) and "bfloat16 activations" in str(err)
    _assert_within(quant.matmul(x.bfloat16(), qw), x.bfloat16(), qw)  # (bf16 x: no conversion)


@pytest.mark.parametrize("act", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_the_bound_catches_one_wrong_group_in_a_long_row(act):
    qw = quant.quantize(_weight(64, 4096, seed=2), "uint4", group_size=128)
    x = torch.randn(5, 4096, dtype=act)
    y = quant.matmul(x, qw)
    _assert_within(y, x, qw)
    scales = qw.scales.clone()
    scales[7, 2] *= 1.5  # one group of 128 in a row of 4096 (a neighbour's scale, say)
    status, detail = check(y, x, dataclasses.replace(qw, scales=scales), None)
    assert status == "mismatch" and "worst (m=" in detail and "n=7)" in detail


def test_the_bound_catches_a_missing_slice():
    qw = quant.quantize(_weight(64, 4096, seed=3), "uint4", group_size=None)
    x = torch.randn(16, 4096, dtype=torch.bfloat16)
    D = qw.dequantize().double()
    y = (x[:, 512:].double() @ D[:, 512:].T).to(x.dtype)  # (K's first slice of 8 left out)
    assert check(y, x, qw, None)[0] == "mismatch"


def test_a_scale_that_is_not_finite_is_refused_not_an_internal_error():
    qw = quant.quantize(_weight(64, 256), "int4", group_size=128, scale_dtype="bfloat16")
    scales = qw.scales.clone()
    scales[1, 1] = float("inf")
    qw = dataclasses.replace(qw, scales=scales)
    x = torch.randn(2, 256, dtype=torch.float16)
    err = error_here(lambda: quant.matmul(x, qw))  # ERR
    assert "not finite" in str(err)


def test_a_callers_scale_shift_never_reaches_a_kernel_whose_scales_are_not_shifted():
    qw = quant.quantize(_weight(64, 256, seed=4), "uint4", group_size=128)
    x = torch.randn(3, 256, dtype=torch.float16)
    _assert_within(qmm.quant_matmul(x, qw, config={"scale_shift": 5}), x, qw)


@pytest.mark.parametrize("seed", [*range(0, 20), 61, 110, 133, 141, 164, 221])
def test_a_slice_of_the_campaign_on_the_interpreter(seed):
    # (61 and 133 take a scale shift; 110, 141, 164 and 221 split K under one scale a channel:
    # 164 and 221 passed the first bound with every output 0, session 28's review)
    case = draw(seed, "cpu")
    status, detail = run(case, "cpu")
    assert status == "pass", f"{case}: {detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [101, 122, 179, 502, 551, 557])
def test_the_campaigns_first_gpu_mismatches_pass(seed):
    case = draw(seed, "cuda")
    status, detail = run(case, "cuda")
    assert status == "pass", f"{case}: {detail}"
