"""A global -> shared copy whose destination still holds its tile is skipped: a second pass over
whole rows reads global memory once. Anything that may change the tile keeps the copy."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def two_passes(chunks=1, touch=None, store_x=False, store_y=False):
    """Pass 1 sums each row's chunks into s, pass 2 writes x * s; `touch` writes X_s between the
    passes ("fill": a T.fill; "if": a T.fill under a branch)."""
    n = 256 * chunks

    @T.prim_func
    def k(X: T.Tensor((64, n), "float16"), Y: T.Tensor((64, n), "float16")):
        with T.Kernel(16, threads=128) as bm:
            X_s = T.alloc_shared((4, 256), "float16")
            f = T.alloc_fragment((4, 256), "float32")
            y = T.alloc_fragment((4, 256), "float16")
            s = T.alloc_fragment((4,), "float32")
            T.clear(s)
            for c in T.Pipelined(chunks, num_stages=2):
                T.copy(X[bm * 4, c * 256], X_s)
                T.copy(X_s, f)
                T.reduce_sum(f, s, dim=1, clear=False)
            if touch == "fill":
                T.fill(X_s, 0)
            elif touch == "if":
                if bm > 3:
                    T.fill(X_s, 0)
            if store_x:
                X[bm * 4, 0] = 0
            if store_y:
                Y[bm * 4, 0] = 0
            for c in T.Pipelined(chunks, num_stages=2):
                T.copy(X[bm * 4, c * 256], X_s)
                for i, j in T.Parallel(4, 256):
                    y[i, j] = X_s[i, j] * s[i]
                T.copy(y, Y[bm * 4, c * 256])

    return k


def _loads(func) -> int:
    """How many times the kernel brings X's tile into X_s (a load_global + store_shared, a
    copy_async or a TMA load of X): a reused copy lowers to nothing."""
    src = generate_cuda(func, "sm_90a").source
    body = src[src.index('extern "C"'):]
    return sum(body.count(f"// {head}") for head in
               ("load_global(X, ", "copy_async(X_s, X, ", "copy_async_bulk(X_s, X, "))


def test_the_second_pass_over_a_whole_row_reuses_the_shared_tile():
    assert _loads(two_passes()) == 1


def test_chunks_that_change_every_iteration_are_copied_again():
    assert _loads(two_passes(chunks=2)) == 2


def test_a_write_to_the_tile_between_the_passes_keeps_the_copy():
    assert _loads(two_passes(touch="fill")) == 2
    assert _loads(two_passes(touch="if")) == 2


def test_a_source_the_kernel_stores_to_is_copied_again():
    assert _loads(two_passes(store_x=True)) == 2


def test_a_store_to_any_global_tensor_between_the_passes_keeps_the_copy():
    assert _loads(two_passes(store_y=True)) == 2


def test_interpreter_second_pass_reads_the_element_stored_between_the_passes():
    k = tilecraft.jit(two_passes(store_x=True))
    x = (torch.randn(64, 256) * 4).half()
    y = torch.full_like(x, 7.0)
    s = x.float().view(16, 4, 256).sum(-1, keepdim=True)  # pass 1, before any store
    want = (x.float().view(16, 4, 256) * s).half()
    want[:, 0, 0] = 0  # stored into X between the passes, then read by pass 2: 0 * s
    k(x, y)
    torch.testing.assert_close(y.view(16, 4, 256).float(), want.float(), rtol=2e-3, atol=1e-2)
    assert (x.view(16, 4, 256)[:, 0, 0] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("touch", [None, "if"])
def test_gpu_two_passes_match_the_interpreter(touch):
    k = tilecraft.jit(two_passes(touch=touch))
    x = (torch.randn(64, 256) * 4).half()
    y_cpu, y_gpu = torch.full_like(x, 7.0), torch.full_like(x, 7.0).cuda()
    k(x, y_cpu)
    k(x.cuda(), y_gpu)
    torch.cuda.synchronize()
    torch.testing.assert_close(y_gpu.cpu().float(), y_cpu.float(), rtol=2e-3, atol=1e-2)
