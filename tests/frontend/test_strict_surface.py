"""The language surface is strict: every T.* function takes exactly the arguments it honours;
anything else is a located diagnostic (code + the user's line), never silently dropped.

Each factory below holds one mistake on the line tagged `# ERR`."""

import inspect

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError
from tilecraft.layout import local, make_swizzled_layout, spatial


def err_line(factory) -> int:
    lines, first = inspect.getsourcelines(factory)
    hits = [first + i for i, ln in enumerate(lines) if "# ERR" in ln]
    assert len(hits) == 1
    return hits[0]


def located(factory, code: str) -> TilecraftError:
    with pytest.raises(TilecraftError) as info:
        factory()
    err = info.value
    assert err.code == code, str(err)
    assert err.file == __file__
    assert err.line == err_line(factory), str(err)
    return err


# ---- unknown keywords and wrong argument counts (TC111, TC112) ------------------------------
def gemm_lowercase_transpose():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_f, transpose_b=True)  # ERR

    return k


def pipelined_num_stage():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for ko in T.Pipelined(4, num_stage=3):  # ERR
                A[ko] = 0.0

    return k


def kernel_unknown_keyword():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, thread=128) as bx:  # ERR
            A[bx] = 0.0

    return k


def atomic_unknown_keyword():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.atomic_add(A[0], 1.0, memory_orde="relaxed")  # ERR

    return k


def math_unknown_keyword():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx] = T.exp(A[bx], fast=True)  # ERR

    return k


def copy_three_positionals():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A, B, True)  # ERR

    return k


def copy_missing_destination():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A)  # ERR

    return k


def dtype_handle_two_values():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx] = T.float32(1, 2)  # ERR

    return k


def scale(x, factor=2.0):
    return x * factor


def helper_unknown_keyword():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx] = scale(A[bx], factr=3.0)  # ERR

    return k


def layout_function_unknown_keyword():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({S: T.layout.make_swizzled_layout(S, swizzle_byte=128)})  # ERR

    return k


@pytest.mark.parametrize("factory, close", [
    (helper_unknown_keyword, "factor"),
    (layout_function_unknown_keyword, "swizzle_bytes"),
    (gemm_lowercase_transpose, "transpose_B"),
    (pipelined_num_stage, "num_stages"),
    (kernel_unknown_keyword, "threads"),
    (atomic_unknown_keyword, None),
    (math_unknown_keyword, None),
])
def test_unknown_keyword_names_the_function_and_the_closest_parameter(factory, close):
    e = located(factory, "TC111")
    assert "has no parameter" in e.message
    if close is not None:
        assert f"did you mean `{close}`?" in e.hint


def test_gemm_misspelled_keyword_is_refused_not_run_as_a_plain_product():
    e = located(gemm_lowercase_transpose, "TC111")
    assert "`T.gemm`" in e.message and "`transpose_b`" in e.message
    assert "transpose_A=False, transpose_B=False" in e.hint


@pytest.mark.parametrize("factory, words", [
    (copy_three_positionals, "3 positional arguments, but it takes at most 2"),
    (copy_missing_destination, "`dst` is missing"),
    (dtype_handle_two_values, "2 positional arguments"),
])
def test_wrong_argument_count_is_a_located_error_not_a_type_error(factory, words):
    e = located(factory, "TC112")
    assert words in e.message


# ---- TileLang keywords tilecraft does not implement (TC113) ---------------------------------
def copy_coalesced_width():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A, S, coalesced_width=8)  # ERR

    return k


def copy_eviction_policy():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A, S, eviction_policy="evict_first")  # ERR

    return k


def gemm_k_pack():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_f, k_pack=2)  # ERR

    return k


def gemm_wg_wait():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_f, wg_wait=-1)  # ERR

    return k


def kernel_prelude():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128, prelude="#include <x.h>") as bx:  # ERR
            A[bx] = 0.0

    return k


def atomic_return_prev():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = T.atomic_add(A[0], 1.0, return_prev=True)  # ERR

    return k


def reduce_nan_propagate():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float16")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float16")
            R = T.alloc_fragment((8,), "float16")
            T.copy(A, F)
            T.reduce_max(F, R, dim=1, nan_propagate=False)  # ERR

    return k


def pipelined_sync():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for ko in T.Pipelined(4, num_stages=2, sync=[[0, 1]]):  # ERR
                A[ko] = 0.0

    return k


