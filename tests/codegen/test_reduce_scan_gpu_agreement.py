"""Reductions on the GPU fold each thread's registers into the right output row.

A destination of the source's rank (`T.reduce_sum(f, r, dim=1)` with r of shape (4, 1)) or a
1-D source reduced into shape (1,) folded register `li` into `red[li]`: with more than one
register per row in the reduced dimension that wrote past the end of `red` (the sum lost those
registers, or corrupted others). Each register now folds into the register of its row, as when
the destination drops the dimension.
"""

import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def row_sum(keepdim: bool):
    """int64 row sums of a 4 x 64 tile: 2 registers per thread and row, 32 lanes per row."""
    out = (4, 1) if keepdim else (4,)

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((4, 64), "int64"), Y: T.Tensor(out, "int64")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((4, 64), "int64")
            r = T.alloc_fragment(out, "int64")
            T.copy(X, f)
            T.reduce_sum(f, r, dim=1)
            T.copy(r, Y)

    return k


def row_max_of_a_wide_tile(keepdim: bool):
    """float32 row maxima of a 16 x 128 tile on 128 threads, clear=False on a prefilled row."""
    out = (16, 1) if keepdim else (16,)

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((16, 128), "float32"), Y: T.Tensor(out, "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((16, 128), "float32")
            r = T.alloc_fragment(out, "float32")
            T.copy(X, f)
            T.copy(Y, r)
            T.reduce_max(f, r, dim=1, clear=False)
            T.copy(r, Y)

    return k


def vector_max(keepdim: bool):
    """The maximum of a 64-element vector (4 registers per thread) into shape (1,)."""
    assert keepdim

    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((64,), "float32")
            r = T.alloc_fragment((1,), "float32")
            T.copy(X, f)
            T.reduce_max(f, r, dim=0)
            T.copy(r, Y)

    return k


_FOLD = re.compile(r"for \(int li = 0; li < (\d+); \+\+li\) red\[([^\]]+)\] = ")
_RED = re.compile(r"\bred\[(\d+)\];")


def _fold(kernel) -> tuple[list[int], int]:
    """The `red` register each source register folds into, and the number of `red` registers."""
    src = generate_cuda(kernel.func, "sm_90a").source
    (n, expr), = _FOLD.findall(src)
    (size,) = _RED.findall(src)
    py = expr.replace("/", "//")
    return [eval(py, {"li": li}) for li in range(int(n))], int(size)  # noqa: S307


@pytest.mark.parametrize("make", [row_sum, row_max_of_a_wide_tile])
def test_a_same_rank_destination_folds_like_one_without_the_dimension(make):
    kept, size = _fold(make(True))
    dropped, size_dropped = _fold(make(False))
    assert max(kept) < size
    assert (kept, size) == (dropped, size_dropped)


def test_a_vector_reduced_into_shape_one_folds_every_register_into_it():
    regs, size = _fold(vector_max(True))
    assert size == 1 and len(regs) > 1 and set(regs) == {0}


@pytest.mark.gpu
@pytest.mark.parametrize("make, keepdim", [(row_sum, True), (row_sum, False),
                                           (row_max_of_a_wide_tile, True), (vector_max, True)])
def test_gpu_reductions_into_same_rank_destinations_match_the_interpreter(make, keepdim):
    k = make(keepdim)
    g = torch.Generator().manual_seed(3)
    args = []
    for p in k.func.params:
        shape, dtype = tuple(int(n) for n in p.shape), getattr(torch, p.dtype.name)
        args.append(torch.randint(-1000, 1000, shape, generator=g).to(dtype))
    cpu = [a.clone() for a in args]
    gpu = [a.cuda() for a in args]
    k(*cpu)
    k(*gpu)
    torch.cuda.synchronize()
    for c, d in zip(cpu, gpu):
        np.testing.assert_array_equal(c.numpy(), d.cpu().numpy())
