"""Arguments are checked before any launch, with catalog errors; CPU tensors are enough to test it."""

import ctypes

import pytest
import torch
from cuda_sources import VECTOR_ADD_KERNEL

from tilecraft.diagnostics import TilecraftError
from tilecraft.runtime import (
    ArgChecker,
    CudaUnavailableError,
    LaunchArgumentError,
    LaunchSpec,
    RuntimeKernel,
    ScalarParam,
    TensorParam,
    check_args,
)
from tilecraft.runtime.launch import ParamBlock

PARAMS = (
    TensorParam("A", "float16", ("m", 64)),
    TensorParam("B", "float16", (64, "n")),
    TensorParam("C", "float32", ("m", "n")),
    ScalarParam("m", "int32", dim="m"),
    ScalarParam("alpha", "float32"),
)


def args(m=8, n=16, **over):
    base = {
        "A": torch.zeros(m, 64, dtype=torch.float16),
        "B": torch.zeros(64, n, dtype=torch.float16),
        "C": torch.zeros(m, n),
        "alpha": 0.5,
    }
    base.update(over)
    return [base["A"], base["B"], base["C"], base["alpha"]]


def error(*a, **kw) -> LaunchArgumentError:
    with pytest.raises(LaunchArgumentError) as info:
        check_args(PARAMS, a, kernel="gemm", **kw)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TilecraftError)
    return info.value


def test_good_arguments_bind_dims_and_values():
    a = args()
    bound = check_args(PARAMS, a, require_cuda=False)
    assert bound.dims == {"m": 8, "n": 16}
    assert bound.values == (a[0].data_ptr(), a[1].data_ptr(), a[2].data_ptr(), 8, 0.5)
    assert bound.device is None


def test_wrong_argument_count():
    err = error(*args()[:3])
    assert err.code == "TC301" and "takes 4 argument(s), got 3" in str(err)


def test_wrong_dtype_names_the_parameter():
    err = error(*args(A=torch.zeros(8, 64)))
    assert err.code == "TC303" and "`A` has dtype float32, expected float16" in str(err)


def test_not_a_tensor():
    assert error(*args(B=[1, 2])).code == "TC303"


def test_wrong_static_shape_and_rank():
    err = error(*args(A=torch.zeros(8, 32, dtype=torch.float16)))
    assert err.code == "TC302" and "(8, 32), expected (m, 64)" in str(err)
    assert error(*args(C=torch.zeros(8, 16, 1))).code == "TC302"


def test_inconsistent_dynamic_dim():
    err = error(*args(C=torch.zeros(9, 16)))
    assert err.code == "TC305" and "`m` is 8 (in `A`) in one argument and 9 in `C`" in str(err)


def test_non_contiguous_tensor():
    err = error(*args(C=torch.zeros(16, 8).t()))
    assert err.code == "TC306"


def test_scalar_type_and_range():
    assert error(*args(alpha="x")).code == "TC303"
    params = (ScalarParam("k", "int32"),)
    with pytest.raises(LaunchArgumentError, match="out of range"):
        check_args(params, [2**31], require_cuda=False)
    with pytest.raises(LaunchArgumentError):
        check_args(params, [1.5], require_cuda=False)


def test_cpu_tensor_fails_the_device_check_last():
    err = error(*args())
    assert err.code == "TC304" and "`A` is on cpu" in str(err)


def test_strides_can_be_dynamic_or_free():
    params = (
        TensorParam("X", "float32", ("m", "n"), strides=("ld", 1)),
        ScalarParam("ld", "int64", dim="ld"),
    )
    x = torch.zeros(4, 10)[:, :6]
    bound = check_args(params, [x], require_cuda=False)
    assert bound.dims == {"m": 4, "n": 6, "ld": 10} and bound.values[1] == 10
    with pytest.raises(LaunchArgumentError):
        check_args(params, [torch.zeros(6, 4).t()], require_cuda=False)


def test_grid_callables_see_the_bound_dims():
    spec = LaunchSpec(grid=(lambda d: (d["n"] + 127) // 128, 2), block=(128,))
    assert spec.grid_dims({"n": 1000}) == (8, 2, 1)
    assert spec.block_dims() == (128, 1, 1)
    with pytest.raises(ValueError):
        LaunchSpec(grid=(lambda d: -1,), block=(32,)).grid_dims({})
    with pytest.raises(ValueError):
        LaunchSpec(grid=(), block=(32,))


def test_param_block_holds_values_at_fixed_addresses():
    block = ParamBlock(["pointer", "int32", "int64", "float32"])
    before = block.address
    block.fill([0xDEAD0000, -3, 2**40, 1.5])
    assert block.values() == [0xDEAD0000, -3, 2**40, 1.5]
    assert block.address == before
    ptrs = (ctypes.c_void_p * 4).from_address(block.address)
    assert ctypes.c_int32.from_address(ptrs[1]).value == -3


def test_runtime_kernel_checks_before_needing_a_gpu():
    params = (
        TensorParam("a", "float32", ("n",)),
        TensorParam("b", "float32", ("n",)),
        TensorParam("out", "float32", ("n",)),
        ScalarParam("n", "int32", dim="n"),
    )
    kernel = RuntimeKernel.from_source(
        VECTOR_ADD_KERNEL,
        "vector_add",
        params,
        LaunchSpec(grid=(lambda d: (d["n"] + 255) // 256,), block=(256,)),
        arch="sm_90a",
    )
    assert kernel.resources.registers > 0
    assert [p.name for p in kernel.caller_params] == ["a", "b", "out"]
    x = torch.zeros(10)
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, x, torch.zeros(11))
    assert info.value.code == "TC305"
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, x.double(), x)
    assert info.value.code == "TC303"
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, torch.zeros(10), torch.zeros(10))
    assert info.value.code == "TC304"


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without a GPU"
)
def test_launch_without_gpu_is_a_clear_error():
    from tilecraft.runtime.driver import require_gpu

    with pytest.raises(
        CudaUnavailableError,
        match="this machine has no CUDA GPU; compiled for sm_90a, cannot launch",
    ):
        require_gpu("sm_90a")


