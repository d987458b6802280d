"""The disk caches trust nothing they read back: a damaged cubin or record is a miss with a
warning, compiled again and overwritten; never a crash, never a bad cubin handed to the driver."""

import json
import warnings

import pytest
from cuda_sources import VECTOR_ADD_KERNEL

from tilecraft.runtime import (
    CacheCorruptionWarning,
    compile_cuda,
    default_cache,
    nvrtc_invocations,
)


def compiled_entry(cache_dir):
    """Compile the vector add into the disk cache; its result and its two files."""
    first = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    (cubin,) = cache_dir.rglob("*.cubin")
    (record,) = cache_dir.rglob("*.json")
    default_cache().clear_memory()  # what a new process sees
    return first, cubin, record


def compile_again():
    """(result, NVRTC runs it took, warnings it issued)."""
    calls = nvrtc_invocations()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compile_cuda(VECTOR_ADD_KERNEL, "sm_80", name="vector_add")
    mine = [w for w in caught if issubclass(w.category, CacheCorruptionWarning)]
    return out, nvrtc_invocations() - calls, [str(w.message) for w in mine]


def assert_healed(first, cubin):
    """The entry on disk is whole again: a fresh lookup hits without NVRTC or warnings."""
    assert cubin.read_bytes() == first.cubin
    default_cache().clear_memory()
    again, runs, warned = compile_again()
    assert again.from_cache and runs == 0 and warned == []


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda data: data[: len(data) // 2], "bytes, its record says"),
        (lambda data: b"", "has 0 bytes"),
        (lambda data: bytes(len(data)), "sha256 differs"),  # same length, garbage
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "sha256 differs"),  # one bit
    ],
    ids=["truncated", "empty", "garbage", "one-bit"],
)
def test_a_damaged_cubin_is_a_miss_that_recompiles_and_overwrites(
    isolated_cache_dir, damage, reason
):
    first, cubin, _ = compiled_entry(isolated_cache_dir)
    cubin.write_bytes(damage(first.cubin))
    out, runs, warned = compile_again()
    assert runs == 1 and not out.from_cache and out.cubin == first.cubin
    assert len(warned) == 1 and reason in warned[0] and "compiling it again" in warned[0]
    assert_healed(first, cubin)


def test_a_missing_cubin_beside_its_record_is_a_miss(isolated_cache_dir):
    first, cubin, _ = compiled_entry(isolated_cache_dir)
    cubin.unlink()
    out, runs, warned = compile_again()
    assert runs == 1 and out.cubin == first.cubin
    assert len(warned) == 1 and "cubin is missing" in warned[0]
    assert_healed(first, cubin)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda text: text[: len(text) // 2], "not valid JSON"),
        (lambda text: "\x00\xff garbage", "not valid JSON"),
        (lambda text: "[1, 2]", "not a JSON object"),
        (lambda text: "[" * 100_000, "not valid JSON"),  # too deep for the parser
        (lambda text: _edited(text, "resources", "many"), "incomplete"),
        (lambda text: _edited(text, "cubin_bytes", "12"), "incomplete"),
        (lambda text: _edited(text, "cubin_bytes", 12), "its record says 12"),
        (lambda text: _edited(text, "cubin_sha256", "0" * 64), "sha256 differs"),
    ],
    ids=["partial", "garbage", "list", "deep", "resources", "length-type", "length", "hash"],
)
def test_a_damaged_record_is_a_miss_that_recompiles_and_overwrites(
    isolated_cache_dir, damage, reason
):
    first, cubin, record = compiled_entry(isolated_cache_dir)
    record.write_text(damage(record.read_text()))
    out, runs, warned = compile_again()
    assert runs == 1 and out.cubin == first.cubin and out.resources == first.resources
    assert len(warned) == 1 and reason in warned[0]
    assert json.loads(record.read_text())["cubin_sha256"]
    assert_healed(first, cubin)


def test_a_record_of_the_older_format_is_rewritten_quietly(isolated_cache_dir):
    first, cubin, record = compiled_entry(isolated_cache_dir)
    data = json.loads(record.read_text())
    del data["cubin_bytes"], data["cubin_sha256"]
    record.write_text(json.dumps(data))
    out, runs, warned = compile_again()
    assert runs == 1 and warned == [] and out.cubin == first.cubin
    assert_healed(first, cubin)


def _edited(text, field, value):
    data = json.loads(text)
    data[field] = value
    return json.dumps(data)


# ---- the jit cache's entries ------------------------------------------------------------------
def scaled_copy_factory():
    import tilecraft
    import tilecraft.language as T

    def scaled_copy(n=256):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2.0

        return k

    return tilecraft.jit(out_idx=[-1], arch="sm_80")(scaled_copy)


def jit_entry(cache_dir):
    (path,) = (cache_dir / "jit").rglob("*.json")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data["kernel"].update(source=data["kernel"]["source"].replace("2.0", "3.0")),
        lambda data: data["kernel"]["params"][0].update(name="B"),
        lambda data: data.update(sha256="0" * 64),
    ],
    ids=["source", "param", "hash"],
)
def test_a_jit_entry_whose_contents_do_not_match_their_hash_is_rebuilt(
    isolated_cache_dir, monkeypatch, damage
):
    monkeypatch.delenv("TILECRAFT_JIT_CACHE", raising=False)
    monkeypatch.delenv("TILECRAFT_DUMP_IR", raising=False)
    source = scaled_copy_factory()().get_kernel_source()
    path = jit_entry(isolated_cache_dir)
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    with pytest.warns(CacheCorruptionWarning, match="do not match their sha256"):
        kernel = scaled_copy_factory()()
    assert kernel._cached is None and kernel.get_kernel_source() == source
    healed = scaled_copy_factory()()  # rewritten whole
    assert healed._cached is not None and healed.get_kernel_source() == source


def test_a_jit_entry_that_is_not_json_warns_and_is_rebuilt(isolated_cache_dir, monkeypatch):
    monkeypatch.delenv("TILECRAFT_JIT_CACHE", raising=False)
    monkeypatch.delenv("TILECRAFT_DUMP_IR", raising=False)
    scaled_copy_factory()().get_kernel_source()
    path = jit_entry(isolated_cache_dir)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.warns(CacheCorruptionWarning, match="not valid JSON"):
        assert scaled_copy_factory()()._cached is None
    assert scaled_copy_factory()()._cached is not None
