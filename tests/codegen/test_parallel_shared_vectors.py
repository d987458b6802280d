"""T.Parallel loops read shared tiles they index at their own variables as 16-byte vectors (one
vector load per 8 fp16 elements of a thread), not one element at a time."""

import re

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def scaled_rows(write_back=False, wide=False):
    """Y = X * g (g broadcast over rows), the tile staged in shared memory; `write_back` also
    stores into X_s inside the loop, `wide` runs the loop past g's extent (reads under a mask)."""

    @T.prim_func
    def k(X: T.Tensor((64, 256), "float16"), g: T.Tensor((256,), "float16"),
          Y: T.Tensor((64, 256), "float16")):
        with T.Kernel(8, threads=128) as bm:
            X_s = T.alloc_shared((8, 256), "float16")
            g_s = T.alloc_shared((256,), "float16")
            y = T.alloc_fragment((8, 256), "float16")
            T.copy(X[bm * 8, 0], X_s)
            T.copy(g, g_s)
            for i, j in T.Parallel(8, 256):
                y[i, j] = X_s[i, j] * g_s[j]
                if write_back:
                    X_s[i, j] = 0
            T.copy(y, Y[bm * 8, 0])

    @T.prim_func
    def k_wide(X: T.Tensor((64, 256), "float16"), g: T.Tensor((256,), "float16"),
               Y: T.Tensor((64, 256), "float16")):
        with T.Kernel(8, threads=128) as bm:
            g_s = T.alloc_shared((128,), "float16")
            y = T.alloc_fragment((8, 256), "float16")
            T.copy(g[0:128], g_s)
            for i, j in T.Parallel(8, 256):
                y[i, j] = T.if_then_else(j < 128, g_s[T.min(j, 127)], 0)
            T.copy(y, Y[bm * 8, 0])

    return k_wide if wide else k


def _loop(func) -> str:
    """The code printed for the T.Parallel loop: the shared loads hoisted before it (they carry
    the loop's line) and the loop itself, up to the store of y."""
    src = generate_cuda(func, "sm_90a").source
    line = re.search(r"// for i, j in parallel\(.*  \(line (\d+)\)", src).group(1)
    start = src.rindex("\n", 0, src.index(f"  (line {line})"))
    return src[start:src.index("// store_global(y, Y, ", start)]


def test_a_tile_and_a_broadcast_row_are_read_as_vectors():
    loop = _loop(scaled_rows())
    assert "tc::load_vec<half, 8>(&X_s_[" in loop
    assert "tc::load_vec<half, 8>(&g_s_[" in loop


def test_a_tile_the_loop_reads_and_writes_at_its_own_indices_moves_as_vectors():
    """X_s read and written only at (i, j): loaded as vectors, updated in registers, stored back
    as vectors after the loop (behind a barrier: replicas read before anyone writes)."""
    loop = _loop(scaled_rows(write_back=True))
    assert "tc::load_vec<half, 8>(&X_s_[" in loop and "tc::load_vec<half, 8>(&g_s_[" in loop
    body = loop[loop.index("// for i, j in parallel("):loop.index("// store_shared(")]
    assert "X_s_[" not in body  # registers only inside the loop
    after = loop[loop.index("// store_shared("):]
    assert "tc::store_vec<half, 8>(&X_s_[" in after
    assert loop.index("__syncthreads();", loop.index("// for i, j in parallel(")) < \
        loop.index("// store_shared(")


def test_reads_at_other_indices_stay_per_element():
    assert "load_vec" not in _loop(scaled_rows(wide=True))


@pytest.mark.gpu
@pytest.mark.parametrize("write_back", [False, True])
def test_gpu_vector_reads_match_the_interpreter(write_back):
    k = tilecraft.jit(scaled_rows(write_back=write_back))
    x, g = torch.randn(64, 256).half(), torch.randn(256).half()
    y_cpu, y_gpu = torch.full_like(x, 7.0), torch.full_like(x, 7.0).cuda()
    k(x, g, y_cpu)
    k(x.cuda(), g.cuda(), y_gpu)
    torch.cuda.synchronize()
    torch.testing.assert_close(y_gpu.cpu(), y_cpu, rtol=0, atol=0)


@tilecraft.jit
@T.prim_func
def rows_of_six(X: T.Tensor((32, 6), "int8"), Y: T.Tensor((32, 6), "int16")):
    """Each of 32 threads holds a row of 6 int8: vectors of 2, never a 6-byte vector (an
    alignment NVRTC refuses; fuzz seed 930181)."""
    with T.Kernel(1, threads=32) as bx:
        X_s = T.alloc_shared((32, 6), "int8")
        y = T.alloc_fragment((32, 6), "int16")
        T.copy(X[0, 0], X_s)
        for i, j in T.Parallel(32, 6):
            y[i, j] = T.cast(X_s[i, j], "int16") * 3
        T.copy(y, Y[0, 0])


def test_vectors_hold_a_power_of_two_of_elements():
    src = generate_cuda(rows_of_six.func, "sm_90a").source
    assert "Vec<signed char, 2>" in src and "Vec<signed char, 6>" not in src
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    for arch in ("sm_90a", "sm_80"):
        gen = generate_cuda(rows_of_six.func, arch)
        compile_cuda(gen.source, arch, name=gen.name, use_cache=False)
    x = torch.arange(-96, 96, dtype=torch.int8).view(32, 6)
    y = torch.zeros(32, 6, dtype=torch.int16)
    rows_of_six(x, y)
    assert torch.equal(y, x.to(torch.int16) * 3)
