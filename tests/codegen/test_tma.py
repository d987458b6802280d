"""Pipelined gemms load their tiles with TMA on sm_90a when the tiles qualify and a barrier
frees each stage (passes/pipeline_copies.py). The wgmma mainloop, whose asynchronous dot keeps
one group in flight, keeps cp.async groups: a CTA barrier frees TMA stages later than they do
(GEMM 0.84-0.90x cuBLAS with TMA + CTA barrier, 0.89-0.90x with cp.async; benchmarks/NOTES.md).
"""

import re
import sys
from pathlib import Path

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.options import CompileOptions
from tilecraft.runtime import TensorMapParam

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm import matmul  # noqa: E402

#: wgmma dots, complete in their iteration: the pipeline frees stages by barrier, so TMA applies
BARRIER_FREED = {"wgmma_pipeline": False}


def _gen(*shape, arch="sm_90a", cfg=(128, 256, 64, 4, 256), **switches):
    bm, bn, bk, st, th = cfg
    return generate_cuda(matmul(*shape, bm, bn, bk, num_stages=st, threads=th).func,
                         options=CompileOptions.for_arch(arch, **switches))


@pytest.mark.parametrize("switches", [BARRIER_FREED, {"wgmma": False}], ids=["wgmma", "mma"])
def test_gemm_tiles_come_by_tma(switches):
    gen = _gen(1024, 1024, 1024, **switches)
    maps = [p for p in gen.params if isinstance(p, TensorMapParam)]
    # B's (64, 256) tile is 4 column blocks of 64: one box of the view that puts the blocks
    # outermost (split=64), its column start bx * 256 a multiple of 64
    assert maps == [TensorMapParam("A_tmap0", "A", (128, 64), 128),
                    TensorMapParam("B_tmap1", "B", (4, 64, 64), 128, split=64)]
    body = gen.source.split('extern "C"')[1]
    assert "const __grid_constant__ tc::TensorMap A_tmap0" in body
    # 3 stages ahead in the prologue and one refill in the loop: 1 box of A, 1 of B each
    assert body.count("tc::tma_load(") == 4 * 2
    assert "tc::tma_load(B_shared_p0_, B_tmap1, &A_shared_full_[0], 0, (int)(0), " \
           "(int)(bx_ * 256 / 64));" in body
    assert body.count("tc::mbarrier_arrive_expect_tx(&A_shared_full_[") == 4
    assert "tc::mbarrier_arrive_expect_tx(&A_shared_full_[(ko_ + 3) % 4], 49152);" in body
    assert "cp_async_16" not in body


@pytest.mark.parametrize("cfg, a_box, swizzle", [((128, 256, 32, 6, 256), (128, 32), 64),
                                                 ((64, 128, 16, 3, 128), (64, 16), 32)])
def test_narrow_k_tiles_use_the_matching_swizzle(cfg, a_box, swizzle):
    gen = _gen(1024, 1024, 1024, cfg=cfg, **BARRIER_FREED)
    a_map = next(p for p in gen.params if isinstance(p, TensorMapParam) and p.tensor == "A")
    assert (a_map.box, a_map.swizzle) == (a_box, swizzle)


@pytest.mark.parametrize("why, kwargs, shape", [
    ("switched off", {"tma": False}, (1024, 1024, 1024)),
    ("no TMA before sm_90", {"arch": "sm_80"}, (1024, 1024, 1024)),
    ("rows of A are 120 bytes", {}, (1024, 1024, 60)),
])
def test_cp_async_where_tma_does_not_apply(why, kwargs, shape):
    gen = _gen(*shape, cfg=(128, 128, 32, 3, 128), **{**BARRIER_FREED, **kwargs})
    assert not any(isinstance(p, TensorMapParam) for p in gen.params), why
    body = gen.source.split('extern "C"')[1]
    assert "tc::tma_load(" not in body and "tc::cp_async_16(" in body


