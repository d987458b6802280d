"""quant/waves.py: a decode grid whose blocks shared memory alone keeps from being resident at
once takes fewer stages, decided from bounds that hold for the kernels as built."""

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.quant import qmm
from tilecraft.quant.qmm_kernel import qmm_kernel
from tilecraft.quant.waves import RESERVED, one_wave_stages, tile_bytes, upper_bound
from tilecraft.targets import H100_SXM, H200

K = 8192


def _stages(M, N, wtype, has_zeros=False, codes=False, target=H100_SXM):
    bits = resolve(wtype).bits
    cfg = qmm.choose_config(M, N, K, bits, 128, wtype)
    return cfg["stages"], one_wave_stages(cfg, M, N, K, bits, 128, "float16", has_zeros, codes,
                                          target)


def _smem(M, N, wtype, has_zeros, codes, **cfg):
    kernel = qmm_kernel(M, N, K, wtype, "float16", 128, 0, has_zeros, False,
                        zero_codes=codes, **cfg)
    return generate_cuda(kernel.func, "sm_90a").launch


def test_the_widest_decode_grids_take_fewer_stages_where_that_makes_one_wave():
    assert _stages(1, 57344, "int4") == (4, 3)  # 57,472 bytes: 3 blocks an SM; 3 stages: 4
    assert _stages(1, 57344, "int4", target=H200) == (4, 3)
    assert _stages(16, 57344, "uint4", True, True) == (4, 2)  # 3 stages still leave 3 an SM
    assert _stages(1, 57344, "uint8", True) == (4, 4)  # no stage count makes one wave: kept
    assert _stages(1, 28672, "int4") == (4, 4)  # 224 blocks: 2 an SM fit already
    assert _stages(1, 8192, "uint5") == (4, 4)  # 8 an SM: the registers would not let them


def test_fewer_stages_are_not_taken_where_the_kernels_registers_keep_a_block_off_anyway():
    cfg = qmm.choose_config(1, 57344, K, 6, 128, "float6_e3m2")
    asked = []

    def registers(s):
        asked.append(s)
        return 136  # 4 blocks of 128 threads leave 128 a thread
    assert one_wave_stages(cfg, 1, 57344, K, 6, 128, "float16", False, False, H200,
                           registers) == 4
    assert one_wave_stages(cfg, 1, 57344, K, 6, 128, "float16", False, False, H200,
                           lambda s: 128) == 2
    assert asked == [2]  # (only the candidate is built)
    # 8-bit weights keep 3 stages at least: none fits 4 blocks there
    int8 = qmm.choose_config(1, 57344, K, 8, 128, "int8")
    assert one_wave_stages(int8, 1, 57344, K, 8, 128, "float16", False, False, H200) == 4
    uint8 = qmm.choose_config(16, 8192, 28672, 8, 128, "uint8")
    assert one_wave_stages(uint8, 16, 8192, 28672, 8, 128, "float16", True, False, H200) == 3


@pytest.mark.parametrize("M, wtype, zeros, codes", [(1, "int4", False, False),
                                                   (16, "uint4", True, True)])
def test_the_plan_for_57344_channels_runs_its_grid_in_one_wave(M, wtype, zeros, codes):
    bits = resolve(wtype).bits
    key = qmm.PlanKey(M, 57344, K, wtype, "float16", bits, 128, zero=0, has_zeros=zeros,
                      has_bias=False, codes=codes, fold=False, shift=0, config=None,
                      switches=(), target=H100_SXM)
    qmm._PLANS.pop(key, None)
    kernel = qmm._plan(key, None)[0]
    launch = generate_cuda(kernel.func, "sm_90a").launch
    blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
    per_sm = H100_SXM.shared_memory_per_sm // (launch.smem + RESERVED)
    assert blocks <= per_sm * H100_SXM.sm_count
    # the caller's stages stay, with the second wave
    cfg = dict(qmm.choose_config(M, 57344, K, bits, 128, wtype), stages=4)
    four = _smem(M, 57344, wtype, zeros, codes, **cfg)
    assert blocks > H100_SXM.shared_memory_per_sm // (four.smem + RESERVED) * H100_SXM.sm_count


@pytest.mark.parametrize("wtype, zeros, codes", [
    ("int4", False, False), ("uint4", True, True), ("uint8", True, False),
    ("float6_e3m2", False, False), ("uint3", True, False), ("float8_e4m3", False, False)])
@pytest.mark.parametrize("M, N", [(1, 57344), (16, 8192)])
@pytest.mark.parametrize("step", [False, True], ids=["slice", "step_scales"])
def test_the_bounds_hold_for_the_kernels_as_built(wtype, zeros, codes, M, N, step):
    bits = resolve(wtype).bits
    base = dict(qmm.choose_config(M, N, K, bits, 128, wtype), step_scales=step)
    for stages in (2, 4):
        cfg = dict(base, stages=stages, unroll=min(base["unroll"], stages))
        got = _smem(M, N, wtype, zeros, codes, **cfg).smem
        tiles = tile_bytes(cfg, stages, K, bits, 128, "float16", zeros, codes)
        assert sum(tiles) <= got <= upper_bound(tiles), (stages, got, tiles)


def _planned(monkeypatch, config=None):
    """qmm_kernel's arguments for the plan of int4, M = 1, 57344 x 8192 (nothing built)."""
    from tilecraft.quant import qmm_kernel as module

    seen = {}
    real = module.qmm_kernel

    def record(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, "qmm_kernel", record)
    key = qmm.PlanKey(1, 57344, K, "int4", "float16", 4, 128, zero=0, has_zeros=False,
                      has_bias=False, codes=False, fold=False, shift=0,
                      config=tuple(sorted(config.items())) if config else None, switches=(),
                      target=H100_SXM)
    qmm._PLANS.pop(key, None)
    qmm._plan(key, config)
    qmm._PLANS.pop(key, None)
    return seen


def test_a_callers_unroll_stays_when_the_stages_are_cut(monkeypatch):
    assert _planned(monkeypatch)["stages"] == 3 and _planned(monkeypatch)["unroll"] == 3
    got = _planned(monkeypatch, {"unroll": 4})
    assert (got["stages"], got["unroll"]) == (3, 4)


def test_without_nvrtc_the_plan_keeps_its_stages(monkeypatch):
    """A CPU-only run (the interpreter) has no compiler to ask for the registers: no cut."""
    from tilecraft.jit import JITKernel
    from tilecraft.runtime.errors import CudaToolkitNotFoundError

    def missing(self):
        raise CudaToolkitNotFoundError("no NVRTC (simulated)")
    monkeypatch.setattr(JITKernel, "resources", property(missing))
    assert _planned(monkeypatch)["stages"] == 4


def test_a_plan_is_kept_per_target(monkeypatch):
    """The plan (its stages come from the target's SMs and shared memory) is keyed by the
    target: a call under another TILECRAFT_ARCH plans again."""
    import torch

    from tilecraft import quant

    qw = quant.quantize(torch.randn(64, 128), "int4", group_size=64)
    x = torch.randn(1, 128, dtype=torch.float16)
    targets = []
    for arch in ("sm_90a", "sm_80"):
        monkeypatch.setenv("TILECRAFT_ARCH", arch)
        qmm._PLANS.clear()
        qmm.quant_matmul(x, qw, config={"stages": 2})  # (no _CALLS entry: the plan is made)
        targets += [k.target.arch for k in qmm._PLANS]
    assert targets == ["sm_90a", "sm_80"]
