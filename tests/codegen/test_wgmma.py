"""wgmma (sm_90a): descriptors derived from the swizzled tile layouts, instruction choice, the
accumulator layout, and the generated code (compiled; SASS checked where cuobjdump exists)."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.codegen.cuda.indexing import swizzled_offset
from tilecraft.layout import row_major
from tilecraft.options import CompileOptions
from tilecraft.layout.swizzle import make_swizzled_layout
from tilecraft.layout.wgmma import operand_descriptor
from tilecraft.passes.layout_inference.rules_gemm import c_layout, wgmma_c_layout

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm import matmul  # noqa: E402

from .sass import cuobjdump, sass, wgmma_register_races  # noqa: E402


@pytest.mark.parametrize("rows, cols", [(8, 16), (16, 32), (64, 64), (32, 128), (64, 96),
                                        (16, 48), (8, 256), (64, 24), (64, 40)])
def test_codegen_swizzle_is_the_canonical_layout(rows, cols):
    """The C index expression of a swizzled shared tile is make_swizzled_layout (the layout the
    wgmma descriptors are derived from)."""
    lay = make_swizzled_layout((rows, cols), 16)
    expr = swizzled_offset(rows, cols, "r", "c").replace("/", "//")
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    assert np.array_equal(eval(expr, {"r": r, "c": c}), lay.offsets())


@pytest.mark.parametrize("shape, k_major, mn0, tile, width, lbo, sbo", [
    ((128, 64), True, 0, 64, 128, 16, 1024),     # A, K-major, 128-byte rows
    ((128, 32), True, 64, 64, 64, 16, 512),      # A, block_K 32: 64-byte swizzle
    ((64, 16), True, 0, 64, 32, 16, 256),        # A, block_K 16: 32-byte swizzle
    ((32, 256), False, 0, 256, 128, 4096, 1024),  # B [K][N]: four 64-column blocks (LBO)
    ((64, 128), True, 0, 64, 128, 16, 1024),     # K of attention: two 64-column blocks along K
])
def test_descriptor_strides(shape, k_major, mn0, tile, width, lbo, sbo):
    k = shape[1] if k_major else shape[0]
    d = operand_descriptor(make_swizzled_layout(shape, 16), k_major, mn0, tile, 1, k // 16)
    assert d is not None and (d.width, d.lbo, d.sbo) == (width, lbo, sbo)
    assert d.base_word() >> 62 == {128: 1, 64: 2, 32: 3}[width]
    assert (d.base_word() >> 16) & 0x3FFF == lbo >> 4 and (d.base_word() >> 32) & 0x3FFF == sbo >> 4


def test_descriptor_refuses_non_canonical_layouts():
    assert operand_descriptor(row_major(64, 64), True, 0, 64, 1, 4) is None
    # an MN-major slab starting inside a swizzle atom (32 of 64 columns) is not relied on
    assert operand_descriptor(make_swizzled_layout((64, 64), 16), False, 32, 32, 1, 4) is None


def test_descriptor_start_offsets_follow_the_layout():
    """Each (tile, k16 step) start is the slab corner's byte offset; the hardware model matched
    every element (checked inside operand_descriptor)."""
    lay = make_swizzled_layout((128, 128), 16)
    d = operand_descriptor(lay, True, 0, 64, 2, 8)
    for (t, kk), start in d.starts.items():
        assert start == 2 * lay.offset(64 * t, 16 * kk)


def _state(kernel, arch="sm_90a", **switches):
    return generate_cuda(kernel.func, options=CompileOptions.for_arch(arch, **switches)).state


def test_gemm_runs_on_wgmma_on_sm90a_only():
    k = matmul(1024, 1024, 1024, 128, 256, 64, num_stages=3, threads=256)
    assert list(_state(k).gemm_wgmma.values()) == [(2, 1)]  # m64n256 per warpgroup
    assert not _state(k, "sm_80").gemm_wgmma
    assert not _state(k, wgmma=False).gemm_wgmma


def test_wgmma_accumulator_layout():
    """Thread 128 g + 32 w + l of warpgroup (g_m, g_n) holds, in register (t * tn + j) * 4 + e,
    row 64 (g_m tm + t) + 16 w + l / 4 + 8 (e / 2), column g_n N + 8 j + 2 (l % 4) + e % 2."""
    m, n, gm, gn = 256, 128, 1, 2
    lay = wgmma_c_layout(m, n, gm, gn)
    tm, nw = m // (64 * gm), n // gn
    tn = nw // 8
    table = lay.index_table()
    for tid in (0, 37, 130, 255):
        g, w, lane = tid // 128, tid // 32 % 4, tid % 32
        g_m, g_n = divmod(g, gn)
        for t in range(tm):
            for j in range(tn):
                for e in range(4):
                    row = 64 * (g_m * tm + t) + 16 * w + lane // 4 + 8 * (e // 2)
                    col = g_n * nw + 8 * j + 2 * (lane % 4) + e % 2
                    assert tuple(table[tid, (t * tn + j) * 4 + e]) == (row, col)
    # one 64-row tile per warpgroup: the same layout as mma.sync with warps 4 gm x gn
    assert wgmma_c_layout(128, 64, 2, 1) == c_layout(128, 64, 8, 1)


def test_attention_uses_wgmma_only_where_the_layout_feeds_the_register_gemm():
    """QK^T (shared x shared) may run on wgmma only with the mma.sync layout, because P = its
    result feeds P @ V from registers; at 256 threads and 128 rows they coincide, and P @ V
    then runs on wgmma too, A from registers (one 64-row tile per warpgroup)."""
    from flash_attention import flash_attention

    k = flash_attention(1, 1, 256, 128, False, block_M=128, block_N=128, threads=256)
    state = _state(k)
    assert sorted(state.gemm_wgmma.values()) == [(2, 1), (2, 1)]
    src = generate_cuda(k.func, "sm_90a").source
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0" in src
    assert "tc_wgmma_m64n128k16_f16_rs_t1(&acc_o_[0], a_frag[7], b_desc + 896);" in src
    k = flash_attention(1, 1, 256, 128, False, block_M=128, block_N=64, threads=128)
    assert not _state(k).gemm_wgmma  # 4 warps x 32 rows: the layouts differ


def test_generated_wgmma_gemm_source():
    src = generate_cuda(matmul(1024, 1024, 1024, 128, 256, 64, num_stages=4,
                               threads=256).func, "sm_90a").source
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in src
    assert "tc::wgmma_wait<1>();" in src and "tc::fence_proxy_async_shared();" in src
    assert "#pragma unroll 1" in src and "ldmatrix" not in src.split("extern \"C\"")[1]


CONFIGS = [(64, 128, 16, 3, 128), (128, 128, 32, 3, 128), (128, 256, 64, 4, 256),
           (256, 128, 128, 2, 256), (128, 128, 64, 4, 128)]


@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("shape", [(642, 400, 688), (1024, 1024, 1024)])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
def test_no_accumulator_access_while_wgmma_runs(shape, cfg):
    """ptxas once hoisted the epilogue's reads of the accumulators above the final wgmma wait
    (an unrolled mainloop, 642x400x688 on 64x128x16 tiles): wrong results on the H100."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    bm, bn, bk, st, th = cfg
    gen = generate_cuda(matmul(*shape, bm, bn, bk, num_stages=st, threads=th).func, "sm_90a")
    lines = sass(compile_cuda(gen.source, "sm_90a", name=gen.name).cubin)
    assert any("HGMMA" in ln for ln in lines)
    assert wgmma_register_races(lines) == []


