"""`@tilecraft.jit` on a kernel function whose `T.Tensor` parameters have no shape (the TileLang
paper's listing I.1): one kernel per call shapes and dtypes, run on the interpreter here."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import JITKernel, TilecraftError


def marked_line(marker: str) -> int:
    with open(__file__) as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def listing_i1(M, N, K, block_M=32, block_N=32, block_K=32, threads=128):
    """Listing I.1: M, N, K and the tile sizes come from the closure."""
    dtype, accum_dtype = "float16", "float32"

    @tilecraft.jit(target="interp")
    def Matmul(A: T.Tensor, B: T.Tensor, C: T.Tensor):  # noqa: N802, N803
        with T.Kernel(N // block_N, M // block_M, threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return Matmul


@tilecraft.jit(target="interp")
def named_matmul(
    A: T.Tensor(("M", "K"), "float16"),  # noqa: N803
    B: T.Tensor(("K", "N"), "float16"),  # noqa: N803
    C: T.Tensor(("M", "N"), "float32"),  # noqa: N803
):
    with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32), threads=128) as (bx, by):  # noqa: F821
        A_s = T.alloc_shared((32, 32), "float16")
        B_s = T.alloc_shared((32, 32), "float16")
        C_l = T.alloc_fragment((32, 32), "float32")
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):  # noqa: F821
            T.copy(A[by * 32, k * 32], A_s)
            T.copy(B[k * 32, bx * 32], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 32, bx * 32])


@tilecraft.jit(target="interp")
def scaled_copy(X: T.Tensor, Y: T.Tensor, factor: T.float32):  # noqa: N803
    rows, cols = X.shape
    with T.Kernel(rows, threads=32) as bx:
        for j in T.Parallel(cols):
            Y[bx, j] = T.cast(X[bx, j] * factor, Y.dtype)


def fp16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


def test_listing_i1_runs_with_names_from_the_closure():
    matmul = listing_i1(64, 96, 64)
    a, b = fp16(64, 64), fp16(64, 96)
    c = torch.full((64, 96), float("nan"), dtype=torch.float16)
    assert matmul(a, b, c) is None
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-2)
    matmul(a, b, c)
    assert len(matmul._kernels) == 1


def test_one_kernel_per_shapes_and_dtypes_read_through_the_buffer():
    for rows, cols, dtype in [(4, 32, torch.float32), (8, 64, torch.float32),
                              (4, 32, torch.float16), (4, 32, torch.float32)]:
        x = torch.randn(rows, cols).to(dtype)
        y = torch.full_like(x, float("nan"))
        scaled_copy(x, y, 3.0)
        torch.testing.assert_close(y, (x.float() * 3).to(dtype))
    assert len(scaled_copy._kernels) == 3


def test_named_dims_are_bound_from_the_shapes():
    before = len(named_matmul._kernels)
    for m, k, n in [(64, 40, 48), (96, 40, 48), (64, 40, 48)]:
        a, b = fp16(m, k), fp16(k, n)
        c = torch.full((m, n), float("nan"))
        named_matmul(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-4, rtol=1e-4)
    assert len(named_matmul._kernels) == before + 2


def test_compile_returns_the_specialized_kernel():
    kernel = named_matmul.compile(fp16(32, 24), fp16(24, 16), torch.empty(32, 16))
    assert isinstance(kernel, JITKernel)
    assert [p.shape for p in kernel.params] == [(32, 24), (24, 16), (32, 16)]


def test_named_dims_that_disagree_are_refused_at_the_call():
    with pytest.raises(TilecraftError) as info:
        named_matmul(fp16(64, 40), fp16(41, 48), torch.empty(64, 48))  # ERR-disagree
    e = info.value
    assert e.code == "TC316" and e.file == __file__ and e.line == marked_line("ERR-disagree")
    assert "dimension `K` is 40 in `A` and 41 in `B`" in str(e)
    assert "parameter `B`" in str(e)  # a note at the annotation


def test_a_named_dim_must_agree_with_the_closure():
    M = 128  # noqa: N806

    @tilecraft.jit(target="interp")
    def fill(A: T.Tensor(("M",), "float32")):  # noqa: N803
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(M):
                A[i] = 1.0

    fill(torch.empty(128))
    with pytest.raises(TilecraftError, match="`M` is 128 in the kernel's closure, but the call's "
                       "`A` gives M = 64") as info:
        fill(torch.empty(64))
    assert info.value.code == "TC316"


def test_wrong_arguments_are_refused():
    with pytest.raises(TilecraftError, match="annotated T.Tensor, but the call passes a float"):
        scaled_copy(1.0, torch.empty(4, 4), 2.0)
    with pytest.raises(TilecraftError, match="2 dimension\\(s\\) \\(M, K\\), but the call passes "
                       "a 3-D tensor"):
        named_matmul(fp16(2, 64, 40), fp16(40, 48), torch.empty(64, 48))
    with pytest.raises(TilecraftError) as info:
        scaled_copy(torch.empty(4, 4))
    assert info.value.code == "TC316" and "factor" in str(info.value)


def test_a_fully_annotated_function_is_a_kernel_not_a_factory():
    # it used to be taken for a factory: the call ran the kernel's body as Python
    @tilecraft.jit(target="interp")
    def negate(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):  # noqa: N803
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                B[i] = -A[i]

    a, b = torch.randn(8), torch.empty(8)
    negate(a, b)
    torch.testing.assert_close(b, -a)


def test_out_idx_is_refused_on_a_polymorphic_kernel():
    with pytest.raises(TilecraftError) as info:
        @tilecraft.jit(out_idx=[-1])  # ERR-out-idx
        def f(A: T.Tensor, B: T.Tensor):  # noqa: N803
            pass
    assert info.value.code == "TC108" and info.value.line == marked_line("ERR-out-idx")


def test_named_dims_outside_the_jit_are_refused_at_the_parameter():
    with pytest.raises(TilecraftError) as info:
        @T.prim_func
        def f(A: T.Tensor(("M",), "float32")):  # noqa: N803  # ERR-prim-func
            pass
    assert info.value.code == "TC108" and info.value.line == marked_line("ERR-prim-func")
    assert "named dimensions ['M']" in str(info.value)


def gemm_kernel_function(A: T.Tensor(("M", "K"), "float16"),  # noqa: N803
                         B: T.Tensor(("K", "N"), "float16"),  # noqa: N803
                         C: T.Tensor(("M", "N"), "float32")):  # noqa: N803
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):  # noqa: F821
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        C_l = T.alloc_fragment((64, 64), "float32")
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):  # noqa: F821
            T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 64, bx * 64])


def test_specializations_build_for_the_gpu_and_come_back_from_the_jit_cache(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECRAFT_JIT_CACHE", raising=False)
    monkeypatch.delenv("TILECRAFT_DUMP_IR", raising=False)
    args = (torch.empty(128, 64, dtype=torch.float16), torch.empty(64, 256, dtype=torch.float16),
            torch.empty(128, 256))
    built = tilecraft.jit(arch="sm_80")(gemm_kernel_function).compile(*args)  # NVRTC, no GPU
    again = tilecraft.jit(arch="sm_80")(gemm_kernel_function).compile(*args)  # a new decorator
    assert built._cached is None and again._cached is not None
    assert again.get_kernel_source() == built.get_kernel_source()


@pytest.mark.gpu
def test_named_dims_specialize_on_the_gpu():
    matmul = tilecraft.jit(gemm_kernel_function)
    for m, k, n in [(256, 128, 192), (100, 72, 130)]:
        a = torch.randn(m, k, dtype=torch.float16, device="cuda")
        b = torch.randn(k, n, dtype=torch.float16, device="cuda")
        c = torch.full((m, n), float("nan"), device="cuda")
        matmul(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


@tilecraft.jit(target="interp")
def dequantize_rows(W: T.Tensor(("K", "N"), "uint4"),  # noqa: N803
                    Y: T.Tensor(("K", "N"), "float32")):  # noqa: N803
    with T.Kernel(1, threads=32) as bx:
        f = T.alloc_fragment((K, N), "float32")  # noqa: F821 (K, N: the call's)
        T.copy(W[0, 0], f)
        T.copy(f, Y[0, 0])


def test_a_packed_tensor_takes_its_named_dims_from_the_other_tensors():
    codes = torch.randint(0, 16, (8, 16), dtype=torch.int32)
    y = torch.zeros(8, 16)
    dequantize_rows(tilecraft.pack(codes, "uint4"), y)  # 64 bytes, 1-D: no shape of its own
    assert torch.equal(y, codes.float())


def test_a_packed_tensor_whose_dims_no_other_tensor_names_is_refused_at_the_parameter():
    @tilecraft.jit(target="interp")
    def only_packed(W: T.Tensor(("K",), "uint4"), Y: T.Tensor((8,), "float32")):  # noqa: N803
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                Y[i] = W[i]

    with pytest.raises(TilecraftError) as err:
        only_packed(tilecraft.pack(torch.arange(8), "uint4"), torch.zeros(8))
    assert err.value.code == "TC316" and "packed bytes" in str(err.value)
