"""The jit cache: a factory call found on disk skips the front end; any change to the kernel's
source, the call's arguments or tilecraft misses; damaged entries are ignored."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tilecraft
from tilecraft import jit_cache
from tilecraft.diagnostics import TilecraftError
from tilecraft.runtime import LaunchArgumentError, default_cache, nvrtc_invocations

pytest.importorskip("cuda.bindings.nvrtc")

FACTORY = """
import tilecraft
import tilecraft.language as T

SCALE = {scale}


@tilecraft.jit(out_idx=[-1], arch="sm_80")
def scaled_add(block=256, threads=128, dtype="float32"):
    m = T.dynamic("m")

    @T.prim_func
    def add(
        A: T.Tensor((m,), dtype),
        B: T.Tensor((m,), dtype),
        C: T.Tensor((m,), dtype),
    ):
        with T.Kernel(T.ceildiv(m, block), threads=threads) as bx:
            A_local = T.alloc_fragment((block,), dtype)
            B_local = T.alloc_fragment((block,), dtype)
            C_local = T.alloc_fragment((block,), dtype)
            T.copy(A[bx * block], A_local)
            T.copy(B[bx * block], B_local)
            for i in T.Parallel(block):
                C_local[i] = A_local[i] * SCALE + B_local[i]
            T.copy(C_local, C[bx * block])

    return add
"""
A_LINE = FACTORY.splitlines().index("        A: T.Tensor((m,), dtype),") + 1


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(directory))
    monkeypatch.delenv("TILECRAFT_JIT_CACHE", raising=False)
    monkeypatch.delenv("TILECRAFT_DUMP_IR", raising=False)
    return directory


def load_factory(tmp_path, scale="2.0"):
    """Write the factory module to `tmp_path/kernels.py` and import it afresh (as a new process
    would: no kernel in memory)."""
    path = tmp_path / "kernels.py"
    path.write_text(FACTORY.format(scale=scale))
    spec = importlib.util.spec_from_file_location("kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scaled_add


def fresh_process_view():
    default_cache().clear_memory()


def entries(cache_dir):
    return sorted((cache_dir / "jit").rglob("*.json")) if (cache_dir / "jit").exists() else []


def test_second_process_finds_the_kernel_without_the_front_end(tmp_path, cache_dir):
    cold = load_factory(tmp_path)()
    source = cold.get_kernel_source()
    assert cold._cached is None and len(entries(cache_dir)) == 1
    fresh_process_view()
    calls = nvrtc_invocations()
    warm = load_factory(tmp_path)()
    assert warm._cached is not None and warm._func is None  # no IR was built
    assert warm.get_kernel_source() == source and warm.resources == cold.resources
    assert nvrtc_invocations() == calls  # the cubin came from the runtime cache
    assert warm._func is None and warm.out_idx == cold.out_idx == [2]


def test_a_new_process_hit_imports_neither_ir_nor_passes(tmp_path, cache_dir):
    path = tmp_path / "kernels.py"
    path.write_text(FACTORY.format(scale="2.0"))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import kernels
        k = kernels.scaled_add()
        k.resources
        print(k._cached is not None, *(m in sys.modules for m in
              ("tilecraft.ir", "tilecraft.passes", "tilecraft.frontend.parser",
               "tilecraft.codegen.cuda.build")))
    """)
    env = dict(os.environ, TILECRAFT_CACHE_DIR=str(cache_dir))
    run = [sys.executable, "-c", script]
    cold = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    warm = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    assert cold.split() == ["False", "True", "True", "True", "True"]
    assert warm.split() == ["True", "False", "False", "False", "False"]


@pytest.mark.gpu
def test_a_new_process_hit_launches_without_cuda_bindings(tmp_path, cache_dir):
    """The cache-hit path loads and launches the cubin through ctypes: importing cuda-bindings'
    driver module would cost 20-55 ms of the new process's start."""
    path = tmp_path / "kernels.py"
    path.write_text(FACTORY.format(scale="3.0").replace(', arch="sm_80"', ""))
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(tmp_path)!r})
        import kernels
        a = torch.randn(1000, device="cuda")
        b = torch.randn(1000, device="cuda")
        c = kernels.scaled_add()(a, b)
        ok = torch.allclose(c, a * 3.0 + b)
        print(kernels.scaled_add()._cached is not None, ok, "cuda.bindings.driver" in sys.modules)
    """)
    env = dict(os.environ, TILECRAFT_CACHE_DIR=str(cache_dir))
    run = [sys.executable, "-c", script]
    cold = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    warm = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    assert cold.split()[:2] == ["False", "True"]
    assert warm.split() == ["True", "True", "False"]


def test_an_edit_of_the_kernel_source_misses(tmp_path, cache_dir):
    before = load_factory(tmp_path, scale="2.0")()
    before.get_kernel_source()
    after = load_factory(tmp_path, scale="3.0")()
    assert after._cached is None
    assert after.get_kernel_source() != before.get_kernel_source()
    assert len(entries(cache_dir)) == 2
    again = load_factory(tmp_path, scale="3.0")()
    assert again._cached is not None and again.get_kernel_source() == after.get_kernel_source()


def test_other_arguments_miss_and_defaults_written_out_hit(tmp_path):
    factory = load_factory(tmp_path)
    factory().get_kernel_source()
    fresh = load_factory(tmp_path)
    assert fresh(block=512)._cached is None
    assert fresh(threads=128)._cached is not None  # the default, spelled out
    assert fresh(256, 128, "float32")._cached is not None


def test_another_tilecraft_misses(tmp_path, monkeypatch):
    load_factory(tmp_path)().get_kernel_source()
    monkeypatch.setattr(tilecraft, "__version__", "9.9.9")
    assert load_factory(tmp_path)()._cached is None
    monkeypatch.undo()
    monkeypatch.setattr(jit_cache, "tilecraft_sources_hash", lambda: "edited compiler")
    assert load_factory(tmp_path)()._cached is None


def test_another_target_misses(tmp_path):
    factory = load_factory(tmp_path)
    factory().get_kernel_source()
    key = jit_cache.call_key(factory.factory, (), {}, factory.options)
    assert key == jit_cache.call_key(factory.factory, (), {}, factory.options)
    assert key != jit_cache.call_key(factory.factory, (), {}, dict(factory.options, arch="sm_90a"))


def edited(text, path, value):
    """`text` (an entry's JSON) with the field at `path` set to `value`."""
    data = json.loads(text)
    *parents, last = path
    node = data
    for name in parents:
        node = node[name]
    node[last] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # a partial write
        lambda text: "{not json",
        lambda text: "[]",
        lambda text: edited(text, ["key"], "0" * 64),  # another key's entry
        lambda text: edited(text, ["format"], 0),
        lambda text: edited(text, ["kernel", "grid"], [["rm -rf", 1]]),
        lambda text: edited(text, ["kernel", "params", 0, "dtype"], "float99"),
        lambda text: edited(text, ["kernel", "span"], ["x", "one", 0, None]),
        lambda text: edited(text, ["jit"], None),
    ],
    ids=["partial", "not-json", "list", "key", "format", "grid", "dtype", "span", "jit"],
)
def test_a_damaged_entry_is_a_miss_and_is_rewritten(tmp_path, cache_dir, damage):
    source = load_factory(tmp_path)().get_kernel_source()
    (path,) = entries(cache_dir)
    path.write_text(damage(path.read_text()))
    kernel = load_factory(tmp_path)()
    assert kernel._cached is None and kernel.get_kernel_source() == source
    assert load_factory(tmp_path)()._cached is not None  # rewritten whole


