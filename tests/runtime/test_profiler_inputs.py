"""`kernel.get_profiler()` makes the kernel's inputs from its signature (TileLang's profiler),
times it with `do_bench()`, runs it with `run_once()` and compares it with
`assert_allclose(ref)` — here on the interpreter (CPU tensors, wall-clock timing)."""

import math

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TensorSupplyType, TilecraftError
from tilecraft.profiler import ProfilerInputError


def marked_line(marker: str) -> int:
    with open(__file__) as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


@tilecraft.jit(out_idx=[-1], target="interp")
def axpy(block=64):
    n = T.dynamic("n")

    @T.prim_func
    def axpy_kernel(
        X: T.Tensor((n,), "float32"),
        Y: T.Tensor((n,), "float32"),
        alpha: T.float32,
        Out: T.Tensor((n,), "float32"),
    ):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                Out[bx * block + i] = alpha * X[bx * block + i] + Y[bx * block + i]

    return axpy_kernel


@tilecraft.jit(out_idx=[-1], target="interp")
def mixed():
    @T.prim_func
    def mixed_kernel(
        F: T.Tensor((16, 32), "float16"),
        I: T.Tensor((16, 32), "int32"),  # noqa: E741
        U: T.Tensor((16, 32), "uint8"),
        Out: T.Tensor((16, 32), "float32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(16, 32):
                Out[i, j] = F[i, j]

    return mixed_kernel


@tilecraft.jit(target="interp")
def double_in_place():
    @T.prim_func
    def double(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    return double


def test_do_bench_with_no_arguments_times_the_kernel():
    # it used to fail with TC301: the profiler built no inputs for a JITKernel
    profiler = axpy().get_profiler(dynamic_sizes={"n": 256}, scalars={"alpha": 0.5})
    ms = profiler.do_bench(warmup=1, rep=1)
    assert isinstance(ms, float) and ms > 0


def test_do_bench_takes_fixed_iteration_counts():
    calls = []
    profiler = axpy().get_profiler(dynamic_sizes={"n": 64}, scalars={"alpha": 1.0})
    times = profiler.do_bench(lambda *a: calls.append(1), n_warmup=3, n_repeat=7,
                              return_mode="all")
    assert len(times) == 7 and len(calls) == 1 + 3 + 7  # the estimate, warm-up, timed runs


def test_inputs_follow_the_signature_and_leave_out_the_outputs():
    profiler = axpy().get_profiler(dynamic_sizes={"n": 128}, scalars={"alpha": 3.0})
    x, y, alpha = profiler.make_inputs()
    assert x.shape == y.shape == (128,) and x.dtype == torch.float32 and alpha == 3.0
    assert x.std() > 0.5 and not torch.equal(x, y)


@pytest.mark.parametrize("supply, check", [
    (TensorSupplyType.Zero, lambda f: bool((f == 0).all())),
    (TensorSupplyType.One, lambda f: bool((f == 1).all())),
    (TensorSupplyType.Integer, lambda f: bool((f == f.round()).all() and f.abs().max() <= 2)),
    (TensorSupplyType.Uniform, lambda f: bool(f.abs().max() <= 1 and f.std() > 0.2)),
    (TensorSupplyType.Normal, lambda f: bool(f.std() > 0.5 and f.abs().max() > 1)),
    (TensorSupplyType.Randn, lambda f: bool(f.std() > 0.5)),
])
def test_supply_types_fill_floating_tensors(supply, check):
    f, i, u = mixed().get_profiler(tensor_supply_type=supply).make_inputs()
    assert f.dtype == torch.float16 and check(f.float())


def test_integer_tensors_get_small_random_integers():
    f, i, u = mixed().get_profiler().make_inputs()
    assert i.dtype == torch.int32 and -8 <= int(i.min()) < 0 <= int(i.max()) <= 7
    assert u.dtype == torch.uint8 and 0 <= int(u.min()) and int(u.max()) <= 15
    assert u.unique().numel() > 2


def test_assert_allclose_passes_against_a_correct_reference():
    profiler = axpy().get_profiler(dynamic_sizes={"n": 192}, scalars={"alpha": 2.0})
    profiler.assert_allclose(lambda x, y, alpha: alpha * x + y, atol=1e-6, rtol=1e-6)


def test_assert_allclose_names_the_output_and_its_worst_errors():
    profiler = axpy().get_profiler(dynamic_sizes={"n": 64}, scalars={"alpha": 2.0})
    with pytest.raises(AssertionError) as info:
        profiler.assert_allclose(lambda x, y, alpha: alpha * x + y + 0.25, atol=1e-3, rtol=1e-3)
    text = str(info.value)
    assert "output `Out` of kernel `axpy_kernel`" in text
    assert "64 of 64 elements" in text
    assert "max abs error 0.25" in text and "max rel error" in text


def test_assert_allclose_reports_nan_on_one_side():
    profiler = axpy().get_profiler(dynamic_sizes={"n": 64}, scalars={"alpha": 1.0})
    with pytest.raises(AssertionError, match="NaN in the kernel's output only: 0; in the "
                       "reference's only: 64"):
        profiler.assert_allclose(lambda x, y, alpha: torch.full_like(x, math.nan))


def test_assert_allclose_on_a_kernel_writing_in_place():
    def reference(a, b, factor=2):
        b.copy_(a * factor)

    profiler = double_in_place().get_profiler()
    profiler.assert_allclose(reference)
    with pytest.raises(AssertionError, match="output `B`"):
        profiler.assert_allclose(lambda a, b: reference(a, b, factor=3))
    with pytest.raises(AssertionError, match="no out_idx"):
        profiler.assert_allclose(lambda a, b: a * 2)


def test_assert_allclose_counts_the_outputs():
    profiler = axpy().get_profiler(dynamic_sizes={"n": 64}, scalars={"alpha": 1.0})
    with pytest.raises(AssertionError, match="returns 1 output"):
        profiler.assert_allclose(lambda x, y, alpha: (x, y))


def test_run_once_returns_the_kernels_output():
    out = axpy().get_profiler(dynamic_sizes={"n": 64}, scalars={"alpha": 1.0}).run_once()
    assert out.shape == (64,) and out.dtype == torch.float32


def test_a_dynamic_dim_without_a_size_is_refused_at_the_users_line():
    kernel = axpy()
    with pytest.raises(TilecraftError) as info:
        kernel.get_profiler(scalars={"alpha": 1.0})  # ERR-no-size
    e = info.value
    assert e.code == "TC315" and isinstance(e, ProfilerInputError)
    assert e.file == __file__ and e.line == marked_line("ERR-no-size")
    assert "dynamic dim `n`" in str(e) and "dynamic_sizes={'n': 1024}" in e.hint


def test_misspelled_sizes_and_scalars_are_refused_with_the_closest_name():
    kernel = axpy()
    with pytest.raises(TilecraftError, match="names `m`, which the kernel does not have") as info:
        kernel.get_profiler(dynamic_sizes={"m": 64, "n": 64}, scalars={"alpha": 1.0})
    assert "dynamic sizes: `n`" in info.value.hint
    with pytest.raises(TilecraftError, match="did you mean `alpha`"):
        kernel.get_profiler(dynamic_sizes={"n": 64}, scalars={"alpah": 1.0})
    with pytest.raises(TilecraftError, match="no value for scalar parameter `alpha`"):
        kernel.get_profiler(dynamic_sizes={"n": 64})


def test_an_unknown_supply_type_is_refused():
    with pytest.raises(TilecraftError, match="TensorSupplyType.Normal") as info:
        mixed().get_profiler(tensor_supply_type="normal")
    assert info.value.code == "TC315"


def test_tensor_supply_type_has_tilelangs_names():
    assert [t.name for t in TensorSupplyType] == [
        "Integer", "Uniform", "Normal", "Randn", "Zero", "One", "Auto"]


@tilecraft.jit(out_idx=[-1])
def gemm(M, N, K):
    @T.prim_func
    def gemm_kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),  # noqa: N803
                    C: T.Tensor((M, N), "float16")):  # noqa: N803
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return gemm_kernel


@pytest.mark.gpu
def test_the_profiler_on_the_gpu():
    profiler = gemm(512, 256, 128).get_profiler()
    assert profiler.make_inputs()[0].is_cuda
    profiler.assert_allclose(lambda a, b: a @ b, atol=1e-2, rtol=1e-2)
    assert 0 < profiler.do_bench(warmup=5, rep=20) < 100
    assert profiler.run_once().is_cuda
