"""Launch checks made before the driver is called, on a CPU machine with a recording fake driver:
grid and block limits (ctypes would truncate a grid of 2^32 + 1 blocks to 1), pointer alignment
for the kernel's vector accesses, and one argument checker for the GPU and the interpreter."""

import numpy as np
import pytest
import torch
from test_launch_path_fake_driver import CUBIN, fake, on_cuda  # noqa: F401 - fake is a fixture

from tilecraft.diagnostics import Span
from tilecraft.runtime import (
    ArgChecker,
    CompiledCubin,
    LaunchArgumentError,
    LaunchSpec,
    Resources,
    RuntimeKernel,
    ScalarParam,
    TensorParam,
)

SPAN = Span(__file__, 7, 4)  # where the errors of these kernels point
COMPILED = CompiledCubin("k", "sm_90a", CUBIN, Resources(registers=8))
N_PARAMS = (TensorParam("x", "float32", ("n",)), ScalarParam("n", "int32", dim="n"))


def kernel(grid, block=(128,), params=N_PARAMS, cluster=None):
    checker = ArgChecker(params, kernel="k", span=SPAN)
    spec = LaunchSpec(grid=grid, block=block, cluster=cluster)
    return RuntimeKernel(COMPILED, params, spec, checker=checker)


def launch_error(k, *args, **kw) -> LaunchArgumentError:
    with pytest.raises(LaunchArgumentError) as info:
        k.launch(*args, stream=0, **kw)
    assert info.value.line == SPAN.line
    return info.value


