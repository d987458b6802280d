"""Register and spill reports: ptxas log parsing and the cubin (ELF) fallback agree."""

import pytest
from cuda_sources import MMA_KERNEL, SPILL_KERNEL

from tilecraft.runtime import Resources, compile_cuda, parse_ptxas_log, resources_from_cubin
from tilecraft.runtime.nvrtc import _entry_resources

SAMPLE_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'small' for 'sm_80'
ptxas info    : Function properties for small
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
ptxas         .     208 bytes stack frame, 236 bytes spill stores, 288 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 208 bytes cumulative stack size, 4000 bytes smem, 372 bytes cmem[0]
"""


def test_ptxas_log_is_parsed_per_entry_function():
    res = parse_ptxas_log(SAMPLE_LOG)
    assert res["small"] == Resources(registers=8, barriers=0, constant_memory_bytes=360)
    big = res["big"]
    assert (big.registers, big.stack_frame_bytes, big.spill_stores, big.spill_loads) == (
        32,
        208,
        236,
        288,
    )
    assert big.shared_memory_bytes == 4000 and big.spill_bytes == 524 and big.has_spills


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_spilling_kernel_reports_spills(arch):
    res = compile_cuda(SPILL_KERNEL, arch, name="spilling").resources
    assert res.registers <= 32
    assert res.spill_stores > 0 and res.spill_loads > 0 and res.spill_bytes > 0
    assert res.has_spills


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("source,name", [(SPILL_KERNEL, "spilling"), (MMA_KERNEL, "mma_16x8x16")])
def test_cubin_fallback_agrees_with_ptxas(source, name, arch):
    out = compile_cuda(source, arch, name=name)
    from_elf = resources_from_cubin(out.cubin, name)
    assert from_elf.source == "cubin"
    assert from_elf.registers == out.resources.registers
    assert from_elf.stack_frame_bytes == out.resources.stack_frame_bytes
    assert from_elf.spill_bytes is None
    assert from_elf.has_spills == out.resources.has_spills
    assert from_elf.shared_memory_bytes >= out.resources.shared_memory_bytes


def test_missing_ptxas_report_falls_back_to_the_cubin():
    out = compile_cuda(MMA_KERNEL, "sm_80", name="mma_16x8x16")
    res = _entry_resources(out.cubin, "", "mma_16x8x16")
    assert res.source == "cubin" and res.registers == out.resources.registers


def test_resources_round_trip_through_json():
    res = parse_ptxas_log(SAMPLE_LOG)["big"]
    assert Resources.from_json(res.to_json()) == res
