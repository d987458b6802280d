"""NVRTC compiles the device header library and handwritten kernels for sm_90a and sm_80."""

import pytest
from cuda_sources import ALL_HEADERS_KERNEL, BROKEN_KERNEL, MMA_KERNEL, VECTOR_ADD_KERNEL

from tilecraft.runtime import (
    CompileJob,
    CudaCompileError,
    compile_cuda,
    compile_many,
    cuda_include_dir,
    nvrtc_version,
)
from tilecraft.runtime.elf import Cubin

ARCHS = ["sm_90a", "sm_80"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "source,name", [(ALL_HEADERS_KERNEL, "everything"), (MMA_KERNEL, "mma_16x8x16")]
)
def test_header_library_kernels_compile_without_spills(source, name, arch):
    out = compile_cuda(source, arch, name=name)
    assert out.cubin[:4] == b"\x7fELF"
    assert name in Cubin(out.cubin).kernel_names()
    assert out.resources.source == "ptxas"
    assert out.resources.registers > 0
    assert out.resources.spill_bytes == 0
    assert not out.resources.has_spills
    assert out.resources.shared_memory_bytes > 0


def test_nvrtc_is_cuda_12_or_newer_and_headers_come_from_pip():
    major = int(nvrtc_version().split(".")[0])
    assert major >= 12
    assert (cuda_include_dir() / "cuda_bf16.h").is_file()
    assert (cuda_include_dir() / "cuda_fp8.h").is_file()


def test_compile_error_names_the_line_and_shows_the_source():
    with pytest.raises(CudaCompileError) as info:
        compile_cuda(BROKEN_KERNEL, "sm_90a", name="broken")
    err = info.value
    assert err.error_lines == [4]
    text = str(err)
    assert "undefined_name" in text
    assert ">     4 |   x[i] = undefined_name + 1.0f;" in text


def test_hopper_only_helpers_are_absent_on_sm80():
    src = (
        '#include "tilecraft/ldmatrix.cuh"\n'
        'extern "C" __global__ void k(tc::u32* r) {\n'
        "  __shared__ __align__(16) unsigned short s[64];\n"
        "  tc::stmatrix_x1(s + threadIdx.x % 8 * 8, r);\n"
        "  r[threadIdx.x] = s[threadIdx.x];\n}\n"
    )
    assert compile_cuda(src, "sm_90a", name="k").resources.registers > 0
    with pytest.raises(CudaCompileError) as info:
        compile_cuda(src, "sm_80", name="k")
    assert info.value.error_lines == [4]


def test_unknown_entry_name_is_reported():
    with pytest.raises(ValueError, match="not in the compiled code"):
        compile_cuda(
            VECTOR_ADD_KERNEL.replace("vector_add", "other"),
            "sm_80",
            name="vector_add",
            use_cache=False,
        )


def test_bad_arch_string_is_rejected():
    with pytest.raises(ValueError, match="sm_90a"):
        compile_cuda(VECTOR_ADD_KERNEL, "hopper", name="vector_add")


def test_fast_math_and_options_reach_nvrtc():
    plain = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    fast = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add", fast_math=True)
    assert "--use_fast_math" in fast.options and "--use_fast_math" not in plain.options
    assert fast.key != plain.key
    src = 'extern "C" __global__ void k(int* x) { x[0] = VALUE; }'
    assert compile_cuda(src, "sm_80", name="k", options=["-DVALUE=3"]).resources.registers > 0


def test_compile_many_keeps_job_order_and_can_collect_errors():
    src = 'extern "C" __global__ void k(int* x) {{ x[threadIdx.x] = {v}; }}'
    jobs = [CompileJob(src.format(v=v), "sm_80", "k") for v in range(4)]
    jobs.append(CompileJob(BROKEN_KERNEL, "sm_80", "broken"))
    results = compile_many(jobs, max_workers=2, return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["CompiledCubin"] * 4 + ["CudaCompileError"]
    assert len({r.key for r in results[:4]}) == 4
    with pytest.raises(CudaCompileError):
        compile_many(jobs, max_workers=2)
