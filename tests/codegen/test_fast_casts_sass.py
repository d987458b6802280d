"""Fast register casts are really used (no GPU: NVRTC and cuobjdump): a `cast` of uint4 or uint8
codes to float16 costs at most 2 SASS instructions per converted element (measured as the
difference between kernels converting n and 2n elements per thread, loads and stores included)
and uses PRMT (and LOP3 for uint4), on sm_80 and sm_90a, without local memory; selection plans
the expected pairs and leaves the others to the element-wise cast; a TileLang dequantization
(T.cast of a uint4/uint8 fragment element in T.Parallel) compiles to the same calls."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.block.select_cast import plan_for
from tilecraft.targets import A100_SXM, H100_SXM

from .fast_cast_programs import FLOATS, INTS, cast_program
from .sass import cuobjdump, sass

ARCHS = ["sm_80", "sm_90a"]


@pytest.mark.parametrize("src,dst,kind", [
    ("uint8", "float16", "prmt"), ("int8", "bfloat16", "prmt"),
    ("uint4", "float16", "lop3"), ("int4", "bfloat16", "lop3"),
    ("uint1", "float16", "lop3"), ("int2", "bfloat16", "lop3"), ("uint3", "float16", "field"),
    ("int6", "bfloat16", "field"), ("uint7", "float16", "field"),
    ("float8_e4m3", "float16", "float"), ("float8_e5m2", "float16", "float"),
    ("float6_e3m2", "bfloat16", "float"), ("float4_e2m1", "float16", "float"),
    ("float7_e5m1", "bfloat16", "float"),
])
def test_the_fast_plan_is_chosen_for_low_precision_to_16_bit_floats(src, dst, kind):
    for target in (A100_SXM, H100_SXM):
        plan = plan_for(dt.resolve(src), dt.resolve(dst), 8, target)
        hw = target is H100_SXM and (src, dst) == ("float8_e4m3", "float16")  # sm_89+: cvt
        assert plan is not None and plan.kind == ("cvt" if hw else kind)
        assert plan.func.startswith("tc::fast_cast_") and plan.func.endswith(
            "<8>" if hw else ", 8>")


@pytest.mark.parametrize("src,dst", [
    ("uint4", "float32"), ("float8_e4m3", "float32"), ("int16", "float16"),
    ("float16", "bfloat16"), ("float7_e5m1", "float16"), ("float8_e6m1", "float16"),
    ("uint8", "int32"), ("bool", "float16"),
])
def test_other_pairs_keep_the_element_wise_cast(src, dst):
    assert plan_for(dt.resolve(src), dt.resolve(dst), 8, H100_SXM) is None


def _compiled(src: str, dst: str, n: int, arch: str):
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.runtime import compile_cuda

    gen = generate_block(cast_program(src, dst, n), arch)
    return gen.source, compile_cuda(gen.source, arch, name=gen.name)


def _ops(cubin: bytes) -> list[str]:
    return [re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", ln).group(1) for ln in sass(cubin)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("src,tricks", [("uint4", {"LOP3", "PRMT"}), ("uint8", {"PRMT"})])
def test_uint4_and_uint8_to_f16_take_at_most_two_instructions_per_element(src, tricks, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    if cuobjdump() is None:
        pytest.skip("cuobjdump is not installed (pip test extras)")
    n = 32
    counts = {}
    for m in (n, 2 * n):
        source, compiled = _compiled(src, "float16", m, arch)
        assert f"tc::fast_cast_int<{dt.resolve(src).bits}, false, false, {m}>(" in source
        assert "tc::cast<" not in source
        ops = _ops(compiled.cubin)
        assert tricks <= set(ops) and not {"LDL", "STL"} & set(ops)
        assert compiled.resources.spill_stores == 0
        counts[m] = Counter(ops)
    per_element = (sum(counts[2 * n].values()) - sum(counts[n].values())) / n
    assert per_element <= 2, (per_element, counts[2 * n])
    # the conversions themselves: 1 (uint8) or 13/8 (uint4) per element
    work = ("PRMT", "LOP3", "HADD2", "HFMA2", "SHF")
    convert = sum(counts[2 * n][op] - counts[n][op] for op in work) / n
    assert convert <= (1.0 if src == "uint8" else 1.625), counts[2 * n]


def _dequant(src: str):
    @T.prim_func
    def k(W: T.Tensor((16, 64), src), S: T.Tensor((64,), "float16"),
          Y: T.Tensor((16, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            ws = T.alloc_shared((16, 64), src)
            wf = T.alloc_fragment((16, 64), src)
            yf = T.alloc_fragment((16, 64), "float16")
            T.copy(W[0:16, 0:64], ws)
            T.copy(ws, wf)
            for i, j in T.Parallel(16, 64):
                yf[i, j] = T.cast(wf[i, j], "float16") * S[j]
            T.copy(yf, Y[0:16, 0:64])

    return k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("src", ["uint4", "uint8", "int4", "float8_e4m3"])
def test_a_tilelang_dequantization_compiles_to_the_fast_cast(src, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(_dequant(src), arch)
    assert re.search(r"tc::fast_cast_(int|float|e4m3_cvt)<([^>]*, )?8>\(wf_, wf_f16_\);",
                     gen.source)
    assert "tc::cast<half>" not in gen.source
    compiled = compile_cuda(gen.source, arch, name=gen.name)
    assert compiled.resources.spill_stores == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_every_fast_pair_compiles_without_spills(arch):
    """(40 elements per thread: every field position of every width, pairs across words)"""
    pytest.importorskip("cuda.bindings.nvrtc")
    for src in INTS + FLOATS:
        for dst in ("float16", "bfloat16"):
            source, compiled = _compiled(src, dst, 40, arch)
            assert "tc::fast_cast_" in source and "tc::cast<" not in source, (src, dst)
            assert compiled.resources.spill_stores == 0, (src, dst)