def alloc_shared_in_registers():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64,), "float32", "local")  # ERR

    return k


@pytest.mark.parametrize("factory, hint", [
    (alloc_shared_in_registers, "T.alloc_fragment / T.alloc_local"),
    (copy_coalesced_width, "vector widths"),
    (copy_eviction_policy, "eviction"),
    (gemm_k_pack, "AMD MFMA option"),
    (gemm_wg_wait, "wgmma"),
    (kernel_prelude, "C source"),
    (atomic_return_prev, "outside T.Parallel"),
    (reduce_nan_propagate, "propagate NaN"),
    (pipelined_sync, "barriers"),
])
def test_tilelang_option_tilecraft_does_not_implement_is_refused_with_a_hint(factory, hint):
    e = located(factory, "TC113")
    assert "TileLang option" in e.message
    assert hint in e.hint


def test_tilelang_options_at_their_default_values_are_accepted():
    M, K, N = 64, 32, 64

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128, is_cpu=False, prelude=None) as bx:
            A_s = T.alloc_shared((M, K), "float16", "shared")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32", scope="local.fragment")
            T.copy(A, A_s, disable_tma=False, coalesced_width=None)
            T.copy(B, B_s, eviction_policy=None)
            T.gemm(A_s, B_s, C_f, clear_accum=True, k_pack=1, wg_wait=0)
            R = T.alloc_fragment((M,), "float32")
            T.reduce_max(C_f, R, dim=1, nan_propagate=True)
            T.copy(C_f, C)

    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"))
    tilecraft.compile(k, target="interp")(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


# ---- unknown dtypes (TC210) -----------------------------------------------------------------
def alloc_unknown_dtype():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64,), "flaot16")  # ERR

    return k


def cast_unknown_dtype():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx] = T.cast(A[bx], "bfloat61")  # ERR

    return k


def tensor_unknown_dtype():
    @T.prim_func
    def k(A: T.Tensor((64,), "flaot32")):  # ERR
        with T.Kernel(1, threads=128) as bx:
            A[bx] = 0.0

    return k


def scalar_param_unknown_dtype():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), n: "flaot32"):  # ERR
        with T.Kernel(1, threads=128) as bx:
            A[bx] = 0.0

    return k


@pytest.mark.parametrize("factory, near", [
    (alloc_unknown_dtype, "float16"),
    (cast_unknown_dtype, "bfloat16"),
    (tensor_unknown_dtype, "float32"),
    (scalar_param_unknown_dtype, "float32"),
])
def test_unknown_dtype_is_a_located_error_naming_the_closest_type(factory, near):
    e = located(factory, "TC210")
    assert near in e.hint


# ---- bad dims, reduce kinds, grids, floats as integers --------------------------------------
def cumsum_dim_3_of_2d():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float32")
            T.copy(A, F)
            T.cumsum(F, dim=3)  # ERR

    return k


def cumsum_dim_minus_3_of_2d():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float32")
            T.copy(A, F)
            T.cumsum(F, dim=-3)  # ERR

    return k


def reduce_unknown_type():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float32")
            R = T.alloc_fragment((8,), "float32")
            T.copy(A, F)
            T.reduce(F, R, "maxx", 1, True)  # ERR

    return k


@pytest.mark.parametrize("factory, words", [
    (cumsum_dim_3_of_2d, "dim=3"),
    (cumsum_dim_minus_3_of_2d, "dim=-3"),
    (reduce_unknown_type, "'maxx'"),
])
def test_bad_dim_or_reduce_type_is_a_located_error(factory, words):
    e = located(factory, "TC206")
    assert words in e.message


def test_unknown_reduce_type_suggests_the_valid_kinds():
    e = located(reduce_unknown_type, "TC206")
    assert "did you mean 'max'?" in e.hint and "absmax" in e.hint


def grid_of(*grid):
    def factory():
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(*grid, threads=128) as bx:  # ERR
                A[0] = 0.0

        return k

    return factory


@pytest.mark.parametrize("grid, value", [
    ((0,), 0), ((-3,), -3), ((2**31,), 2**31), ((1, 65536), 65536), ((1, 1, 70000), 70000),
])
def test_constant_grid_outside_cuda_limits_is_refused_at_the_kernel_line(grid, value):
    factory = grid_of(*grid)
    with pytest.raises(TilecraftError) as info:
        factory()
    e = info.value
    assert e.code == "TC212" and e.file == __file__
    assert e.line == err_line(grid_of)
    assert f"is {value}" in e.message


