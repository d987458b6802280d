"""Atomics mean the same on the GPU as on the interpreter: inside T.Parallel an atomic acts once
per logical element (not once per thread holding a replica of it), a tile atomic from a
replicated fragment adds each element once, a scalar atomic at block level acts once per block
(unless it depends on the thread index), and every standard dtype has all three kinds."""

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.ir import Atomic
from tilecraft.ir.visitor import walk

KINDS = ["add", "max", "min"]
DTYPES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8",
          "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@tilecraft.jit
def column_sums(rows=4, cols=64, dtype="float32"):
    """C[j] += A[bx, j], one block per row: 4 blocks adding rows of a 4x64 tensor into 64
    outputs (the loop's layout holds each element on 2 of the 128 threads)."""

    @T.prim_func
    def k(A: T.Tensor((rows, cols), dtype), C: T.Tensor((cols,), dtype)):
        with T.Kernel(rows, threads=128) as bx:
            for j in T.Parallel(cols):
                T.atomic_add(C[j], A[bx, j])

    return k


@tilecraft.jit
def binned(kind, dtype, bins=8):
    """C[(i + j) % bins] <kind>= A[bx, i, j] where A is not 0: many elements per address, masked."""
    atomic = getattr(T, f"atomic_{kind}")

    @T.prim_func
    def k(A: T.Tensor((2, 16, 32), dtype), C: T.Tensor((bins,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i, j in T.Parallel(16, 32):
                if T.cast(A[bx, i, j], "float32") != 0:  # (no fp8 comparisons in C)
                    atomic(C[(i + j) % bins], A[bx, i, j])

    return k


@tilecraft.jit
def row_sums(rows=64, cols=64):
    """C[r] += sum_j A[bx, r, j] from a reduction's fragment, whose layout is replicated."""

    @T.prim_func
    def k(A: T.Tensor((2, rows, cols), "float32"), C: T.Tensor((rows,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            f = T.alloc_fragment((rows, cols), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.copy(A[bx, 0, 0], f)
            T.reduce_sum(f, s, dim=1)
            T.atomic_add(C[0:rows], s)

    return k


@tilecraft.jit
def counters():
    """C[0] += 1 at block level: once per block."""

    @T.prim_func
    def k(C: T.Tensor((129,), "int32")):
        with T.Kernel(3, threads=128) as bx:
            T.atomic_add(C[0], 1)

    return k


@tilecraft.jit
def doubled_rows(rows=64, cols=64):
    """A loop over a replicated fragment that writes both it and memory: every replica must
    update its registers (they are read by all threads next), memory is written once."""

    @T.prim_func
    def k(A: T.Tensor((rows, cols), "float32"), C: T.Tensor((rows,), "float32"),
          D: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((rows, cols), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.copy(A[0, 0], f)
            T.reduce_max(f, s, dim=1)
            for i in T.Parallel(rows):
                s[i] = s[i] * 2
                C[i] = s[i]
            for i, j in T.Parallel(rows, cols):
                f[i, j] = f[i, j] - s[i]
            T.copy(f, D[0, 0])

    return k


def _body(factory) -> str:
    return generate_cuda(factory.func, "sm_90a").source.split('extern "C"')[1]


def test_an_atomic_in_parallel_runs_on_one_replica_per_element():
    body = _body(column_sums())
    assert "replicate(2)" in body
    assert re.search(r"\n\s+if \(\(tid / 64\) == 0\) tc::atomic_add\(&C_\[j_\], ", body)


def test_a_block_level_scalar_atomic_runs_once_per_block():
    assert "if (tid == 0) tc::atomic_add(&C_[0], " in _body(counters())


def test_a_per_thread_scalar_atomic_runs_in_every_thread():
    @tilecraft.jit
    @T.prim_func
    def k(C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.get_thread_binding()
            T.atomic_add(C[t], 1)
            if t < 4:
                T.atomic_add(C[0], 1)

    body = _body(k)
    assert re.search(r"\n\s+tc::atomic_add\(&C_\[t_\], ", body)
    assert re.search(r"if \(t_ < 4\) \{\n\s+tc::atomic_add\(&C_\[0\]", body)


def test_a_tile_atomic_from_a_replicated_fragment_adds_once():
    body = _body(row_sums())
    loop = body[body.index("// atomic_add_global(s, C, "):]
    atomics = [ln for ln in loop.splitlines() if "tc::atomic_add(" in ln]
    assert atomics and all(re.search(r"\(tid % \d+\) == 0\) tc::atomic_add\(&C_\[", ln)
                           for ln in atomics), atomics


def test_replicas_update_their_registers_and_write_memory_once():
    body = _body(doubled_rows())
    loop = body[body.index("// for i in parallel(64, "):body.index("// for i_1, j in parallel(")]
    assert "replicate(16)" in loop
    assert re.search(r"\n\s+s_\[li\] = s_\[li\] \* 2\.0f;", loop)  # all
    assert re.search(r"\n\s+if \(\(tid % 16\) == 0\) C_\[i_\] = s_\[li\];",
                     loop)  # one writer


@tilecraft.jit
def stored_then_read_back(rows=64, cols=64):
    """A replicated loop that reads back the element it stored in C: with no barrier inside the
    loop, every replica must store it (each reads its own store); D is stored once."""

    @T.prim_func
    def k(A: T.Tensor((rows, cols), "float32"), C: T.Tensor((rows,), "float32"),
          D: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((rows, cols), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.copy(A[0, 0], f)
            T.reduce_max(f, s, dim=1)
            for i in T.Parallel(rows):
                C[i] = s[i]
                D[i] = C[i] + 1

    return k


def test_replicas_that_read_back_their_store_all_store():
    body = _body(stored_then_read_back())
    loop = body[body.index("// for i in parallel(64, "):]
    assert "replicate(16)" in loop
    assert re.search(r"\n\s+C_\[i_\] = s_\[li\];", loop)  # every replica
    assert re.search(r"\n\s+if \(\(tid % 16\) == 0\) D_\[i_\] = ", loop)  # D: once


def test_a_tile_op_inside_parallel_is_refused_on_cuda_as_on_the_interpreter():
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for j in T.Parallel(64):
                T.atomic_add(C[0:64], A[0:64])

    line = next(s for s in walk(k.func.body) if isinstance(s, Atomic)).span.line
    for run in (lambda: generate_cuda(k.func, "sm_90a"),
                lambda: k(np.zeros(64, np.float32), np.zeros(64, np.float32))):
        with pytest.raises(tilecraft.TilecraftError) as e:
            run()
        assert e.value.code == "TC108" and e.value.line == line


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_atomic_of_every_dtype_compiles(dtype, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    for kind in KINDS:
        kernel = tilecraft.compile(binned.factory(kind, dtype), arch=arch)
        assert kernel.resources.spill_stores == 0


# ---- on the GPU, against the interpreter ------------------------------------------------

def _both(kernel, *arrays):
    """Run `kernel` on the interpreter (numpy copies) and on the GPU; both results as numpy
    (bf16 / fp8 moved through integer views of the same bytes)."""
    import torch

    host = [a.copy() for a in arrays]
    kernel(*host)
    ints = [getattr(torch, f"int{8 * a.itemsize}") for a in arrays]
    dev = [torch.from_numpy(a.view(f"i{a.itemsize}").copy()).cuda()
           .view(resolve(str(a.dtype)).torch_dtype) for a in arrays]
    kernel(*dev)
    torch.cuda.synchronize()
    return host, [d.view(i).cpu().numpy().view(a.dtype) for d, i, a in zip(dev, ints, arrays)]


@pytest.mark.gpu
def test_column_sums_on_the_gpu_match_the_interpreter():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    c = rng.standard_normal(64).astype(np.float32)
    (_, want), (_, got) = _both(column_sums(), a, c)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # was off by up to 16.8


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binned_atomics_on_the_gpu_match_the_interpreter(kind, dtype):
    """Values in {-1, 0, 1} ({0, 1, 2} unsigned) and at most 2 hits per bin and block: every
    partial sum is exact in every dtype, so the order of the atomics cannot matter."""
    t = resolve(dtype)
    rng = np.random.default_rng(1)
    lo, hi = (0, 3) if dtype.startswith("uint") else (-1, 2)
    a = rng.integers(lo, hi, (2, 16, 32))
    a[:, 2:, :] = 0  # rows i < 2 and columns j < 4: bin i + j gets at most 2 hits per block
    a[:, :, 4:] = 0
    c = rng.integers(lo, hi, 8)
    (_, want), (_, got) = _both(binned(kind, dtype), a.astype(t.np_dtype), c.astype(t.np_dtype))
    assert np.array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.gpu
def test_replicated_atomics_and_registers_on_the_gpu_match_the_interpreter():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 64, 64)).astype(np.float32)
    (_, want), (_, got) = _both(row_sums(), a, np.zeros(64, np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    poison = [np.full(64, np.nan, np.float32), np.full((64, 64), np.nan, np.float32)]
    (_, c1, d1), (_, c2, d2) = _both(doubled_rows(), a, *poison)
    np.testing.assert_array_equal(c2, c1)
    np.testing.assert_array_equal(d2, d1)


@pytest.mark.gpu
def test_a_block_level_atomic_counts_blocks_on_the_gpu_as_on_the_interpreter():
    (want,), (got,) = _both(counters(), np.zeros(129, np.int32))
    assert want[0] == 3 and np.array_equal(got, want)


@pytest.mark.gpu
def test_replicas_reading_back_their_store_on_the_gpu_match_the_interpreter():
    a = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    poison = [np.full(64, np.nan, np.float32), np.full(64, np.nan, np.float32)]
    (_, c1, d1), (_, c2, d2) = _both(stored_then_read_back(), a, *poison)
    np.testing.assert_array_equal(d1, a.max(axis=1) + 1)
    np.testing.assert_array_equal(c2, c1)
    np.testing.assert_array_equal(d2, d1)
