"""do_bench and the Profiler's generated inputs (CPU timing path here; GPU in test_gpu_launch)."""

import pytest
import torch

from tilecraft.profiler import Profiler, do_bench, get_profiler
from tilecraft.runtime import ScalarParam, TensorParam


def test_do_bench_returns_positive_milliseconds():
    x = torch.randn(256, 256)
    ms = do_bench(lambda: x @ x, warmup=1, rep=5)
    assert ms > 0
    runs = do_bench(lambda: x @ x, warmup=1, rep=5, return_mode="all")
    assert isinstance(runs, list) and len(runs) >= 1 and min(runs) > 0
    with pytest.raises(ValueError):
        do_bench(lambda: None, return_mode="p99")


class FakeKernel:
    params = (
        TensorParam("x", "float16", ("m", 4)),
        TensorParam("idx", "int32", (3,)),
        TensorParam("mask", "bool", ("m",)),
        ScalarParam("m", "int32", dim="m"),
        ScalarParam("scale", "float32"),
    )

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def test_profiler_makes_inputs_from_the_param_spec():
    kernel = FakeKernel()
    prof = Profiler(kernel, dynamic_sizes={"m": 5}, scalars={"scale": 2.0}, device="cpu")
    x, idx, mask, scale = prof.make_inputs()
    assert x.shape == (5, 4) and x.dtype == torch.float16 and x.float().std() > 0
    assert idx.dtype == torch.int32 and idx.abs().max() <= 8
    assert mask.dtype == torch.bool and scale == 2.0
    assert prof.do_bench(warmup=1, rep=2) > 0 and kernel.calls


def test_missing_dynamic_dim_is_explained():
    with pytest.raises(ValueError, match="dynamic dim `m`"):
        get_profiler(FakeKernel()).make_inputs()
