"""Copies whose tile starts before the tensor (`bx * 40 - 8`, `by * 12 - 6`) read 0 and drop
writes there on the GPU as on the interpreter: the bounds guard checks both ends of every
dimension whose start may be negative (it checked only the end, so in a row-major tensor the
first columns of a tile landed in the previous row: fuzz seeds 500228, 500042, 500307, ...)."""

import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def frag_store_left_of_the_tensor():
    """Fragment -> global at column bx * 40 - 8: 4-wide vector stores, block 0's first two
    vectors lie left of column 0 (seed 500228)."""

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((7, 93), "float16"), Y: T.Tensor((7, 112), "float16")):
        with T.Kernel(3, 1, threads=128) as (bx, by):
            f = T.alloc_fragment((8, 40), "float16")
            T.copy(X[by * 8, bx * 40], f)
            T.copy(f, Y[by * 8, bx * 40 - 8])

    return k


def shared_tile_at_odd_negative_column():
    """Global -> shared -> global at column bx * 24 - 11 (element by element; seed 500042)."""

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((9, 58), "int32"), Y: T.Tensor((9, 58), "int32")):
        with T.Kernel(3, 1, threads=128) as (bx, by):
            s = T.alloc_shared((12, 24), "int32")
            d = T.alloc_shared((12, 24), "int32")
            T.copy(X[by * 12, bx * 24 - 11], s)
            T.cumsum(s, d, dim=1)
            T.copy(d, Y[by * 12, bx * 24 - 11])

    return k


def fragment_above_the_tensor():
    """Rows by * 12 - 6 .. by * 12 + 5 of an 8-row tensor: block 0's first rows are above it."""

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((8, 32), "float32"), Y: T.Tensor((8, 32), "float32")):
        with T.Kernel(1, 2, threads=64) as (bx, by):
            f = T.alloc_fragment((12, 32), "float32")
            T.copy(X[by * 12 - 6, bx * 32], f)
            for i, j in T.Parallel(12, 32):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, Y[by * 12 - 6, bx * 32])

    return k


def dynamic_rows():
    """A dynamic grid leaves `bx` without an upper bound; it still cannot be negative."""
    m = T.dynamic("m")

    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, 256), threads=128) as bx:
            f = T.alloc_fragment((256,), "float32")
            T.copy(A[bx * 256], f)
            T.copy(f, B[bx * 256])

    return k


def _copy_lines(kernel, buf: str) -> list[str]:
    """The generated lines of the loads from and stores into global tensor `buf` (each printed
    after its `// load_global(...)` / `// store_global(...)` comment)."""
    src = generate_cuda(kernel.func, "sm_90a").source
    parts = re.split(r"\n\s*// (?=\w+\()", src)
    return [ln for p in parts if re.match(rf"load_global\({buf}, |store_global\(\w+, {buf}, ", p)
            for ln in p.splitlines() if f"{buf}_[" in ln]


@pytest.mark.parametrize("make, buf, start", [
    (frag_store_left_of_the_tensor, "Y", "bx_ * 40 - 8"),
    (shared_tile_at_odd_negative_column, "X", "bx_ * 24 - 11"),
    (shared_tile_at_odd_negative_column, "Y", "bx_ * 24 - 11"),
    (fragment_above_the_tensor, "X", "by_ * 12 - 6"),
    (fragment_above_the_tensor, "Y", "by_ * 12 - 6"),
])
def test_a_start_that_may_be_negative_is_guarded_below(make, buf, start):
    lines = _copy_lines(make(), buf)
    assert lines
    for ln in lines:
        assert re.search(re.escape(start) + r"[^&?]*>= 0", ln), ln  # within one conjunct


def test_block_indices_of_a_dynamic_grid_need_no_lower_guard():
    lines = _copy_lines(dynamic_rows(), "A") + _copy_lines(dynamic_rows(), "B")
    assert lines and all("< m_)" in ln for ln in lines), lines
    assert not any(">= 0" in ln for ln in lines), lines


@pytest.mark.gpu
@pytest.mark.parametrize("make", [frag_store_left_of_the_tensor,
                                  shared_tile_at_odd_negative_column, fragment_above_the_tensor])
def test_gpu_copies_starting_before_the_tensor_match_the_interpreter(make):
    k = make()
    g = torch.Generator().manual_seed(1)
    args = []
    for p in k.func.params:
        shape, dtype = tuple(int(n) for n in p.shape), getattr(torch, p.dtype.name)
        args.append(torch.randint(1, 50, shape, generator=g).to(dtype))
    cpu = [a.clone() for a in args]
    gpu = [a.cuda() for a in args]
    k(*cpu)
    k(*gpu)
    torch.cuda.synchronize()
    for c, d in zip(cpu, gpu):
        np.testing.assert_array_equal(c.numpy(), d.cpu().numpy())
