"""`tilecraft.jit(..., autotune=True)`: the factory comes back under tilecraft.autotune."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError
from tilecraft.tune.tuner import Autotuned


def scale_factory(n, block=128, threads=128):
    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    return scale


def test_jit_autotune_true_wraps_the_factory_and_runs_untimed_without_a_gpu(monkeypatch):
    monkeypatch.setenv("TILECRAFT_AUTOTUNE", "0")
    tuned = tilecraft.jit(out_idx=[-1], autotune={"configs": [{"block": 64}, {"block": 128}]})(
        scale_factory)
    assert isinstance(tuned, Autotuned)
    kernel = tuned(256)
    assert tuned.last_result.config == {"block": 64}  # untimed: the first candidate
    a = torch.randn(256)
    assert torch.equal(kernel(a), a * 2)


def test_jit_autotune_refuses_an_unknown_tuning_keyword_with_the_closest_name():
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(autotune={"top_k": 3})
    assert info.value.code == "TC111" and "`topk`" in str(info.value)


def test_jit_autotune_refuses_a_value_that_is_not_a_bool_recommend_or_dict():
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(autotune="yes")
    assert info.value.code == "TC108"


def test_jit_autotune_on_a_prim_func_is_refused():
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(scale_factory(256), autotune=True)
    assert info.value.code == "TC108" and "factory" in str(info.value)


def test_compile_has_no_autotune_keyword():
    with pytest.raises(TilecraftError) as info:
        tilecraft.compile(scale_factory(256), autotune=True)
    assert info.value.code == "TC111"
