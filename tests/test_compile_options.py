"""CompileOptions: made in jit.py from the jit arguments and the environment, passed down; the
compiler below jit.py never reads the environment, and every switch is part of the cache key."""

import re
import sys
from pathlib import Path

import pytest

import tilecraft
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.options import CompileOptions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from gemm import matmul

# the runtime's path discovery (cache directory, CUDA headers) and its compiled launcher ($CC,
# TILECRAFT_NATIVE_LAUNCH=0: how calls launch, not what is compiled) may read the environment,
# and the autotuner (a decorator above jit: TILECRAFT_AUTOTUNE=0)
ALLOWED = {"jit.py", "jit_cache.py", "jit_factory.py", "jit_key.py", "options.py", "targets.py",
           "runtime/cache.py", "runtime/paths.py", "runtime/native_launch.py", "tune/tuner.py",
           "tune/autotuned.py"}


def test_nothing_below_jit_reads_the_environment():
    readers = []
    for path in sorted((ROOT / "tilecraft").rglob("*.py")):
        rel = path.relative_to(ROOT / "tilecraft").as_posix()
        if rel not in ALLOWED and re.search(r"os\.environ|os\.getenv|getenv\(", path.read_text()):
            readers.append(rel)
    assert readers == []


def test_the_environment_turns_switches_off():
    env = {"TILECRAFT_WGMMA": "0", "TILECRAFT_TMA": "0", "TILECRAFT_ARCH": "sm_80",
           "TILECRAFT_DUMP_IR": "/tmp/ir"}
    o = CompileOptions.from_env(environ=env)
    assert (o.target.arch, o.wgmma, o.wgmma_pipeline, o.tma, o.dump_ir) \
        == ("sm_80", False, True, False, "/tmp/ir")
    assert CompileOptions.from_env("sm_90a", environ=env).target.arch == "sm_90a"  # given wins


def test_every_switch_changes_the_key_and_the_dump_directory_does_not():
    base = CompileOptions.for_arch("sm_90a")
    keys = {base.key()} | {base.replace(**{s: False}).key()
                           for s in ("wgmma", "wgmma_pipeline", "tma")}
    assert len(keys) == 4
    assert base.replace(dump_ir="/tmp/x").key() == base.key()
    assert CompileOptions.for_arch("sm_80").key() != base.key()


def test_generate_cuda_follows_its_options_not_the_environment(monkeypatch):
    k = matmul(1024, 1024, 1024, 128, 256, 64, num_stages=3, threads=256)
    monkeypatch.setenv("TILECRAFT_WGMMA", "0")
    assert generate_cuda(k.func, "sm_90a").state.gemm_wgmma  # defaults: the env is jit's
    off = CompileOptions.for_arch("sm_90a", wgmma=False)
    assert not generate_cuda(k.func, options=off).state.gemm_wgmma
    with pytest.raises(ValueError, match="sm_80"):
        generate_cuda(k.func, "sm_80", options=off)


def test_jit_reads_the_environment_into_its_options(monkeypatch, tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))

    @tilecraft.jit(arch="sm_90a")
    def gemm(n):
        return matmul(n, n, n, 128, 256, 64, num_stages=3, threads=256).func

    assert "tc::wgmma" in gemm(512).get_kernel_source()
    monkeypatch.setenv("TILECRAFT_WGMMA", "0")  # neither the kernel in memory nor on disk
    assert "tc::wgmma" not in gemm(512).get_kernel_source()
