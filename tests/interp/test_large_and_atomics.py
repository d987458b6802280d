"""The interpreter on tensors past 2^31 elements (index arithmetic in 64 bits, as on the GPU),
atomics inside T.Parallel (once per logical element), and T.Parallel extents larger than the
fragment they index (a located error on both backends)."""

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import interp
from tilecraft.dtypes import int64
from tilecraft.ir import BinOp, Var
from tilecraft.ir.indices import widen
from tests.codegen.test_index64_multidim import corner, corner_reference


def _sparse(path, shape) -> np.ndarray:
    """A zero tensor of `shape` int8 backed by a sparse file: only touched pages take space."""
    return np.memmap(path, dtype=np.int8, mode="w+", shape=shape).view(np.ndarray)


@tilecraft.jit
def tail_1d(n, block=1024):
    """B = 2 * A + 1 over the last 3 blocks of a 1-D int8 tensor (the last one partial)."""
    blocks = -(-n // block)

    @T.prim_func
    def k(A: T.Tensor((n,), "int8"), B: T.Tensor((n,), "int8")):
        with T.Kernel(3, threads=128) as bx:
            frag = T.alloc_fragment((block,), "int8")
            base = (blocks - 3 + bx) * block  # past 2^31: a 64-bit let
            T.copy(A[base], frag)
            for i in T.Parallel(block):
                frag[i] = frag[i] * 2 + 1
            T.copy(frag, B[base])

    return k


def test_a_1d_tensor_past_2_31_elements_on_the_interpreter(tmp_path):
    n = 2**31 + 4096 + 17
    a, b = _sparse(tmp_path / "a", (n,)), _sparse(tmp_path / "b", (n,))
    rng = np.random.default_rng(0)
    a[-3000:] = rng.integers(-100, 100, 3000, dtype=np.int8)
    b[-3000:] = 7  # poison
    tail_1d(n)(a, b)
    start = (-(-n // 1024) - 3) * 1024
    want = (a[start:].astype(np.int32) * 2 + 1).astype(np.int8)
    assert np.array_equal(b[start:], want)
    assert b[start - 1] == 7  # before the first block: untouched


def test_a_dimension_past_2_31_on_the_interpreter(tmp_path):
    rows, cols = 3, 2**31 + 4096
    a = _sparse(tmp_path / "a", (rows, cols))
    tail = np.random.default_rng(1).integers(-100, 100, (3, 2048), dtype=np.int8)
    a[-3:, -2048:] = tail
    corner(rows, cols)(a)
    assert np.array_equal(a[-3:, -2048:], corner_reference(tail))
    assert not a[-3:, -2049].any()


def test_widen_computes_every_integer_operation_in_int64():
    i, j = Var.create("i"), Var.create("j")
    e = widen(BinOp.create("+", BinOp.create("*", i, 2**20), j))
    assert e.dtype == int64 and e.a.dtype == int64 and e.a.a.dtype == int64
    assert e.a.b.dtype == int64 and e.b.dtype == int64