def test_a_missing_cubin_is_compiled_again_from_the_stored_source(tmp_path, cache_dir):
    source = load_factory(tmp_path)().get_kernel_source()
    for cubin in (cache_dir / "cubin").rglob("*"):
        if cubin.is_file():
            cubin.unlink()
    fresh_process_view()
    calls = nvrtc_invocations()
    kernel = load_factory(tmp_path)()
    assert kernel.get_kernel_source() == source and kernel.resources.registers > 0
    assert nvrtc_invocations() == calls + 1


def test_the_cache_can_be_turned_off(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("TILECRAFT_JIT_CACHE", "0")
    load_factory(tmp_path)().get_kernel_source()
    assert entries(cache_dir) == []
    monkeypatch.delenv("TILECRAFT_JIT_CACHE")
    factory = load_factory(tmp_path)
    off = tilecraft.jit(out_idx=[-1], arch="sm_80", cache=False)(factory.factory)
    off().get_kernel_source()
    assert entries(cache_dir) == []


def test_values_without_a_fingerprint_make_a_call_uncacheable(cache_dir):
    class Opaque:
        pass

    fp = jit_cache.Fingerprint()
    with pytest.raises(jit_cache.Unkeyable):
        fp.value(Opaque())
    with pytest.raises(jit_cache.Unkeyable):
        fp.value(torch.zeros(2))
    opaque = Opaque()

    def factory(n):
        return opaque

    assert jit_cache.call_key(factory, (4,), {}, {}) is None
    assert jit_cache.call_key(lambda n: n, (4,), {}, {}) is not None
    assert jit_cache.call_key(lambda n: n, (4,), {}, {}) != jit_cache.call_key(
        lambda n: n, (5,), {}, {}
    )


def test_the_grid_is_stored_as_an_expression_of_the_dynamic_dims(tmp_path):
    cold = load_factory(tmp_path)()
    spec = cold._cuda_kernel().launch_spec
    warm = load_factory(tmp_path)()
    warm_spec = warm._cuda_kernel().launch_spec
    for m in (1, 255, 256, 257, 100_000):
        assert warm_spec.grid_dims({"m": m}) == spec.grid_dims({"m": m}) == ((m + 255) // 256, 1, 1)


def test_a_cached_kernel_builds_its_ir_for_the_interpreter(tmp_path):
    load_factory(tmp_path)().get_kernel_source()
    warm = load_factory(tmp_path)()
    assert warm._func is None
    a, b = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(warm(a, b), a * 2 + b)
    assert warm.func.name == "add" and "T.copy" in warm.script()


@pytest.mark.parametrize("where", ["cold", "cached"])
def test_argument_errors_point_at_the_parameter_from_the_cache_too(tmp_path, where):
    kernel = load_factory(tmp_path)()
    kernel.get_kernel_source()
    if where == "cached":
        kernel = load_factory(tmp_path)()
        assert kernel._cached is not None
    kernel.target = "cuda"
    a = torch.zeros(300)
    with pytest.raises(LaunchArgumentError) as info:
        kernel(a.half(), a)
    err = info.value
    assert err.code == "TC303" and err.line == A_LINE and err.file.endswith("kernels.py")
    with pytest.raises(TilecraftError) as info:
        kernel(a)
    assert info.value.code == "TC301" and "outputs ['C'] are allocated" in str(info.value)
    with pytest.raises(LaunchArgumentError) as info:
        kernel(a, torch.zeros(301))
    assert info.value.code == "TC305" and "`m` is 300 (in `A`)" in info.value.message
    with pytest.raises(LaunchArgumentError) as info:
        kernel(a, a)
    assert info.value.code == "TC304"  # last: every other check passed
