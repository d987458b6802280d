"""Sub-byte and custom-float tensor arguments travel as their packed bytes (docs/dtypes.md "Host
side"): a contiguous uint8 or int8 tensor of any shape holding exactly ceil(prod(S) * b / 8)
bytes. Checked here on the argument checker both backends share (CPU tensors are enough), on the
GPU path's fast call (a recording stand-in for libcuda) and in what the interpreter is handed."""

import ml_dtypes
import numpy as np
import pytest
import torch
from test_launch_fast_path import libcuda, make_kernel  # noqa: F401 - libcuda is a fixture
from test_launch_path_fake_driver import on_cuda

import tilecraft
import tilecraft.language as T
from tilecraft.args import arg_checker, bind_arguments
from tilecraft.runtime import LaunchArgumentError, ScalarParam, TensorParam, check_args

n = T.dynamic("n")


@T.prim_func
def dequant_rows(
    A: T.Tensor((n,), "float32"),
    W: T.Tensor((n, 16), "int6"),  # W_LINE
    F: T.Tensor((4, 8), "float8_e4m3"),  # F_LINE
    Out: T.Tensor((n, 16), "uint4"),
):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(16):
            A[i] = 0.0


def marked_line(marker: str) -> int:
    with open(__file__) as f:
        hits = [k for k, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1
    return hits[0]


def call(a=None, w=None, f=None, out=None, rows=8):
    """Arguments of dequant_rows with `rows` rows (W: 12 bytes a row, Out: 8 bytes a row)."""
    return [torch.zeros(rows) if a is None else a,
            torch.zeros(12 * rows, dtype=torch.uint8) if w is None else w,
            torch.zeros(4, 8, dtype=torch.float8_e4m3fn) if f is None else f,
            torch.zeros(8 * rows, dtype=torch.uint8) if out is None else out]


def refused(args, outputs=()) -> LaunchArgumentError:
    with pytest.raises(LaunchArgumentError) as info:
        arg_checker(dequant_rows, outputs).bind(args, require_cuda=False)
    return info.value


# ---- what is accepted --------------------------------------------------------------------------
@pytest.mark.parametrize("w", [
    torch.zeros(96, dtype=torch.uint8), torch.zeros(8, 12, dtype=torch.uint8),
    torch.zeros(2, 3, 16, dtype=torch.int8), np.zeros(96, np.uint8), np.zeros((96, 1), np.int8)],
    ids=["flat", "2-d", "int8-3-d", "numpy", "numpy-int8"])
def test_packed_bytes_of_any_shape_are_taken_with_dims_bound_by_another_tensor(w):
    (dim, rows), = bind_arguments(dequant_rows, call(w=w)).items()
    assert dim.name == "n" and rows == 8
    bound = check_args([TensorParam("W", "int6", ("n", 16)), TensorParam("A", "float32", ("n",))],
                       [w, torch.zeros(8)], require_cuda=False)
    assert bound.values[0] == (w.data_ptr() if isinstance(w, torch.Tensor) else w.ctypes.data)


def test_fp8_takes_float8_tensors_of_its_shape_and_bytes_of_any_shape():
    for f in (torch.zeros(4, 8, dtype=torch.float8_e4m3fn), torch.zeros(32, dtype=torch.uint8),
              torch.zeros(2, 16, dtype=torch.int8), np.zeros((4, 8), ml_dtypes.float8_e4m3fn)):
        bind_arguments(dequant_rows, call(f=f))
    err = refused(call(f=torch.zeros(8, 4, dtype=torch.float8_e4m3fn)))
    assert err.code == "TC302"  # a float8 tensor has the logical shape
    err = refused(call(f=torch.zeros(31, dtype=torch.uint8)))
    assert err.code == "TC318" and err.line == marked_line("F_LINE")
    assert err.message == ("argument `F` holds 31 bytes, but float8_e4m3 of shape (4, 8) packs "
                           "into 32 bytes")


def test_a_custom_8_bit_float_is_bytes_one_per_element():
    bound = check_args([TensorParam("X", "float8_e3m4", (3, 5))],
                       [torch.zeros(15, dtype=torch.uint8)], require_cuda=False)
    assert bound.dims == {}
    with pytest.raises(LaunchArgumentError) as info:
        check_args([TensorParam("X", "float8_e3m4", (3, 5))],
                   [torch.zeros(3, 5, dtype=torch.float16)], require_cuda=False)
    assert info.value.code == "TC319"


# ---- what is refused, at the parameter's line --------------------------------------------------
def test_a_wrong_byte_count_is_tc318_naming_parameter_dtype_shape_and_both_counts():
    err = refused(call(w=torch.zeros(97, dtype=torch.uint8)))
    assert err.code == "TC318" and err.line == marked_line("W_LINE")
    assert err.message == ("argument `W` holds 97 bytes, but int6 of shape (8, 16) packs into "
                           "96 bytes")
    assert "pass exactly 96 bytes" in err.hint


def test_one_code_per_element_is_refused_with_a_hint_to_pack():
    err = refused(call(w=torch.zeros(8, 16, dtype=torch.uint8)))
    assert err.code == "TC318" and "holds 128 bytes" in err.message
    assert 'tilecraft.pack(codes, "int6")' in err.hint and "one byte per element" in err.hint


@pytest.mark.parametrize("w, hint", [
    (np.zeros((8, 16), ml_dtypes.int4), 'tilecraft.pack(codes, "int6")'),
    (torch.zeros(8, 16), 'tilecraft.pack(tilecraft.quantize_to(x, "int6"), "int6")'),
    (torch.zeros(48, dtype=torch.int16), 'tilecraft.pack(codes, "int6")')],
    ids=["ml_dtypes-per-element", "float-values", "int16"])
def test_a_tensor_that_is_not_bytes_is_tc319(w, hint):
    err = refused(call(w=w))
    assert err.code == "TC319" and err.line == marked_line("W_LINE")
    assert err.message.startswith("argument `W` has dtype ")
    assert "int6 tensors are passed as their packed bytes" in err.message and hint in err.hint


def test_non_contiguous_bytes_are_tc306():
    err = refused(call(w=torch.zeros(192, dtype=torch.uint8)[::2]))
    assert err.code == "TC306" and err.line == marked_line("W_LINE")


def test_a_dynamic_dim_only_a_packed_tensor_has_is_tc320():
    m = T.dynamic("m")

    @T.prim_func
    def alone(W: T.Tensor((m, 8), "uint4"), Out: T.Tensor((8,), "float32")):  # ALONE
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                Out[i] = 0.0

    with pytest.raises(LaunchArgumentError) as info:
        bind_arguments(alone, [torch.zeros(16, dtype=torch.uint8), torch.zeros(8)])
    err = info.value
    assert err.code == "TC320" and err.line == marked_line("ALONE")
    assert err.message.startswith("dynamic dimension `m` of `W` is set by no other argument")
    # an fp8 tensor passed as bytes cannot bind its dims either; as a float8 tensor it does
    params = [TensorParam("F", "float8_e5m2", ("m",))]
    with pytest.raises(LaunchArgumentError) as info:
        check_args(params, [torch.zeros(6, dtype=torch.uint8)], require_cuda=False)
    assert info.value.code == "TC320"
    assert check_args(params, [torch.zeros(6, dtype=torch.float8_e5m2)],
                      require_cuda=False).dims == {"m": 6}


def test_the_jit_interpreter_path_refuses_before_running():
    k = tilecraft.compile(dequant_rows, target="interp")
    with pytest.raises(tilecraft.TilecraftError) as info:
        k(*call(w=torch.zeros(95, dtype=torch.uint8)))
    assert info.value.code == "TC318" and info.value.line == marked_line("W_LINE")


def test_a_packed_parameter_cannot_have_strides():
    with pytest.raises(ValueError, match="packed bytes"):
        TensorParam("W", "uint4", (4, 4), strides=(4, 1))


# ---- outputs ---------------------------------------------------------------------------------
def test_packed_outputs_are_allocated_as_flat_bytes_of_the_packed_size():
    args = call()[:3]
    (out,) = arg_checker(dequant_rows, ["Out"]).bind(args, require_cuda=False).outputs
    assert out.dtype == torch.uint8 and out.shape == (64,)  # 8 x 16 uint4
    from tilecraft.runtime import ArgChecker

    params = [TensorParam("A", "float32", (3,)), TensorParam("X", "float6_e3m2", (3, 3))]
    (out,) = ArgChecker(params, outputs=["X"]).bind([torch.zeros(3)], require_cuda=False).outputs
    assert out.dtype == torch.uint8 and out.shape == (7,)  # 54 bits


# ---- the GPU path's fast call --------------------------------------------------------------------
PACKED = (TensorParam("x", "float32", ("n",)), TensorParam("w", "int4", ("n", 8)),
          TensorParam("out", "uint2", ("n", 8)), ScalarParam("n", "int32", dim="n"))


def test_the_fast_path_takes_packed_bytes_and_refuses_a_wrong_count_like_the_checker(libcuda):
    kernel, binds = make_kernel(libcuda, PACKED, outputs=("out",))
    kernel.checker.empty = lambda *shape, dtype, device: on_cuda(torch.empty(*shape, dtype=dtype))
    outs = []
    for rows in (6, 6, 6):
        x, w = on_cuda(torch.zeros(rows)), on_cuda(torch.zeros(4 * rows, dtype=torch.uint8))
        out = kernel(x, w)
        assert out.dtype == torch.uint8 and out.shape == (2 * rows,)
        outs.append((x, w, out))
    assert len(binds) == 1
    assert [launch[2] for launch in libcuda.launches] == [
        (x.data_ptr(), w.data_ptr(), o.data_ptr(), 6) for x, w, o in outs]
    with pytest.raises(LaunchArgumentError) as info:  # 6 rows of int4: 24 bytes, not 25
        kernel(on_cuda(torch.zeros(6)), on_cuda(torch.zeros(25, dtype=torch.uint8)))
    assert info.value.code == "TC318" and len(libcuda.launches) == 3


def test_a_static_packed_output_is_allocated_on_the_fast_path(libcuda):
    params = (TensorParam("x", "float32", (5,)), TensorParam("out", "int3", (5, 3)))
    kernel, binds = make_kernel(libcuda, params, outputs=("out",), grid=(1,))
    kernel.checker.empty = lambda *shape, dtype, device: on_cuda(torch.empty(*shape, dtype=dtype))
    for _ in range(3):
        out = kernel(on_cuda(torch.zeros(5)))
        assert out.dtype == torch.uint8 and out.shape == (6,)  # 45 bits
    assert len(binds) == 1 and len(libcuda.launches) == 3


# ---- the profiler's inputs ---------------------------------------------------------------------
@pytest.mark.parametrize("supply", list(tilecraft.TensorSupplyType))
def test_the_profiler_makes_packed_inputs_the_checker_accepts(supply):
    k = tilecraft.compile(dequant_rows, out_idx=[-1], target="interp")
    a, w, f = k.get_profiler(tensor_supply_type=supply, dynamic_sizes={"n": 5}).make_inputs()
    assert w.dtype == torch.uint8 and w.shape == (60,) and a.shape == (5,)
    arg_checker(dequant_rows, ["Out"]).bind([a, w, f], require_cuda=False)
    codes = tilecraft.unpack(w, "int6", (5, 16))
    if supply is tilecraft.TensorSupplyType.Zero:
        assert not codes.any()
    elif supply is tilecraft.TensorSupplyType.One:
        assert (codes == 1).all()
    else:
        assert len(codes.unique()) > 16  # random codes over the type's 64


def test_profiler_inputs_of_a_custom_float_are_quantized_values():
    @T.prim_func
    def fp4(X: T.Tensor((64,), "float4_e2m1"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Out[i] = 0.0

    k = tilecraft.compile(fp4, out_idx=[-1], target="interp")
    (x,) = k.get_profiler(tensor_supply_type=tilecraft.TensorSupplyType.One).make_inputs()
    assert x.dtype == torch.uint8 and x.shape == (32,)
    assert (tilecraft.dequantize(tilecraft.unpack(x, "float4_e2m1", 64), "float4_e2m1") == 1).all()
    torch.manual_seed(0)
    (x,) = k.get_profiler(tensor_supply_type=tilecraft.TensorSupplyType.Uniform).make_inputs()
    values = tilecraft.dequantize(tilecraft.unpack(x, "float4_e2m1", 64), "float4_e2m1")
    assert values.abs().max() <= 1 and len(values.unique()) > 2


# ---- end to end on the interpreter -------------------------------------------------------------
def test_the_host_side_example_of_docs_dtypes_runs(tmp_path):
    import runpy
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "dtypes.md").read_text()
    section = text.split("## Host side", 1)[1].split("\n## ", 1)[0]
    (example,) = [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]
    script = tmp_path / "host_side_example.py"  # the frontend reads the kernel's source file
    script.write_text(example)
    runpy.run_path(str(script))


def test_a_packed_output_holds_the_quantized_values_in_packed_bytes():
    @T.prim_func
    def requant(X: T.Tensor((8, 5), "float32"), Out: T.Tensor((8, 5), "float4_e2m1")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(8, 5):
                Out[i, j] = X[i, j]

    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(1)) * 3
    out = tilecraft.compile(requant, out_idx=[-1], target="interp")(x)
    assert out.dtype == torch.uint8 and out.shape == (20,)
    assert torch.equal(out, tilecraft.pack(tilecraft.quantize_to(x, "float4_e2m1"), "float4_e2m1"))
