"""A RuntimeKernel written down as JSON comes back whole in a fresh process view."""

import json

import pytest
import torch
from cuda_sources import VECTOR_ADD_KERNEL

from tilecraft.diagnostics import Span
from tilecraft.runtime import (
    ArgChecker,
    LaunchArgumentError,
    LaunchSpec,
    RuntimeKernel,
    ScalarParam,
    TensorParam,
    default_cache,
    nvrtc_invocations,
)
from tilecraft.runtime.record import GridExpr, KernelRecord

PARAMS = (
    TensorParam("a", "float32", ("n",)),
    TensorParam("b", "float32", ("n",)),
    TensorParam("out", "float32", ("n",)),
    ScalarParam("n", "int32", dim="n"),
)
BLOCKS = GridExpr(["//", ["+", ["dim", "n"], 255], 256])


def vector_add() -> RuntimeKernel:
    built = RuntimeKernel.from_source(
        VECTOR_ADD_KERNEL,
        "vector_add",
        PARAMS,
        LaunchSpec(grid=(BLOCKS,), block=(256,)),
        arch="sm_80",
    )
    checker = ArgChecker(PARAMS, kernel="add", outputs=("out",), writes=("out",),
                         spans={"b": Span("k.py", 3)})
    return RuntimeKernel(built.compiled, PARAMS, built.launch_spec, built.source, checker=checker)


def test_a_record_round_trips_through_json_without_nvrtc():
    kernel = vector_add()
    text = json.dumps(KernelRecord.of(kernel, (BLOCKS,)).to_json())
    default_cache().clear_memory()
    calls = nvrtc_invocations()
    again = KernelRecord.from_json(json.loads(text)).runtime_kernel()
    assert nvrtc_invocations() == calls and again.compiled.from_cache
    assert again.params == kernel.params and again.resources == kernel.resources
    assert again.compiled.cubin == kernel.compiled.cubin
    assert again.launch_spec.grid_dims({"n": 1000}) == (4, 1, 1)
    assert [p.name for p in again.caller_params] == ["a", "b"]
    with pytest.raises(LaunchArgumentError) as info:
        again.bind(torch.zeros(10), torch.zeros(11), require_cuda=False)
    assert info.value.code == "TC305" and info.value.line == 3 and "add" not in info.value.message
    x = torch.zeros(10)
    assert again.checker.writes == ("out",)  # so `a` and `b` may share memory
    assert again.bind(x, x, require_cuda=False).dims == {"n": 10}


def test_a_missing_cubin_is_compiled_from_the_recorded_source(isolated_cache_dir):
    record = KernelRecord.of(vector_add(), (BLOCKS,))
    for path in isolated_cache_dir.rglob("*.cubin"):
        path.unlink()
    default_cache().clear_memory()
    calls = nvrtc_invocations()
    assert record.runtime_kernel().resources.registers > 0
    assert nvrtc_invocations() == calls + 1


@pytest.mark.parametrize(
    "tree", [["dim"], ["dim", 3], ["**", 2, 3], ["+", 1], ["cast", ["x", 1]], [], 1.5, True, "n"]
)
def test_malformed_grid_trees_are_refused(tree):
    with pytest.raises(ValueError, match="not a grid expression"):
        GridExpr.checked(tree)


def test_grid_trees_evaluate_like_the_host_code():
    tree = ["max", ["cast", ["%", ["dim", "m"], 7]], ["-", ["*", 2, ["dim", "k"]], ["/", 7, 2]]]
    assert GridExpr.checked(tree)({"m": 20, "k": 3}) == max(20 % 7, 2 * 3 - 3)
