"""Bit planes cast at once: the quantized matmul stores 3-, 5- and 6-bit integers as 1-, 2- and
4-bit planes and adds them back (`cast(hi) * 2^s + cast(lo) - T`); before a wgmma that sum prints
as one `tc::fast_cast_planes` (block/select_planes.py; its bits are checked for every code by
test_fast_casts_host.py), at decode (mma.sync) as one cast per plane. What the kernel computes
does not change: the VM runs the instructions as written, and tests/quant compares both paths
with the dequantized reference on the GPU."""

from __future__ import annotations

import re

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.quant.qmm import choose_config, plane_bits
from tilecraft.quant.qmm_kernel import qmm_kernel


def _source(wtype: str, M: int, zero: int = 0, has_zeros: bool = False,
            xtype: str = "float16") -> str:
    N, K = 256, 1024
    cfg = choose_config(M, N, K, resolve(wtype).bits, 128, wtype)
    kernel = qmm_kernel(M, N, K, wtype, xtype, 128, zero, has_zeros, False, **cfg)
    return generate_cuda(kernel.func, "sm_90a").source


@pytest.mark.parametrize("wtype, zero", [("uint3", 4), ("uint5", 0), ("uint6", 32),
                                         ("int3", 0), ("int6", 0)])
def test_a_wgmma_loop_casts_its_planes_at_once(wtype, zero):
    src = _source(wtype, 4096, zero)
    hi, lo = plane_bits(wtype)
    offset = (1 << (resolve(wtype).bits - 1)) if resolve(wtype).kind == "int" else 0
    t = zero + offset
    calls = re.findall(r"tc::fast_cast_planes<(\d), (\d), 0, false, (\d+)(?:, (\d+))?>", src)
    assert calls and all((int(a), int(b)) == (hi, lo) for a, b, _, _ in calls)
    assert all(int(c or 0) == t for _, _, _, c in calls)  # the zero and offset: one subtraction
    assert "inside the plane sum below" in src
    assert not re.search(r"tc::fast_cast_int<[124], ", src)  # no plane cast of its own


def test_bf16_planes_are_cast_at_once_too():
    src = _source("uint5", 4096, 16, xtype="bfloat16")
    assert "tc::fast_cast_planes<4, 1, 0, true, 32, 16>" in src


def test_the_zeros_per_element_stay_outside_the_planes():
    """(asymmetric weights: f16 zeros per group, subtracted after the sum)"""
    src = _source("uint3", 4096, has_zeros=True)
    assert "tc::fast_cast_planes<2, 1, 0, false, 32>" in src


@pytest.mark.parametrize("M", [1, 16])
def test_a_decode_loop_casts_each_plane(M):
    src = _source("uint3", M, 4)
    assert "fast_cast_planes" not in src
    assert re.search(r"tc::fast_cast_int<2, false, false, \d+, 0, true, 1>", src)
