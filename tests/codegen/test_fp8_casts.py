"""Conversions between float8_e4m3 and float8_e5m2 compile (they failed inside NVRTC) and give
the interpreter's codes for all 256 inputs: round to nearest even, saturation to +-max
(+-inf too), NaN -> 0x7F, -0 kept."""

import ml_dtypes
import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.dtypes import resolve

PAIRS = [("float8_e4m3", "float8_e5m2"), ("float8_e5m2", "float8_e4m3")]


@tilecraft.jit
def convert(src, dst, n=256):
    """B = A through a memory-to-memory T.copy, C = T.cast(A) in a T.Parallel expression."""

    @T.prim_func
    def k(A: T.Tensor((n,), src), B: T.Tensor((n,), dst), C: T.Tensor((n,), dst)):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A[0:n], B[0:n])
            f = T.alloc_fragment((n,), dst)
            for i in T.Parallel(n):
                f[i] = T.cast(A[i], dst)
            T.copy(f, C[0:n])

    return k


def _all_codes(dtype: str) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).view(resolve(dtype).np_dtype)


def _reference(src: str, dst: str) -> np.ndarray:
    """The codes of every `src` value in `dst`, by ml_dtypes' round-to-nearest-even after
    clamping to dst's range (the saturating rule), NaN -> 0x7F."""
    x = _all_codes(src).astype(np.float64)
    hi = float(ml_dtypes.finfo(resolve(dst).np_dtype).max)
    codes = np.clip(x, -hi, hi).astype(resolve(dst).np_dtype).view(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), codes)


@pytest.mark.parametrize("src,dst", PAIRS)
def test_fp8_to_fp8_on_the_interpreter_rounds_and_saturates(src, dst):
    a = _all_codes(src)
    b, c = (np.zeros(256, resolve(dst).np_dtype) for _ in range(2))
    convert(src, dst)(a, b, c)
    want = _reference(src, dst)
    assert np.array_equal(b.view(np.uint8), want)
    assert np.array_equal(c.view(np.uint8), want)
    if src == "float8_e5m2":  # +-inf and +-57344 saturate to +-448, NaN -> 0x7F
        assert want[0x7C] == 0x7E and want[0xFC] == 0xFE and want[0x7B] == 0x7E
        assert want[0x7D] == 0x7F and want[0xFF] == 0x7F


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("src,dst", PAIRS)
def test_fp8_to_fp8_compiles(src, dst, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    kernel = tilecraft.compile(convert.factory(src, dst), arch=arch)
    assert kernel.resources.spill_stores == 0


@pytest.mark.gpu
@pytest.mark.parametrize("src,dst", PAIRS)
def test_fp8_to_fp8_on_the_gpu_matches_the_interpreter_bit_for_bit(src, dst):
    import torch

    a = _all_codes(src)
    b, c = (np.zeros(256, resolve(dst).np_dtype) for _ in range(2))
    convert(src, dst)(a, b, c)
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).cuda()
    ga = codes.view(resolve(src).torch_dtype)
    gb, gc = (torch.zeros(256, dtype=torch.uint8, device="cuda").view(resolve(dst).torch_dtype)
              for _ in range(2))
    convert(src, dst)(ga, gb, gc)
    for got, want in ((gb, b), (gc, c)):
        assert np.array_equal(got.view(torch.uint8).cpu().numpy(), want.view(np.uint8))
