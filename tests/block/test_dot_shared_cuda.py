"""dot_shared printed as CUDA: wgmma by descriptor on sm_90a (the descriptors the CUDA emitter
uses for the same gemm), the proxy fence before every barrier of a wgmma kernel, waits and
accumulator fences for asynchronous ones, the SIMT form elsewhere; every form compiles through
NVRTC without spills, and on a GPU gives what the VM gives (and the GEMM example what torch
gives)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilecraft.block import DotShared
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import A100_SXM, H100_SXM

from .dot_shared_programs import dot_and_dot_shared, dot_shared_only, inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import load  # noqa: E402

GEMMS = {"gemm_128x256x64_256t": ((4096, 4096, 4096, 128, 256, 64), {"num_stages": 3,
                                                                     "threads": 256}),
         # the signature's defaults (a call that leaves them out gets the recommender's)
         "gemm_default": ((1024, 1024, 1024, 128, 128, 32), {"num_stages": 3, "threads": 128})}


def _compile(printed, arch="sm_90a"):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    return compile_cuda(printed.source, arch, name=printed.name)


def _gemm_program(name: str, target=H100_SXM):
    args, kwargs = GEMMS[name]
    return lowered_program(lower(load("gemm").matmul(*args, **kwargs).func, target))


def _attention_program(target=H100_SXM):
    fa = load("flash_attention").flash_attention(1, 2, 256, 64, False, block_M=128, block_N=64,
                                                 threads=256)
    return lowered_program(lower(fa.func, target))


def test_the_gemm_prints_the_emitters_wgmma_descriptors():
    source = print_cuda(_gemm_program("gemm_default"), H100_SXM).source
    assert "tc::wgmma_desc(tc::smem_addr(A_shared_), 0x8000002000010000ull)" in source
    assert "tc::wgmma_desc(tc::smem_addr(B_shared_), 0x4000004001000000ull)" in source
    assert "tc_wgmma_m64n128k16_f16_t01(&C_local_[64], a_desc + 258, b_desc + 128);" in source
    assert source.count("__device__ __forceinline__ void tc_wgmma_m64n128k16_f16_t01(") == 1


def test_every_barrier_of_a_wgmma_kernel_follows_a_proxy_fence():
    source = print_cuda(_gemm_program("gemm_default"), H100_SXM).source
    syncs = [m.start() for m in re.finditer(r"__syncthreads\(\);", source)]
    assert syncs and all(source[:i].rstrip().endswith("tc::fence_proxy_async_shared();")
                         for i in syncs)
    plain = print_cuda(_gemm_program("gemm_default", A100_SXM), None).source
    assert "fence_proxy_async" not in plain and "wgmma" not in plain


def test_asynchronous_dot_shared_waits_and_fences_the_accumulators_it_completes():
    _, program = dot_and_dot_shared(asynchronous=True)
    source = print_cuda(program, H100_SXM).source
    at = source.index("tc::wgmma_commit();")
    rest = source[at:]
    assert rest.index("tc::wgmma_wait<0>();") < rest.index("tc::wgmma_fence_operand(acc_[li])")
    assert "tc::wgmma_wait<0>();" not in source[:at]  # issued without waiting


def test_the_pipelined_gemm_leaves_one_group_running_without_touching_its_accumulators():
    source = print_cuda(_gemm_program("gemm_128x256x64_256t"), H100_SXM).source
    loop_end = source.index("tc::wgmma_wait<1>();")
    after = source[loop_end:source.index("tc::wgmma_wait<0>();")]
    assert "C_local_" not in after  # (still running: fenced after the last wait)


@pytest.mark.parametrize("case", ["plain", "transposed", "register_a", "async"])
def test_dot_shared_compiles_on_wgmma_and_simt_without_spills(case):
    kw = {"plain": {}, "transposed": {"trans_a": True, "trans_b": True},
          "register_a": {"a_in_registers": True}, "async": {"asynchronous": True}}[case]
    _, program = dot_shared_only(**kw)
    wgmma = print_cuda(program, H100_SXM)
    assert "wgmma.mma_async" in wgmma.source
    assert _compile(wgmma).resources.spill_stores == 0
    simt = print_cuda(program, "sm_80")
    assert "wgmma" not in simt.source
    assert _compile(simt, "sm_80").resources.spill_stores == 0


@pytest.mark.parametrize("name", list(GEMMS) + ["attention_256t"])
def test_lowered_gemms_and_attention_compile_on_wgmma_without_spills_or_serialization(name):
    program = _attention_program() if name == "attention_256t" else _gemm_program(name)
    printed = print_cuda(program, H100_SXM)
    assert "wgmma.mma_async" in printed.source
    compiled = _compile(printed)
    res = compiled.resources
    assert res.spill_stores == 0 and res.spill_loads == 0
    assert "C7514" not in compiled.log  # ptxas did not serialize the wgmma


def test_on_sm_80_the_gemm_lowers_to_dot_not_dot_shared():
    program = _gemm_program("gemm_default", A100_SXM)
    assert not any(isinstance(s, DotShared) for s in walk(program.body))


# ---- GPU ----------------------------------------------------------------------------------------
def _torch(arrays):
    import torch

    return [torch.from_numpy(a).cuda() for a in arrays]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["plain", "transposed", "register_a", "async"])
def test_dot_shared_on_the_gpu_gives_what_the_vm_gives(case):
    from tilecraft.codegen.block_cuda import build_block_kernel

    kw = {"plain": {}, "transposed": {"trans_a": True, "trans_b": True},
          "register_a": {"a_in_registers": True}, "async": {"asynchronous": True}}[case]
    p, program = dot_shared_only(**kw)
    want = inputs(p, seed=5)
    program.run(*want)
    for arch in ("sm_90a", "sm_80"):  # wgmma, then the SIMT form (on the same GPU)
        got = _torch(inputs(p, seed=5))
        build_block_kernel(program, arch if arch == "sm_90a" else "sm_90")(*got)
        np.testing.assert_allclose(got[4].cpu().numpy(), want[4], rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GEMMS))
def test_the_block_printed_gemm_matches_torch(name):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel

    (m, n, k, *_), _ = GEMMS[name]
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kernel = build_block_kernel(_gemm_program(name), "sm_90a")
    assert "wgmma.mma_async" in kernel.source
    kernel(a, b, c)
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-3
