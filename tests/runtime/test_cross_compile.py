"""An explicit arch builds the cubin when the jit factory is called, GPU or not; launching
without a GPU is then a clear error, not a crash."""

import pytest

import tilecraft
import tilecraft.language as T

pytest.importorskip("cuda.bindings.nvrtc")


def _factory(**jit_options):
    @tilecraft.jit(out_idx=[1], cache=False, **jit_options)
    def double(n):
        @T.prim_func
        def k(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    Y[bx * 128 + i] = X[bx * 128 + i] * 2.0

        return k

    return double


def test_arch_option_builds_the_cubin_at_the_factory_call():
    kernel = _factory(arch="sm_80", target="cuda")(1000)
    assert kernel._cuda is not None  # built (or loaded from the cubin cache) by the call itself
    assert kernel.resources.registers > 0


def test_without_an_arch_the_build_waits_for_first_use(monkeypatch):
    monkeypatch.delenv("TILECRAFT_ARCH", raising=False)
    kernel = _factory(target="cuda")(1000)
    assert kernel._cuda is None


def test_launch_without_a_gpu_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    kernel = _factory(arch="sm_90a", target="cuda")(256)
    with pytest.raises(tilecraft.TilecraftError, match="CUDA device"):
        kernel(torch.ones(256))
