"""qmm_kernel's `step_scales`: each k step's scales and zeros move with its tiles through the
pipeline (transposed, (G, N)) instead of the K slice's every group before the first step. The
results are the same bits; the plan takes it where the zeros made that prologue long."""

import pytest
import torch

import tilecraft.quant as Q
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.options import switches_from_env
from tilecraft.quant import qmm
from tilecraft.quant.qmm_kernel import qmm_kernel
from tilecraft.targets import A100_SXM, H100_SXM


@pytest.mark.parametrize("wtype, M, xtype", [("uint4", 1, torch.float16),
                                             ("int4", 3, torch.float16),
                                             ("uint1", 1, torch.bfloat16),
                                             ("uint5", 2, torch.float16)])
def test_a_k_steps_own_scales_give_the_same_bits(wtype, M, xtype):
    torch.manual_seed(0)
    N, K = 256, 512
    w = torch.randn(N, K) * 0.02
    x = torch.randn(M, K, dtype=xtype)
    qw = Q.quantize(w, wtype, scheme="symmetric" if wtype.startswith("int") else None)
    ref = x.double() @ qw.dequantize().double().T
    a = qmm.quant_matmul(x, qw, config={"step_scales": False})
    b = qmm.quant_matmul(x, qw, config={"step_scales": True})
    assert torch.equal(a, b)
    assert ((b.double() - ref).norm() / ref.norm()).item() < 1e-2


def _plan_takes(wtype, M, N, zeros, target=H100_SXM, switches=()):
    bits = resolve(wtype).bits
    key = qmm.PlanKey(M, N, 8192, wtype, "float16", bits, 128, zero=0, has_zeros=zeros,
                      has_bias=False, codes=False, fold=False, shift=0, config=None,
                      switches=switches, target=target)
    qmm._PLANS.pop(key, None)
    try:
        return qmm._plan(key, None)[3]
    finally:
        qmm._PLANS.pop(key, None)


def test_the_plan_takes_them_where_zeros_made_the_prologue_long():
    assert _plan_takes("uint4", 1, 28672, zeros=True)
    assert not _plan_takes("int4", 1, 28672, zeros=False)  # (symmetric: 0.7-1.7 us slower)
    assert not _plan_takes("uint1", 1, 28672, zeros=True)  # (cp.async: 2-4 us slower)
    assert not _plan_takes("uint4", 1, 8192, zeros=True)  # (split K: a short prologue)
    assert _plan_takes("uint4", 16, 57344, zeros=True)  # (57344: 83.6 -> 76.9 us at M = 16,
    assert not _plan_takes("uint4", 8, 57344, zeros=True)  # 1.6-2.1 us slower at M <= 8)
    assert not _plan_takes("uint4", 1, 28672, zeros=True, target=A100_SXM)  # (no TMA)
    off = switches_from_env({"TILECRAFT_TMA": "0"})
    assert not _plan_takes("uint4", 1, 28672, zeros=True, switches=off)  # (TMA switched off)


def test_a_steps_row_of_scales_rides_the_tma_loads():
    kernel = qmm_kernel(1, 28672, 8192, "uint4", "float16", 128, 0, True, False,
                        **dict(qmm.choose_config(1, 28672, 8192, 4, 128, "uint4"),
                               step_scales=True))
    src = generate_cuda(kernel.func, "sm_90a").source
    assert "copy_async_bulk(S_s_" in src and "copy_async_bulk(Z_s_" in src
    assert "load_global(S," not in src  # (no prologue)


def test_step_scales_need_the_scales_on_the_products():
    with pytest.raises(Exception, match="step_scales"):
        qmm_kernel(4096, 8192, 8192, "uint4", "float16", 128, 0, True, False,
                   **dict(qmm.choose_config(4096, 8192, 8192, 4, 128, "uint4"),
                          step_scales=True))


@pytest.mark.gpu
@pytest.mark.parametrize("wtype", ["uint1", "uint3", "int4", "uint4", "uint5", "uint8"])
def test_on_the_gpu_a_k_steps_own_scales_give_the_same_bits(wtype):
    """(Its check ran on the H200 as build/s26_ss.py in session 26: 198 cases, 0 differing.)"""
    torch.manual_seed(0)
    w = torch.randn(1024, 2048, device="cuda") * 0.02
    qw = Q.quantize(w, wtype, scheme="symmetric" if wtype.startswith("int") else None)
    for M, xtype in ((1, torch.float16), (5, torch.bfloat16), (16, torch.float16)):
        x = torch.randn(M, 2048, dtype=xtype, device="cuda")
        a = qmm.quant_matmul(x, qw, config={"step_scales": False})
        b = qmm.quant_matmul(x, qw, config={"step_scales": True})
        assert torch.equal(a, b), (M, xtype)


def test_calls_share_converted_scales_only_when_laid_out_alike(monkeypatch):
    """The per-weight call cache shares one converted copy of the scales between calls; one
    taking them transposed must not hand them to one that does not, even where (N, G) and
    (G, N) are the same shape (N = G: K split never here, so M = 1 takes step_scales)."""
    monkeypatch.setattr(qmm, "_splits", lambda *a: False)
    torch.manual_seed(0)
    N, K = 64, 8192
    qw = Q.quantize(torch.randn(N, K) * 0.02, "uint4")
    qw.zeros.add_(0.5)  # (not whole: zeros as values, on the products at M = 1)
    for M in (1, 20):
        x = torch.randn(M, K, dtype=torch.float16)
        ref = x.double() @ qw.dequantize().double().T
        y = qmm.quant_matmul(x, qw)
        assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2, M
    taken = {k.M: v[3] for k, v in qmm._PLANS.items()
             if (k.N, k.K) == (N, K) and k.config is None}
    assert taken[1] and not taken[20]  # (both layouts were in play)