OUT_PARAMS = (
    TensorParam("A", "float16", ("m", 64)),
    TensorParam("C", "float32", ("m", 32)),
    ScalarParam("m", "int32", dim="m"),
)


def test_outputs_are_allocated_from_the_bound_dims_and_not_passed():
    checker = ArgChecker(OUT_PARAMS, kernel="proj", outputs=("C",))
    assert [p.name for p in checker.caller_params] == ["A"]
    a = torch.zeros(5, 64, dtype=torch.float16)
    bound = checker.bind([a], require_cuda=False)
    (c,) = bound.outputs
    assert c.shape == (5, 32) and c.dtype == torch.float32 and c.device == a.device
    assert bound.values == (a.data_ptr(), c.data_ptr(), 5)


def test_count_error_names_the_outputs():
    checker = ArgChecker(OUT_PARAMS, kernel="proj", outputs=("C",))
    with pytest.raises(LaunchArgumentError) as info:
        checker.bind([torch.zeros(5, 64, dtype=torch.float16)] * 2, require_cuda=False)
    assert info.value.code == "TC301"
    assert "takes 1 argument(s), got 2" in str(info.value)
    assert "outputs ['C'] are allocated and returned" in str(info.value)


def test_an_output_no_input_can_size_is_an_error():
    params = (TensorParam("A", "float32", (4,)), TensorParam("C", "float32", ("k",)))
    checker = ArgChecker(params, outputs=("C",))
    with pytest.raises(TilecraftError) as info:
        checker.bind([torch.zeros(4)], require_cuda=False)
    assert info.value.code == "TC108" and "dimension `k` is not set by any input" in str(info.value)
    with pytest.raises(ValueError, match="not tensor parameters"):
        ArgChecker(params, outputs=("m",))


def test_errors_point_at_the_given_source_spans(tmp_path):
    from tilecraft.diagnostics import Span

    src = tmp_path / "k.py"
    src.write_text("def k(\n    A: T.Tensor((m, 64)),\n):\n")
    spans = {"A": Span(str(src), 2, 4, 24)}
    checker = ArgChecker(
        OUT_PARAMS, kernel="proj", outputs=("C",), spans=spans, span=Span(str(src), 1, 0)
    )
    with pytest.raises(LaunchArgumentError) as info:
        checker.bind([torch.zeros(5, 65, dtype=torch.float16)], require_cuda=False)
    assert info.value.code == "TC302" and info.value.line == 2
    assert "A: T.Tensor((m, 64))" in str(info.value) and "^^^^" in str(info.value)
    with pytest.raises(LaunchArgumentError) as info:
        checker.bind([], require_cuda=False)
    assert info.value.line == 1


def test_a_dim_bound_by_a_stride_is_checked_against_its_other_uses():
    params = (
        TensorParam("X", "float32", ("m", "n"), strides=("ld", 1)),
        TensorParam("Y", "float32", ("ld",)),
    )
    x = torch.zeros(4, 10)[:, :6]
    assert check_args(params, [x, torch.zeros(10)], require_cuda=False).dims["ld"] == 10
    with pytest.raises(LaunchArgumentError) as info:
        check_args(params, [x, torch.zeros(9)], require_cuda=False)
    assert info.value.code == "TC305" and "`ld` is 10 (in `X`)" in str(info.value)


def test_static_sizes_are_checked_before_dims_are_bound():
    err = error(*args(C=torch.zeros(9, 16), A=torch.zeros(8, 63, dtype=torch.float16)))
    assert err.code == "TC302"


def test_scalars_accept_index_and_float_like_values():
    import numpy as np

    params = (ScalarParam("k", "int64"), ScalarParam("x", "float32"), ScalarParam("u", "uint32"))
    bound = check_args(params, [np.int64(3), 2, torch.tensor(7)], require_cuda=False)
    assert bound.values == (3, 2.0, 7) and type(bound.values[1]) is float
    for bad in ([True, 1.0, 1], [1, "1", 1], [1, 1.0, -1]):
        with pytest.raises(LaunchArgumentError):
            check_args(params, bad, require_cuda=False)


def test_a_kernel_refuses_a_checker_made_for_other_params():
    compiled = RuntimeKernel.from_source(
        VECTOR_ADD_KERNEL,
        "vector_add",
        (TensorParam("a", "float32", ("n",)),),
        LaunchSpec(grid=(1,), block=(32,)),
        arch="sm_80",
    ).compiled
    with pytest.raises(ValueError, match="other parameters"):
        RuntimeKernel(
            compiled, OUT_PARAMS, LaunchSpec(grid=(1,), block=(32,)), checker=ArgChecker(PARAMS)
        )
