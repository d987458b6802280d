"""The interpreter on tensors past 2^31 elements (index arithmetic in 64 bits, as on the GPU),
atomics inside T.Parallel (once per logical element), and T.Parallel extents larger than the
fragment they index (a located error on both backends)."""

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.dtypes import int64
from tilecraft.ir import BinOp, Var
from tilecraft.ir.indices import widen
from tests.codegen.test_atomics_in_parallel import binned, column_sums, counters, row_sums
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


# ---- atomics: once per logical element ----------------------------------------------------

def _binned_reference(kind: str, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = c.astype(np.int64)
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[kind]
    for b, i, j in zip(*np.nonzero(a)):
        out[(i + j) % 8] = fn(out[(i + j) % 8], a[b, i, j])
    return out


def test_an_atomic_add_inside_parallel_adds_every_element_once():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    c = rng.standard_normal(64).astype(np.float32)
    want = c.astype(np.float64) + a.astype(np.float64).sum(0)
    column_sums()(a, c)
    np.testing.assert_allclose(c, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_masked_atomics_with_many_elements_per_address(kind):
    rng = np.random.default_rng(3)
    a = rng.integers(-5, 6, (2, 16, 32)).astype(np.int32)
    c = rng.integers(-5, 6, 8).astype(np.int32)
    want = _binned_reference(kind, a, c)
    binned(kind, "int32")(a, c)
    assert np.array_equal(c, want)


def test_integer_atomics_wrap_like_the_gpu():
    a = np.full((2, 16, 32), 3, np.int8)
    c = np.zeros(8, np.int8)
    binned("add", "int8")(a, c)  # 128 hits of 3 per bin: 384 wraps to -128
    assert (c == -128).all()


def test_a_block_level_scalar_atomic_acts_once_per_block():
    c = np.zeros(129, np.int32)
    counters()(c)
    assert c[0] == 3 and not c[1:].any()


def test_a_tile_atomic_from_a_reduced_fragment_adds_each_row_once():
    a = np.random.default_rng(4).standard_normal((2, 64, 64)).astype(np.float32)
    c = np.ones(64, np.float32)
    row_sums()(a, c)
    np.testing.assert_allclose(c, 1 + a.astype(np.float64).sum((0, 2)), rtol=1e-5, atol=1e-5)


# ---- T.Parallel extents larger than the fragment they index ----------------------------

@tilecraft.jit
def overhanging_loop():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), "float32")
            for i, j in T.Parallel(128, 64):
                if i < 64:
                    f[i, j] = A[i, j]
            T.copy(f, C)

    return k


def test_a_parallel_extent_past_its_fragment_is_one_located_error_on_both_backends():
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.ir import ParallelLoop
    from tilecraft.ir.visitor import walk

    k = overhanging_loop()
    line = next(s for s in walk(k.func.body) if isinstance(s, ParallelLoop)).span.line
    runs = {"interpreter": lambda: k(np.ones((128, 64), np.float32), np.zeros((64, 64),
                                                                             np.float32)),
            "cuda": lambda: generate_cuda(k.func, "sm_90a")}
    messages = set()
    for name, run in runs.items():
        with pytest.raises(tilecraft.TilecraftError) as e:
            run()
        assert (e.value.code, e.value.line) == ("TC401", line), name
        messages.add(str(e.value))
    assert len(messages) == 1 and "T.Parallel(128, 64) indexes dimension 0 (size 64)" in \
        messages.pop()