@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_N", [64, 128])
def test_attention_wgmma_registers_are_left_alone_while_it_runs(causal, block_N):
    """P x V takes A (P) from registers: neither P's registers nor the accumulators may be
    touched until the wgmma wait."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from flash_attention import flash_attention

    from tilecraft.runtime import compile_cuda

    k = flash_attention(2, 2, 1024, 128, causal, block_M=128, block_N=block_N, threads=256)
    gen = generate_cuda(k.func, "sm_90a")
    lines = sass(compile_cuda(gen.source, "sm_90a", name=gen.name).cubin)
    assert any(re.search(r"HGMMA\S* R\d+, R\d+", ln) for ln in lines)  # A from registers
    assert wgmma_register_races(lines) == []


def test_race_checker_sees_a_write_of_register_a_before_the_wait():
    lines = ["/*0010*/ HGMMA.64x128x16.F32 R24, R152, gdesc[UR4].tnspB, R24, gsb0 ;",
             "/*0020*/ F2FP.F16.F32.PACK_AB R153, R11, R10 ;",
             "/*0030*/ WARPGROUP.DEPBAR.LE gsb0, 0x0 ;"]
    assert wgmma_register_races(lines) == ["/*0020*/ F2FP.F16.F32.PACK_AB R153, R11, R10"]


def test_race_checker_sees_a_read_before_the_wait():
    lines = ["/*0010*/ HGMMA.64x128x16.F32 R24, gdesc[UR4].tnspB, R24, gsb0 ;",
             "/*0020*/ F2FP.F16.F32.PACK_AB R9, R75, R74 ;",
             "/*0030*/ WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
             "/*0040*/ F2FP.F16.F32.PACK_AB R9, R25, R24 ;"]
    assert wgmma_register_races(lines) == ["/*0020*/ F2FP.F16.F32.PACK_AB R9, R75, R74"]
