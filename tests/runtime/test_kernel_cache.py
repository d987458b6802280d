"""The kernel cache: memory and disk hits skip NVRTC; the key follows source, arch and options."""

from cuda_sources import VECTOR_ADD_KERNEL

from tilecraft.runtime import cache_key, compile_cuda, default_cache, nvrtc_invocations


def test_second_compile_comes_from_the_memory_cache():
    first = compile_cuda(VECTOR_ADD_KERNEL, "sm_90a", name="vector_add")
    calls = nvrtc_invocations()
    second = compile_cuda(VECTOR_ADD_KERNEL, "sm_90a", name="vector_add")
    assert nvrtc_invocations() == calls
    assert not first.from_cache and second.from_cache
    assert second.cubin == first.cubin and second.resources == first.resources


def test_disk_cache_survives_a_fresh_process_view(isolated_cache_dir):
    first = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    default_cache().clear_memory()
    calls = nvrtc_invocations()
    again = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    assert nvrtc_invocations() == calls and again.from_cache
    assert again.cubin == first.cubin and again.resources == first.resources
    files = sorted(p.suffix for p in isolated_cache_dir.rglob("*") if p.is_file())
    assert files == [".cubin", ".json"]


def test_key_changes_with_arch_options_and_source():
    base = cache_key("src", "sm_90a", ["-O3"], "nvrtc-13.0")
    assert base == cache_key("src", "sm_90a", ["-O3"], "nvrtc-13.0")
    others = {
        cache_key("src", "sm_80", ["-O3"], "nvrtc-13.0"),
        cache_key("src", "sm_90a", ["-O2"], "nvrtc-13.0"),
        cache_key("src2", "sm_90a", ["-O3"], "nvrtc-13.0"),
        cache_key("src", "sm_90a", ["-O3"], "nvrtc-13.1"),
    }
    assert base not in others and len(others) == 4


def test_arch_change_recompiles():
    compile_cuda(VECTOR_ADD_KERNEL, "sm_90a", name="vector_add")
    calls = nvrtc_invocations()
    out = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    assert nvrtc_invocations() == calls + 1 and not out.from_cache


def test_corrupt_entry_is_a_miss_and_is_rewritten(isolated_cache_dir):
    first = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    (json_path,) = isolated_cache_dir.rglob("*.json")
    json_path.write_text("{not json")
    default_cache().clear_memory()
    calls = nvrtc_invocations()
    again = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    assert nvrtc_invocations() == calls + 1 and again.cubin == first.cubin
    assert json_path.read_text().startswith("{")


def test_use_cache_false_always_compiles():
    compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    calls = nvrtc_invocations()
    compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add", use_cache=False)
    assert nvrtc_invocations() == calls + 1