def parallel_float_extent():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(64 / 2):  # ERR
                A[i] = 0.0

    return k


def alloc_float_shape():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((64.0, 2), "float32")  # ERR

    return k


def serial_device_float_bound():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.serial(A[0]):  # ERR
                A[i] = 0.0

    return k


def grid_float():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(64 / 32, threads=128) as bx:  # ERR
            A[bx] = 0.0

    return k


def reduce_float_dim():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float32")
            R = T.alloc_fragment((8,), "float32")
            T.copy(A, F)
            T.reduce_sum(F, R, dim=1.0)  # ERR

    return k


@pytest.mark.parametrize("factory", [parallel_float_extent, alloc_float_shape,
                                     serial_device_float_bound, grid_float, reduce_float_dim])
def test_float_where_an_integer_is_required_is_a_located_error(factory):
    e = located(factory, "TC211")
    assert "must be an integer" in e.message


# ---- T.annotate_layout (TC114) --------------------------------------------------------------
def annotate_shared_fp32_swizzle():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            T.annotate_layout({S: make_swizzled_layout(S)})  # ERR
            T.copy(A, S)

    return k


def annotate_not_a_layout():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((64, 64), "float16")
            T.annotate_layout({F: "row_major"})  # ERR
            T.copy(A, F)

    return k


def annotate_fragment_layout_on_shared():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({S: spatial(32, 4) * local(2, 16)})  # ERR
            T.copy(A, S)

    return k


def annotate_fragment_wrong_shape():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((64, 64), "float16")
            T.annotate_layout({F: spatial(32, 4) * local(1, 8)})  # ERR
            T.copy(A, F)

    return k


@pytest.mark.parametrize("factory, words", [
    (annotate_shared_fp32_swizzle, "would not use this layout"),
    (annotate_not_a_layout, "is not a layout"),
    (annotate_fragment_layout_on_shared, "on a shared buffer"),
    (annotate_fragment_wrong_shape, "covers [32, 32]"),
])
def test_annotate_layout_that_cannot_be_honoured_is_refused(factory, words):
    e = located(factory, "TC114")
    assert words in e.message


def test_annotate_layout_of_the_layouts_tilecraft_uses_is_accepted():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float16")
            F = T.alloc_fragment((64, 64), "float16")
            T.annotate_layout({S: T.layout.make_swizzled_layout(S),
                               F: spatial(32, 4) * local(2, 16)})
            T.copy(A, S)
            T.copy(S, F)
            T.copy(F, B)

    a = torch.randn(64, 64).half()
    b = torch.zeros(64, 64).half()
    tilecraft.compile(k, target="interp")(a, b)
    torch.testing.assert_close(b, a)


# ---- TileLang's T.Pipelined(start, stop) ----------------------------------------------------
def test_pipelined_with_start_and_stop_runs_from_start_to_stop():
    @T.prim_func
    def k(A: T.Tensor((8, 16), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((16,), "float32")
            S = T.alloc_shared((16,), "float32")
            T.clear(acc)
            for ko in T.Pipelined(2, 6, num_stages=2):
                T.copy(A[ko, 0:16], S)
                for j in T.Parallel(16):
                    acc[j] += S[j]
            T.copy(acc, B)

    a = torch.randn(8, 16)
    b = torch.full((16,), float("nan"))
    tilecraft.compile(k, target="interp")(a, b)
    torch.testing.assert_close(b, a[2:6].sum(0))


def pipelined_gemm_from_k_start(M=128, N=128, K=256, bk=32, start=2):
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(start, K // bk, num_stages=3):
                T.copy(A[0, ko * bk], A_s)
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return k


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_pipelined_gemm_with_a_start_compiles_for_the_gpu(arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime.nvrtc import compile_cuda

    gen = generate_cuda(pipelined_gemm_from_k_start(), arch)
    compile_cuda(gen.source, arch, name=gen.name)


@pytest.mark.gpu
def test_pipelined_gemm_with_a_start_matches_torch_on_the_gpu():
    a = torch.randn(128, 256, device="cuda").half()
    b = torch.randn(256, 128, device="cuda").half()
    c = torch.full((128, 128), float("nan"), device="cuda")
    tilecraft.compile(pipelined_gemm_from_k_start(), target="cuda")(a, b, c)
    ref = a[:, 64:].float() @ b[64:].float()
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)
