"""The quantized matmul template compiles through NVRTC for sm_90a and sm_80 without spilling
registers, for the configurations `choose_config` picks (decode with and without split-K and
scales on the products, prefill on wgmma), over weight types of every width class."""

import re

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.quant.qmm import choose_config
from tilecraft.quant.qmm_kernel import qmm_kernel
from tilecraft.runtime import compile_cuda


def _has_nvrtc() -> bool:
    try:
        import cuda.bindings.nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


CASES = [("uint4", 1, 8192, 8192), ("uint1", 16, 4096, 8192), ("uint2", 1, 28672, 8192),
         ("int3", 16, 1024, 4096), ("float8_e4m3", 3, 2048, 4096),
         ("float6_e3m2", 4096, 4096, 4096),
         ("int4", 4096, 4096, 4096), ("uint8", 100, 1024, 1024), ("uint5", 4096, 2048, 4096)]


@pytest.mark.skipif(not _has_nvrtc(), reason="needs NVRTC (cuda-bindings)")
@pytest.mark.parametrize("wtype, M, N, K", CASES, ids=[f"{c[0]}-m{c[1]}" for c in CASES])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_chosen_configuration_compiles_without_spills(wtype, M, N, K, arch):
    from tilecraft.dtypes import resolve

    cfg = choose_config(M, N, K, resolve(wtype).bits, 128, wtype)
    kernel = qmm_kernel(M, N, K, wtype, "float16", 128, 0, False, True, **cfg)
    gen = generate_cuda(kernel.func, arch)
    res = compile_cuda(gen.source, arch, name=gen.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0
    if arch == "sm_90a" and M > 16:  # prefill: the weight tile feeds wgmma from registers
        assert re.search(r"\bwgmma", gen.source)
