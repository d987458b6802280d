"""A generated kernel includes only the device headers it uses (NVRTC parses every header it is
given: cuda_fp8.h alone is about 15 ms of a compile), and what it includes is enough to compile."""

import re
from pathlib import Path

import pytest

import tilecraft.language as T
from tilecraft.codegen.cuda.build import ALWAYS, HEADERS, USED_WHEN, generate_cuda, include_lines
from tilecraft.runtime import compile_cuda
from tilecraft.runtime.paths import TILECRAFT_INCLUDE_DIR


def _copy_kernel(dtype: str):
    @T.prim_func
    def copy(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((256,), dtype)
            T.copy(A[0:256], f)
            T.copy(f, B[0:256])

    return copy


def _included(source: str) -> list[str]:
    return re.findall(r'#include "tilecraft/(\w+)\.cuh"', source)


def test_a_kernel_without_fp8_does_not_parse_cuda_fp8():
    source = generate_cuda(_copy_kernel("float16"), "sm_90a").source
    head = source.split("\n\n")[0]
    assert "#define TC_NO_FP8" in head and head.index("TC_NO_FP8") < head.index("#include")
    assert "fp8" not in _included(source)
    assert set(_included(source)) >= set(ALWAYS)
    assert not {"mma", "wgmma", "tma", "reduce", "scan", "debug"} & set(_included(source))
    compile_cuda(source, "sm_90a", name="copy_kernel", use_cache=False)


def test_a_kernel_without_bf16_does_not_parse_cuda_bf16():
    source = generate_cuda(_copy_kernel("float16"), "sm_80").source
    head = source.split("\n\n")[0]
    assert "#define TC_NO_BF16" in head and head.index("TC_NO_BF16") < head.index("#include")
    compile_cuda(source, "sm_80", name="copy_kernel", use_cache=False)
    for code in ("__nv_bfloat16 x;", "float2 f = tc::unpack_bfloat2(r);", "tc::bf16 y;"):
        assert "TC_NO_BF16" not in include_lines(code), code


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2"])
def test_a_bf16_or_fp8_kernel_keeps_cuda_bf16_and_compiles(dtype):
    source = generate_cuda(_copy_kernel(dtype), "sm_90a").source
    assert "TC_NO_BF16" not in source
    compile_cuda(source, "sm_90a", name="copy_kernel", use_cache=False)


def test_every_header_compiles_without_bf16_and_fp8():
    """No header names a bf16 or fp8 type outside its #ifndef: with both left out, all of the
    library compiles together."""
    includes = "\n".join(f'#include "tilecraft/{h}.cuh"' for h in HEADERS)
    source = (f"#define TC_NO_FP8\n#define TC_NO_BF16\n{includes}\n"
              'extern "C" __global__ void k(float* x) { x[threadIdx.x] = tc::cast<float>(1); }\n')
    compile_cuda(source, "sm_90a", name="k", use_cache=False)


def test_an_fp8_kernel_includes_fp8_and_compiles():
    source = generate_cuda(_copy_kernel("float8_e4m3"), "sm_90a").source
    assert "TC_NO_FP8" not in source
    assert "fp8" in _included(source)
    compile_cuda(source, "sm_90a", name="copy_kernel", use_cache=False)


def test_each_optional_header_is_included_when_a_name_it_defines_is_used():
    names = {"mma": "tc::mma_m16n8k16_f16_f32(d, a, b, c);", "ldmatrix": "tc::ldmatrix_x4(r, p);",
             "cp_async": "tc::cp_async_commit();", "reduce": "tc::warp_reduce_sum(x);",
             "atomic": "tc::atomic_add(p, x);", "scan": "tc::warp_inclusive_scan(x);",
             "debug": "tc::dbg(x);", "sync": "tc::fence_proxy_async_shared();",
             "wgmma": "tc::wgmma_fence();", "tma": "tc::mbarrier_wait(b, 0);",
             "fp8": "__nv_fp8_e5m2 x;", "lowbit": "tc::bits_get<4>(w, 0);",
             "fast_cast": "tc::fast_cast_int<4, false, false, 8>(w, h);"}
    assert set(names) == set(USED_WHEN)
    for header, code in names.items():
        assert f'"tilecraft/{header}.cuh"' in include_lines(code), header
        for other in set(USED_WHEN) - {header}:
            assert f'"tilecraft/{other}.cuh"' not in include_lines(code), (header, other)


def test_every_header_of_the_library_can_be_selected():
    on_disk = {p.stem for p in (TILECRAFT_INCLUDE_DIR / "tilecraft").glob("*.cuh")}
    assert on_disk == set(HEADERS)
    assert set(HEADERS) == set(ALWAYS) | set(USED_WHEN)
    assert Path(TILECRAFT_INCLUDE_DIR / "tilecraft" / "common.cuh").is_file()
