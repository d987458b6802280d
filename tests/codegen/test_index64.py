"""64-bit index arithmetic: tensors of 2^31 elements or more get `long long` flat indices."""

import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


@tilecraft.jit(out_idx=[1])
def last_rows(rows, cols, block=128):
    """Copy the last `block` rows of a [rows, cols] fp16 tensor, one block of columns per CTA."""

    @T.prim_func
    def copy_tail(A: T.Tensor((rows, cols), "float16"), B: T.Tensor((block, cols), "float16")):
        with T.Kernel(T.ceildiv(cols, block), threads=128) as bx:
            tile = T.alloc_shared((block, block), "float16")
            T.copy(A[rows - block, bx * block], tile)
            T.copy(tile, B[0, bx * block])

    return copy_tail


@pytest.mark.parametrize("async_copies", [True, False])
def test_huge_tensor_indexes_in_64_bits(async_copies):
    from tilecraft.options import CompileOptions

    opts = CompileOptions.for_arch("sm_90a", async_copies=async_copies)
    src = generate_cuda(last_rows(2**18, 2**14).func, options=opts).source  # 2^32 elements
    load_a = src[src.index("// copy_async(tile, A, " if async_copies else "// load_global(A, "):
                 src.index("// copy_async_commit" if async_copies else "// store_shared(")]
    store_b = src[src.index(", B, offset=", src.index("// store_global(tile_t")):]
    assert "&A_[(long long)(" in load_a  # A is indexed in 64 bits ...
    assert "&B_[" in store_b and "long long" not in store_b  # ... B is not


def test_small_tensor_keeps_32_bit_indices():
    src = generate_cuda(last_rows(4096, 4096).func, "sm_90a").source
    assert "long long" not in src.split("extern \"C\"")[1]


@pytest.mark.gpu
def test_tail_of_a_tensor_past_2_31_elements():
    import torch

    rows, cols = 2**31 // 4096 + 256, 4096  # 2^31 + 2^20 elements, 4 GiB
    a = torch.empty(rows, cols, dtype=torch.float16, device="cuda")
    a[-128:].copy_(torch.randn(128, cols, dtype=torch.float16, device="cuda"))
    b = last_rows(rows, cols)(a)
    torch.testing.assert_close(b, a[-128:], rtol=0, atol=0)
    del a


@tilecraft.jit(out_idx=[1])
def flat_scale(n, block=1024, dtype="int8"):
    """B = 2 * A over a 1-D integer tensor, one block of `block` elements per CTA."""

    @T.prim_func
    def scale(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            frag = T.alloc_fragment((block,), dtype)
            base = bx * block  # a let: computed in 64 bits too
            T.copy(A[bx * block], frag)
            for i in T.Parallel(block):
                frag[i] = frag[i] * 2
            T.copy(frag, B[base])
            if bx == 0:
                B[n - 1] = A[n - 1] * 2

    return scale


def test_huge_1d_tensor_computes_its_index_in_64_bits():
    """A 1-D index is the flat index itself: `bx * 1024` must not wrap at 2^31."""
    src = generate_cuda(flat_scale(2**31 + 4096).func, "sm_90a").source
    body = src.split('extern "C"')[1]
    assert "&A_[(long long)((long long)bx_ * 1024 + " in body
    assert "const long long base_ = (long long)bx_ * 1024;" in body
    small = generate_cuda(flat_scale(2**20).func, "sm_90a").source
    assert "long long" not in small.split('extern "C"')[1]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "uint32", "int64"])
def test_guarded_reads_of_every_integer_type_compile(dtype):
    """A partial tile's zero fill is spelled for multi-word C types too (`(signed char)0`)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    kernel = tilecraft.compile(flat_scale.factory(10_000, dtype=dtype), arch="sm_80")
    assert kernel.resources.spill_stores == 0


@pytest.mark.gpu
def test_a_1d_tensor_past_2_31_elements():
    import torch

    n = 2**31 + 4096 + 17  # a partial last block, 2 GiB per tensor
    a = torch.randint(-60, 60, (n,), dtype=torch.int8, device="cuda")
    b = flat_scale(n)(a)
    assert torch.equal(b, a * 2)
    del a, b
