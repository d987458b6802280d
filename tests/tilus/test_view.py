"""T.view and T.view_global at the Tilus level: Tilus Figure 2 and Figure 9 name for name on the
block VM (int6 weights), global views aliasing bytes, and located errors for views that change
the bits per thread (TC604) or the total bits (TC603)."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import column_local, local, pack_weight_tiles, weight_load_layout

ACC = local(2, 1).spatial(8, 4).local(1, 2)
A_T = column_local(2, 2).spatial(8, 4).local(1, 2)
B_T = local(2, 1).column_spatial(4, 8).local(2, 1)  # 4 int6 per thread: 3 bytes
U8 = weight_load_layout(32, 3)
M, N, K = 32, 16, 32


@tilecraft.jit
@T.prim_func
def matmul_int6(A: T.Tensor((M, K), "float16"), B: T.Tensor((K // 16, N // 8, 96), "uint8"),
                C: T.Tensor((M, N), "float16")):
    """Tilus Figure 2: f16 activations times int6 weights pre-transformed by Figure 9."""
    with T.Kernel(M // 16, N // 8, threads=32) as (bi, bj):
        acc = T.allocate_register("float32", layout=ACC, init=0.0)
        for bk in range(K // 16):
            a = T.load_global(A, layout=A_T, offset=[bi * 16, bk * 16])
            b = T.load_global(B, layout=U8, offset=[bk, bj, 0])
            b = T.view(b, dtype="int6", layout=B_T)
            T.dot(a, T.cast(b, "float16"), acc, out=acc)
        T.store_global(T.cast(acc, "float16"), C, offset=[bi * 16, bj * 8])


@tilecraft.jit
@T.prim_func
def transform_int6(W: T.Tensor((K, N), "int6"), B: T.Tensor((K // 16, N // 8, 96), "uint8")):
    """Tilus Figure 9: each thread's tile elements, viewed as bytes, stored where Figure 2
    loads them."""
    with T.Kernel(K // 16, N // 8, threads=32) as (bk, bj):
        w = T.load_global(W, layout=B_T, offset=[bk * 16, bj * 8])
        T.store_global(T.view(w, dtype="uint8", layout=U8), B, offset=[bk, bj, 0])


def test_figures_2_and_9_run_name_for_name_with_int6_weights():
    codes = np.random.default_rng(0).integers(0, 64, (K, N)).astype(np.uint8)
    packed = torch.zeros(K // 16, N // 8, 96, dtype=torch.uint8)
    transform_int6(torch.from_numpy(dtypes.pack(codes, "int6")), packed)
    np.testing.assert_array_equal(packed.numpy(), pack_weight_tiles(codes, 6, B_T))

    a = torch.randn(M, K, generator=torch.Generator().manual_seed(1)).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    matmul_int6(a, packed, c)
    w = dtypes.int6.to_float(codes).astype(np.float64)
    ref = a.double().numpy() @ w
    assert np.abs(c.double().numpy() - ref).max() <= 2.0**-10 * np.abs(ref).max()


@tilecraft.jit
@T.prim_func
def through_view_global(B: T.Tensor((96,), "uint8"), O: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=32):
        W = T.view_global(B, dtype="int6")  # shape: the last dim scaled, [128]
        w = T.load_global(W, layout=local(4).spatial(32))
        T.store_global(T.cast(w, "int32"), O)
        T.store_global(T.cast(T.cast(w, "int32") + 1, "int6"), W)


def test_view_global_reads_and_writes_the_same_bytes():
    codes = np.random.default_rng(2).integers(0, 64, 128).astype(np.uint8)
    b = torch.from_numpy(dtypes.pack(codes, "int6"))
    o = torch.zeros(128, dtype=torch.int32)
    through_view_global(b, o)
    values = dtypes.int6.decode(codes)
    np.testing.assert_array_equal(o.numpy(), values)
    np.testing.assert_array_equal(b.numpy(), dtypes.pack(dtypes.int6.encode(values + 1), "int6"))


def _error(build) -> TilecraftError:
    with pytest.raises(TilecraftError) as e:
        build()
    return e.value


def test_a_view_with_other_bits_per_thread_is_tc604_at_its_line_giving_both_counts():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((96,), "uint8")):
            with T.Kernel(1, threads=32):
                b = T.load_global(B, layout=U8)
                T.view(b, dtype="int6", layout=local(2).spatial(32))  # ERR

    err = _error(build)
    assert err.code == "TC604" and "# ERR" in err.span.source_line()
    assert "24 bits" in err.message and "12 bits" in err.message


def test_a_view_over_other_threads_is_tc604_at_its_line_giving_both_counts():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((96,), "uint8")):
            with T.Kernel(1, threads=32):
                b = T.load_global(B, layout=U8)
                T.view(b, dtype="uint8", layout=local(3).spatial(64))  # ERR

    err = _error(build)
    assert err.code == "TC604" and "# ERR" in err.span.source_line()
    assert "32 threads" in err.message and "64 threads" in err.message


def test_a_view_of_another_width_without_a_layout_is_tc604_at_its_line():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((96,), "uint8")):
            with T.Kernel(1, threads=32):
                T.view(T.load_global(B, layout=U8), dtype="int6")  # ERR

    err = _error(build)
    assert err.code == "TC604" and "# ERR" in err.span.source_line()
    assert "24 bits" in err.message and "18 bits" in err.message


def test_view_global_with_other_total_bits_is_tc603_at_its_line_giving_both_counts():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((96,), "uint8")):
            with T.Kernel(1, threads=32):
                T.view_global(B, dtype="int6", shape=[100])  # ERR

    err = _error(build)
    assert err.code == "TC603" and "# ERR" in err.span.source_line()
    assert "768 bits" in err.message and "600 bits" in err.message


def test_view_global_of_a_last_dim_that_does_not_scale_is_tc603_at_its_line():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((4, 5), "uint8")):
            with T.Kernel(1, threads=32):
                T.view_global(B, dtype="int6")  # ERR

    err = _error(build)
    assert err.code == "TC603" and "# ERR" in err.span.source_line() and "shape=" in err.message


def test_a_view_of_something_that_is_not_a_register_tensor_is_tc603_at_its_line():
    def build():
        @T.prim_func
        def bad(B: T.Tensor((96,), "uint8")):
            with T.Kernel(1, threads=32):
                T.view(B, dtype="int6")  # ERR

    err = _error(build)
    assert err.code == "TC603" and "# ERR" in err.span.source_line()


@tilecraft.jit
def tile_level_view_global(whole=True):
    """T.view_global at the tile level: the viewed tensor in T.copy, whole or from a corner."""

    @T.prim_func
    def k(W8: T.Tensor((96,), "uint8"), C: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            W = T.view_global(W8, dtype="int6", shape=[8, 16])
            wf = T.alloc_fragment((8, 16), "int6")
            if whole:
                T.copy(W, wf)
            else:
                T.copy(W[0, 0], wf)
            for i, j in T.Parallel(8, 16):
                C[i, j] = T.cast(wf[i, j], "float32") * 0.5

    return k


def _tile_level_view_global(whole: bool, device: str):
    codes = np.random.default_rng(3).integers(0, 64, 128).astype(np.uint8)
    w8 = torch.from_numpy(dtypes.pack(codes, "int6")).to(device)
    c = torch.full((8, 16), float("nan"), device=device)
    tile_level_view_global(whole)(w8, c)
    want = dtypes.resolve("int6").to_float(codes).reshape(8, 16).astype(np.float32) * 0.5
    np.testing.assert_array_equal(c.cpu().numpy(), want)


@pytest.mark.parametrize("whole", [True, False])
def test_a_view_global_tensor_is_a_tile_op_operand(whole):
    _tile_level_view_global(whole, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("whole", [True, False])
def test_a_view_global_tensor_is_a_tile_op_operand_on_the_gpu(whole):
    _tile_level_view_global(whole, "cuda")
