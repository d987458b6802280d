"""6-bit floats from two bit planes (`T.cast_planes`, block instruction `cast_planes`): the
quantized matmul stores float6_e3m2 / e2m3 weights as a uint2 plane (sign, top magnitude bit)
and a uint4 plane (low bits), each in interleaved words, and casts them in one
`tc::fast_cast_float_planes` (its bits for every code: test_fast_casts_host.py). The VM states
the meaning (decode hi * 16 + lo, times 2^scale, convert); the GPU gives the VM's bits; the
qmm kernels print the call, with the fold's scale; other forms are refused at their line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.values import store_cast
from tilecraft.quant.qmm import choose_config, mma_layout, pack_codes, pack_layout
from tilecraft.quant.qmm_kernel import byte_layout, qmm_kernel
from tilecraft.quant.weights import pack_weight


@tilecraft.jit(out_idx=[-1])
def planes_tile(dtype, out_dtype, scale=0, natural=False):
    """One packed (16, 64) tile of `dtype` codes (its two planes' bytes) cast by one warp."""

    @T.prim_func
    def k(H: T.Tensor((1, 256), "uint8"), L: T.Tensor((1, 512), "uint8"),
          Y: T.Tensor((16, 64), out_dtype)):
        with T.Kernel(1, threads=32):
            hb = T.load_global(H, layout=byte_layout(1, 1, 2), offset=[0, 0])
            lb = T.load_global(L, layout=byte_layout(1, 1, 4), offset=[0, 0])
            hv = T.view(hb, dtype="uint2", layout=mma_layout() if natural else pack_layout("uint2"))
            lv = T.view(lb, dtype="uint4", layout=pack_layout("uint4"))
            y = T.cast_planes(hv, lv, dtype, out_dtype, layout=mma_layout(), scale=scale)
            T.store_global(y, Y, offset=[0, 0])

    return k


def _tile(dtype: str, seed: int):
    """(codes, hi plane, lo plane) of one tile: the planes as the quantized matmul packs a
    6-bit float that it stores as planes (pack_codes: float6_e2m3, e1m4, e4m1; e3m2 is in
    bytes since session 24, and its planes are made the same way here)."""
    codes = torch.from_numpy(np.random.default_rng(seed).integers(0, 64, (16, 64))).to(torch.uint8)
    codes[0, :] = torch.arange(64, dtype=torch.uint8)  # every code once
    hi = pack_weight(codes >> 4, "uint2", layout=pack_layout("uint2")).reshape(1, -1)
    lo = pack_weight(codes & 15, "uint4", layout=pack_layout("uint4")).reshape(1, -1)
    packed = pack_codes(codes, "float6_e1m4").reshape(1, -1)
    assert torch.equal(packed, torch.cat([hi, lo], dim=1))  # (the same planes, any 6-bit float)
    return codes, hi.contiguous(), lo.contiguous()


CASES = [("float6_e3m2", "float16", 0), ("float6_e3m2", "float16", -12),
         ("float6_e2m3", "float16", -14), ("float6_e3m2", "bfloat16", 0),
         ("float6_e2m3", "bfloat16", -3)]


@pytest.mark.parametrize("dtype, out, scale", CASES)
def test_the_vm_decodes_the_planes_codes(dtype, out, scale):
    codes, hi, lo = _tile(dtype, 1)
    y = planes_tile(dtype, out, scale)(hi, lo)
    t = dt.resolve(out)
    want = store_cast(t, dt.resolve(dtype).decode(codes.numpy()).astype(np.float64) * 2.0 ** scale)
    assert y.dtype == t.torch_dtype
    np.testing.assert_array_equal(y.view(torch.int16).numpy(),
                                  np.asarray(want).view(np.int16))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out, scale", CASES)
def test_the_gpu_gives_the_vms_bits(dtype, out, scale):
    codes, hi, lo = _tile(dtype, 2)
    kernel = planes_tile(dtype, out, scale)
    want = kernel(hi, lo)
    got = kernel(hi.cuda(), lo.cuda())
    assert "tc::fast_cast_float_planes" in kernel.get_kernel_source()
    assert torch.equal(got.cpu().view(torch.int16), want.view(torch.int16))


def test_planes_in_another_register_order_are_refused_on_the_gpu_at_their_line():
    kernel = planes_tile("float6_e3m2", "float16", natural=True)
    codes, hi, lo = _tile("float6_e3m2", 3)
    kernel(hi, lo)  # (the VM runs any order)
    with pytest.raises(TilecraftError) as info:
        generate_cuda(kernel.func, "sm_90a")
    err = info.value
    assert err.code == "TC502" and "T.cast_planes" in err.span.source_line()
    assert "interleaved words" in err.message


def test_planes_that_do_not_make_the_codes_are_refused():
    @T.prim_func
    def k(H: T.Tensor((1, 256), "uint8"), Y: T.Tensor((16, 64), "float16")):
        with T.Kernel(1, threads=32):
            hb = T.load_global(H, layout=byte_layout(1, 1, 2), offset=[0, 0])
            hv = T.view(hb, dtype="uint2", layout=pack_layout("uint2"))
            y = T.cast_planes(hv, hv, "float6_e3m2", "float16", layout=mma_layout())
            T.store_global(y, Y, offset=[0, 0])

    with pytest.raises(TilecraftError) as info:
        generate_cuda(k, "sm_90a")
    assert "do not make 6-bit codes" in info.value.message
    assert "T.cast_planes" in info.value.span.source_line()


@pytest.mark.parametrize("M, xtype, want", [
    (4096, "float16", "tc::fast_cast_float_planes<1, 4, false, 32, -15>"),
    (4096, "bfloat16", "tc::fast_cast_float_planes<1, 4, true, 32>"),
    (1, "float16", "tc::fast_cast_float_planes<1, 4, false, 32, -15>")])
def test_the_quantized_matmul_casts_6_bit_float_weights_from_their_planes(M, xtype, want):
    """(float6_e1m4, as e2m3; e3m2 is cast from bytes: test_code_bytes.py)"""
    N, K = 256, 1024
    cfg = choose_config(M, N, K, 6, 128, "float6_e1m4")
    if M > 16:
        cfg["fold_scales"] = xtype == "float16"
    kernel = qmm_kernel(M, N, K, "float6_e1m4", xtype, 128, 0, False, False, **cfg)
    src = generate_cuda(kernel.func, "sm_90a").source
    assert want in src and "tc::fast_cast_float<" not in src


def test_a_scale_above_one_is_refused_on_the_gpu_and_a_fraction_at_its_line():
    kernel = planes_tile("float6_e3m2", "float16", 2)
    codes, hi, lo = _tile("float6_e3m2", 4)
    want = store_cast(dt.resolve("float16"), dt.resolve("float6_e3m2").decode(codes.numpy())
                      .astype(np.float64) * 4.0)
    np.testing.assert_array_equal(kernel(hi, lo).view(torch.int16).numpy(),
                                  np.asarray(want).view(np.int16))  # (the VM takes any scale)
    with pytest.raises(TilecraftError) as info:
        generate_cuda(kernel.func, "sm_90a")
    assert info.value.code == "TC502" and "<= s <= 0" in info.value.message
    with pytest.raises(TilecraftError) as info:
        planes_tile("float6_e3m2", "float16", 0.5).func
    assert info.value.code == "TC603" and "an int" in info.value.message