def test_tma_gemm_compiles_without_spills():
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    # partial tiles: TMA fills zeros
    gen = _gen(642, 400, 688, cfg=(64, 128, 16, 3, 128), **BARRIER_FREED)
    assert "tc::tma_load(" in gen.source
    res = compile_cuda(gen.source, "sm_90a", name=gen.name).resources
    assert res.spill_stores == 0 and res.registers <= 128


def test_tma_stages_are_awaited_by_mbarrier_phase_and_freed_by_one_barrier():
    loop = _gen(1024, 1024, 1024, **BARRIER_FREED).source.split("for (int ko_")[1]
    assert loop.index("tc::mbarrier_wait(&A_shared_full_[ko_ % 4], (ko_ / 4) % 2);") \
        < loop.index("__syncthreads();") < loop.index("tc::tma_load(")
    assert loop.split("tc::tma_load(")[0].count("__syncthreads();") == 1


def test_the_wgmma_mainloop_loads_by_tma_and_frees_stages_on_empty_mbarriers():
    """One dot in flight; thread 0 refills a stage once every warp arrived on its "empty"
    barrier (after the dot that read it finished): no CTA barrier in the loop. (Warp-
    specialized, the producer warpgroup refills: tests/passes/test_warp_specialize.py.)"""
    gen = _gen(1024, 1024, 1024, warp_specialize=False)
    assert any(isinstance(p, TensorMapParam) for p in gen.params)
    loop = gen.source.split("for (int ko_")[1].split("tc::wgmma_wait<0>")[0]
    assert "__syncthreads();" not in loop and "tc::tma_load(" in loop
    assert "tc::wgmma_wait<1>();" in loop
    assert re.search(r"if \(tid == 0\) tc::mbarrier_wait\(&A_shared_empty_\[", loop)
    assert re.search(r"if \(tid % 32 == 0\) tc::mbarrier_arrive\(&A_shared_empty_\[", loop)


def test_without_tma_the_wgmma_mainloop_keeps_cp_async_groups_one_dot_in_flight():
    gen = _gen(1024, 1024, 1024, tma=False)
    assert not any(isinstance(p, TensorMapParam) for p in gen.params)
    loop = gen.source.split("for (int ko_")[1].split("tc::wgmma_wait<0>")[0]
    assert loop.count("__syncthreads();") == 1 and "tc::cp_async_wait<1>();" in loop
    assert "tc::wgmma_wait<1>();" in loop and "tc::tma_load(" not in loop


def test_qmm_weight_bytes_come_by_tma_unless_the_copy_disables_it():
    """The quantized matmul's packed weight tile (8-bit, staged by its T.Pipelined loop) is
    swizzled and TMA-loaded on sm_90a, one box for all its column blocks; with
    `T.copy(..., disable_tma=True)` (qmm's tma=False) both tiles move by cp.async and the weight
    tile stays row-major."""
    from tilecraft.quant.qmm import choose_config
    from tilecraft.quant.qmm_kernel import qmm_kernel

    cfg = choose_config(4096, 8192, 8192, 4, 128, "uint4")
    for tma in (True, False):
        k = qmm_kernel(4096, 8192, 8192, "uint4", "float16", 128, 0, True, False,
                       **{**cfg, "tma": tma})
        gen = generate_cuda(k.func, "sm_90a")
        maps = {p.tensor: p for p in gen.params if isinstance(p, TensorMapParam)}
        if tma:
            assert maps["Wp"] == TensorMapParam("Wp_tmap1", "Wp", (4, 8, 128), 128, split=128)
            assert "1 TMA box of 4 column blocks of 8x128" in gen.source
            assert "cp_async_16" not in gen.source
        else:
            assert not maps and "cp_async_16" in gen.source
            assert "W_s_stages = allocate_shared(uint8[4, 8, 512], layout=row_major" in gen.source
        assert "disable_tma=True" in k.func.script() if not tma else True