# ---- grid and block ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "grid, n, axis, value, why",
    [
        ((lambda d: d["n"] * 2**22 + 1,), 1024, "x", 2**32 + 1, "at most 2147483647"),
        ((lambda d: d["n"] * 2**21,), 1024, "x", 2**31, "at most 2147483647"),
        ((1, lambda d: d["n"] * 100), 1000, "y", 100_000, "at most 65535 blocks along y"),
        ((1, 1, lambda d: d["n"] + 65_000), 536, "z", 65_536, "at most 65535 blocks along z"),
        ((lambda d: (d["n"] - 10) // 4,), 4, "x", -2, "a negative number"),
        ((lambda d: d["n"] / 2,), 5, "x", "2.5", "not an integer"),
    ],
    ids=["x-2^32+1", "x-2^31", "y", "z", "negative", "float"],
)
def test_a_grid_beyond_cuda_limits_is_refused_before_the_driver(fake, grid, n, axis, value, why):
    err = launch_error(kernel(grid), on_cuda(torch.zeros(n)))
    assert err.code == "TC309" and f"{value} blocks along grid {axis}" in err.message
    assert why in err.message and f"n={n}" in err.hint
    assert fake.launches == [] and fake.calls == []


def test_an_overridden_grid_is_checked_too(fake):
    err = launch_error(kernel((1,)), on_cuda(torch.zeros(4)), grid=(2**32 + 1,))
    assert err.code == "TC309" and "4294967297 blocks along grid x" in err.message
    assert fake.launches == []


def test_an_empty_grid_launches_nothing_and_calls_no_driver(fake):
    k = kernel((lambda d: (d["n"] + 127) // 128,))
    assert k(on_cuda(torch.zeros(0)), stream=0) is None
    assert fake.calls == [] and fake.launches == []
    k(on_cuda(torch.zeros(300)), stream=0)
    assert [launch[0] for launch in fake.launches] == [(3, 1, 1)]


def test_the_largest_grid_cuda_takes_is_launched(fake):
    k = kernel((lambda d: 2**31 - 1, 65535, lambda d: d["n"] + 65531))
    k(on_cuda(torch.zeros(4)), stream=0)
    assert fake.launches[0][0] == (2**31 - 1, 65535, 65535)


def test_a_grid_that_is_no_multiple_of_the_cluster_is_refused(fake):
    err = launch_error(kernel((lambda d: d["n"],), cluster=(2,)), on_cuda(torch.zeros(7)))
    assert err.code == "TC309" and "multiple of the cluster's 2 blocks" in err.message


@pytest.mark.parametrize(
    "block, why",
    [((2048,), "x must be 1 to 1024"), ((0,), "x must be 1 to 1024"),
     ((32, 32, 2), "2048 threads in all"), ((1, 1, 65), "z must be 1 to 64")],
)
def test_a_block_beyond_cuda_limits_is_refused_when_the_kernel_is_made(block, why):
    with pytest.raises(LaunchArgumentError) as info:
        kernel((1,), block=block)
    assert info.value.code == "TC310" and why in info.value.message
    assert info.value.line == SPAN.line


def test_a_jit_kernel_whose_dynamic_grid_passes_the_limit_is_refused_at_its_definition(
    fake, monkeypatch
):
    import tilecraft
    import tilecraft.language as T
    from tilecraft.runtime import kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "_current_stream", lambda device: 0)  # torch has no CUDA

    m = T.dynamic("m")

    @T.prim_func
    def doubled(A: T.Tensor((m,), "float32")):
        with T.Kernel(1, T.ceildiv(m, 32), threads=32) as (bx, by):
            A_f = T.alloc_fragment((32,), "float32")
            T.copy(A[by * 32], A_f)
            for i in T.Parallel(32):
                A_f[i] = A_f[i] * 2.0
            T.copy(A_f, A[by * 32])

    k = tilecraft.compile(doubled, target="cuda", arch="sm_90a")
    k(on_cuda(torch.zeros(32 * 65535)))  # the largest grid along y
    assert [launch[0] for launch in fake.launches] == [(1, 65535, 1)]
    with pytest.raises(LaunchArgumentError) as info:
        k(on_cuda(torch.zeros(32 * 65535 + 1)))
    err = info.value
    assert err.code == "TC309" and "65536 blocks along grid y" in err.message
    assert "m=2097121" in err.hint and err.line == doubled.span.line
    assert len(fake.launches) == 1


# ---- pointer alignment for vector accesses ------------------------------------------------------
HALF_PARAMS = (TensorParam("x", "float16", ("n",), align=16), ScalarParam("n", "int32", dim="n"))


def test_a_view_at_a_2_byte_offset_is_refused_for_16_byte_vector_accesses(fake):
    k = kernel((1,), params=HALF_PARAMS)
    view = on_cuda(torch.empty(1025, dtype=torch.float16)[1:])
    assert view.is_contiguous() and view.data_ptr() % 16 == 2
    err = launch_error(k, view)
    assert err.code == "TC308" and "`x` is not 16-byte aligned" in err.message
    assert "address is 2 mod 16" in err.message and "`x.clone()`" in err.hint
    assert fake.launches == []
    k(on_cuda(view.clone()), stream=0)  # the fix the hint gives
    assert len(fake.launches) == 1


def test_a_parameter_without_vector_accesses_takes_any_address(fake):
    params = (TensorParam("x", "float16", ("n",)), ScalarParam("n", "int32", dim="n"))
    kernel((1,), params=params)(on_cuda(torch.empty(1025, dtype=torch.float16)[1:]), stream=0)
    assert len(fake.launches) == 1


def vector_kernels():
    import tilecraft.language as T

    @T.prim_func
    def staged(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), "float16")
            T.copy(A, A_s)  # 16-byte vectors global -> shared
            for i, j in T.Parallel(64, 64):
                B[i, j] = A_s[i, j]  # element by element

    @T.prim_func
    def pairs(A: T.Tensor((128, 2), "float32"), B: T.Tensor((128, 2), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_f = T.alloc_fragment((128, 2), "float32")
            T.copy(A, A_f)  # a row of two floats per thread: 8-byte vectors
            T.copy(A_f, B)

    return staged, pairs


def test_the_code_generator_records_each_tensors_widest_vector_access():
    from tilecraft.codegen.cuda.build import generate_cuda

    staged, pairs = vector_kernels()
    aligns, sources = {}, {}
    for f in (staged, pairs):
        gen = generate_cuda(f, "sm_90a")
        aligns[f.name] = {p.name: p.align for p in gen.params if isinstance(p, TensorParam)}
        sources[f.name] = gen.source
    assert aligns == {"staged": {"A": 16, "B": 0}, "pairs": {"A": 8, "B": 8}}
    assert "tc::load_vec<half, 8>(&A_[" in sources["staged"]
    assert "B_[" in sources["staged"] and "_vec<half, 8>(&B_" not in sources["staged"]
    assert "tc::load_vec<float, 2>(&A_[" in sources["pairs"]
    assert "tc::store_vec<float, 2>(&B_[" in sources["pairs"]


def test_a_misaligned_tensor_is_refused_at_its_parameter_line(fake, monkeypatch):
    import tilecraft
    from tilecraft.runtime import kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "_current_stream", lambda device: 0)
    staged, _ = vector_kernels()
    k = tilecraft.compile(staged, target="cuda", arch="sm_90a")
    a = torch.empty(64 * 64 + 1, dtype=torch.float16)[1:].view(64, 64)
    with pytest.raises(LaunchArgumentError) as info:
        k(on_cuda(a), on_cuda(torch.empty(64, 64, dtype=torch.float16)))
    err = info.value
    assert err.code == "TC308" and "`A` is not 16-byte aligned" in err.message
    assert err.line == staged.params[0].span.line and fake.launches == []
    b = torch.empty(64 * 64 + 1, dtype=torch.float16)[1:].view(64, 64)  # B: scalar stores only
    k(on_cuda(a.clone()), on_cuda(b))
    assert len(fake.launches) == 1


# ---- one checker for the GPU path and the interpreter -------------------------------------------
def scalar_kernel():
    import tilecraft.language as T

    m = T.dynamic("m")

    @T.prim_func
    def axpby(
        A: T.Tensor((m,), "float32"),
        B: T.Tensor((m,), "float32"),
        alpha: T.float32,
        k: T.int32,
        Out: T.Tensor((m,), "float32"),
    ):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Out[bx * 128 + i] = alpha * A[bx * 128 + i] + B[bx * 128 + i] * k

    return axpby


def good(**over):
    base = {"A": torch.ones(256), "B": torch.ones(256), "alpha": 0.5, "k": 3}
    base.update(over)
    return [base["A"], base["B"], base["alpha"], base["k"]]


BAD_CALLS = {
    "k-float": good(k=3.7),
    "k-bool": good(k=True),
    "k-none": good(k=None),
    "k-too-big": good(k=2**31),
    "k-too-small": good(k=-(2**31) - 1),
    "k-array": good(k=np.ones(3, dtype=np.int32)),
    "alpha-none": good(alpha=None),
    "alpha-bool": good(alpha=False),
    "alpha-str": good(alpha="0.5"),
    "alpha-huge-int": good(alpha=10**400),
    "A-dtype": good(A=torch.ones(256, dtype=torch.float16)),
    "A-rank": good(A=torch.ones(256, 1)),
    "B-length": good(B=torch.ones(257)),
    "B-strided": good(B=torch.ones(512)[::2]),
    "A-list": good(A=[1.0] * 256),
    "count": good()[:3],
}


def both_errors(args, monkeypatch, targets=("interp", "cuda")):
    """The error of one call on the interpreter (CPU tensors) and on the GPU path (the same
    tensors as CUDA tensors, a fake driver); either is None when the call passed."""
    import tilecraft
    from tilecraft.diagnostics import TilecraftError
    from tilecraft.runtime import kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "_current_stream", lambda device: 0)
    func = scalar_kernel()
    out = []
    for target, wrap in (("interp", lambda a: a), ("cuda", on_cuda)):
        if target not in targets:
            continue
        k = tilecraft.compile(func, out_idx=[-1], target=target, arch="sm_90a")
        try:
            k(*[wrap(a) if isinstance(a, torch.Tensor) else a for a in args])
            out.append(None)
        except TilecraftError as err:
            out.append(err)
    return out


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_the_interpreter_and_the_gpu_path_refuse_a_bad_call_alike(fake, monkeypatch, name):
    interp_err, gpu_err = both_errors(BAD_CALLS[name], monkeypatch)
    assert interp_err is not None and gpu_err is not None
    assert (interp_err.code, interp_err.message, interp_err.hint, interp_err.span) == (
        gpu_err.code, gpu_err.message, gpu_err.hint, gpu_err.span)
    assert str(interp_err) == str(gpu_err)
    assert fake.launches == []


def test_scalar_errors_name_the_parameter_and_point_at_its_line(fake, monkeypatch):
    func = scalar_kernel()
    interp_err, _ = both_errors(good(k=3.7), monkeypatch)
    assert interp_err.code == "TC303"
    assert interp_err.message == "argument `k` has dtype float, expected int32"
    assert interp_err.line == func.params[3].span.line
    interp_err, _ = both_errors(good(k=2**31), monkeypatch)
    assert "2147483648 (out of range)" in interp_err.message
    assert both_errors(good(), monkeypatch, targets=("interp",)) == [None]


def test_good_scalars_of_every_accepted_form_run_on_the_interpreter():
    import tilecraft

    k = tilecraft.compile(scalar_kernel(), out_idx=[-1], target="interp")
    a, b = torch.randn(256), torch.randn(256)
    for alpha, kk in ((0.5, 3), (np.float32(0.5), np.int64(3)), (1, torch.tensor(3))):
        torch.testing.assert_close(k(a, b, alpha, kk), float(alpha) * a + b * 3)


@pytest.mark.parametrize(
    "kind, value, bits",
    [("float16", 1.5, 0x3E00), ("float16", 1e6, 0x7C00), ("bfloat16", 1.5, 0x3FC0),
     ("bfloat16", -2, 0xC000), ("bool", True, True), ("int8", -128, -128), ("uint16", 65535, 65535),
     ("uint64", 2**64 - 1, 2**64 - 1)],
)
def test_every_scalar_kind_packs_its_value_into_the_parameter_block(kind, value, bits):
    from tilecraft.runtime import check_args
    from tilecraft.runtime.launch import ParamBlock

    (packed,) = check_args((ScalarParam("s", kind),), [value], require_cuda=False).values
    assert packed == bits
    block = ParamBlock([kind])
    block.fill([packed])
    assert block.values() == [bits]


@pytest.mark.parametrize(
    "kind, value, got",
    [("int8", 128, "128 (out of range)"), ("uint8", -1, "-1 (out of range)"),
     ("uint32", 1.0, "float"), ("bool", 1, "int"), ("bool", None, "NoneType"),
     ("float16", True, "bool"), ("bfloat16", "1", "str")],
)
def test_a_scalar_its_kind_cannot_hold_is_tc303(kind, value, got):
    from tilecraft.runtime import check_args

    with pytest.raises(LaunchArgumentError) as info:
        check_args((ScalarParam("s", kind),), [value], require_cuda=False)
    assert info.value.code == "TC303" and f"has dtype {got}, expected {kind}" in info.value.message


def test_a_scalar_parameter_no_kernel_argument_can_have_is_tc311_on_both_paths():
    import tilecraft
    import tilecraft.language as T
    from tilecraft.diagnostics import TilecraftError

    @T.prim_func
    def scaled(A: T.Tensor((128,), "float32"), s: T.float8_e4m3):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                A[i] = A[i] * s

    errors = []
    for target in ("interp", "cuda"):
        k = tilecraft.compile(scaled, target=target, arch="sm_90a")
        with pytest.raises(TilecraftError) as info:
            k(torch.zeros(128), 1.0) if target == "interp" else k.get_kernel_source()
        errors.append(info.value)
    assert [e.code for e in errors] == ["TC311", "TC311"]
    assert all(e.line == scaled.params[1].span.line for e in errors)
    assert "`s` has dtype float8_e4m3" in errors[0].message and "float32" in errors[0].hint


# ---- on a GPU (the lead runs these) -------------------------------------------------------------
@pytest.mark.gpu
def test_narrow_and_half_scalars_reach_the_kernel_on_the_gpu():
    import tilecraft
    import tilecraft.language as T

    @T.prim_func
    def mix(Out: T.Tensor((4,), "float32"), h: T.float16, b: T.bfloat16, c: T.int8,
            big: T.uint64, flag: T.boolean):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(4):
                Out[i] = T.if_then_else(
                    i == 0, T.cast(h, "float32"), T.if_then_else(
                        i == 1, T.cast(b, "float32"), T.if_then_else(
                            i == 2, T.cast(c, "float32"),
                            T.if_then_else(flag, T.cast(big >> 60, "float32"), -1.0))))

    out = torch.full((4,), 7.0, device="cuda")
    tilecraft.compile(mix, target="cuda")(out, 1.5, -2.5, -100, 2**64 - 1, True)
    torch.cuda.synchronize()
    assert out.tolist() == [1.5, -2.5, -100.0, 15.0]


@pytest.mark.gpu
def test_alignment_and_grid_checks_on_the_gpu():
    import tilecraft

    staged, _ = vector_kernels()
    k = tilecraft.compile(staged, target="cuda")
    a = torch.randn(64 * 64 + 1, device="cuda").half()[1:].view(64, 64)
    b = torch.empty(64 * 64 + 1, device="cuda", dtype=torch.float16)[1:].view(64, 64)
    with pytest.raises(LaunchArgumentError, match="TC308"):
        k(a, b)
    k(a.clone(), b)  # B is written element by element: any address
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a)
