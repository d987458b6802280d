"""Pipelined wgmma gemms load their tiles with TMA on sm_90a when the tiles qualify."""

import sys
from pathlib import Path

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.options import CompileOptions
from tilecraft.runtime import TensorMapParam

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm import matmul  # noqa: E402


def _gen(*shape, arch="sm_90a", cfg=(128, 256, 64, 4, 256), **switches):
    bm, bn, bk, st, th = cfg
    return generate_cuda(matmul(*shape, bm, bn, bk, num_stages=st, threads=th).func,
                         options=CompileOptions.for_arch(arch, **switches))


def test_gemm_tiles_come_by_tma():
    gen = _gen(1024, 1024, 1024)
    maps = [p for p in gen.params if isinstance(p, TensorMapParam)]
    assert maps == [TensorMapParam("A_tmap", "A", (128, 64), 128),
                    TensorMapParam("B_tmap", "B", (64, 64), 128)]
    body = gen.source.split('extern "C"')[1]
    assert "const __grid_constant__ tc::TensorMap A_tmap" in body
    assert body.count("tc::tma_load(") == 2 * 5  # prologue and loop: 1 box of A, 4 of B
    assert "tc::mbarrier_arrive_expect_tx(&tma_bar_1[stage_w], 49152);" in body
    assert "cp_async_16" not in body


@pytest.mark.parametrize("cfg, a_box, swizzle", [((128, 256, 32, 6, 256), (128, 32), 64),
                                                 ((64, 128, 16, 3, 128), (64, 16), 32)])
def test_narrow_k_tiles_use_the_matching_swizzle(cfg, a_box, swizzle):
    gen = _gen(1024, 1024, 1024, cfg=cfg)
    a_map = next(p for p in gen.params if isinstance(p, TensorMapParam) and p.tensor == "A")
    assert (a_map.box, a_map.swizzle) == (a_box, swizzle)


@pytest.mark.parametrize("why, kwargs, shape", [
    ("switched off", {"tma": False}, (1024, 1024, 1024)),
    ("no TMA before sm_90", {"arch": "sm_80"}, (1024, 1024, 1024)),
    ("rows of A are 120 bytes", {}, (1024, 1024, 60)),
])
def test_cp_async_where_tma_does_not_apply(why, kwargs, shape):
    gen = _gen(*shape, cfg=(128, 128, 32, 3, 128), **kwargs)
    assert not any(isinstance(p, TensorMapParam) for p in gen.params), why
    assert "tc::tma_load(" not in gen.source.split('extern "C"')[1]


def test_tma_gemm_compiles_without_spills():
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = _gen(642, 400, 688, cfg=(64, 128, 16, 3, 128))  # partial tiles: TMA fills zeros
    res = compile_cuda(gen.source, "sm_90a", name=gen.name).resources
    assert res.spill_stores == 0 and res.registers <= 128


def test_the_wgmma_mainloop_frees_stages_by_mbarrier():
    loop = _gen(1024, 1024, 1024).source.split("for (int k_iter")[1].split("tc::wgmma_wait<0>")[0]
    assert "__syncthreads" not in loop
    assert "tc::mbarrier_arrive(&tma_empty_2[stage_r == 0 ? 3 : stage_r - 1]);" in loop
    assert "tc::mbarrier_wait(&tma_empty_2[stage_w], ((k_iter - 2) / 4) & 1);" in loop
    loop = _gen(1024, 1024, 1024, tma_empty_barriers=False).source.split("for (int k_iter")[1].split("tc::wgmma_wait<0>")[0]
    assert "__syncthreads" in loop and "tma_empty" not in loop
