"""Atomics the GPU computes differently from a plain hardware atomic, against the interpreter:
8/16-bit integers (a compare-and-swap on the 32-bit word holding the element, neighbours
untouched, wrapping like the interpreter), atomics fed by a partial tile copy whose start lies
before the tensor (fuzz seed 500316), and tile atomics from part of a fragment (refused)."""

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.ir import Atomic
from tilecraft.ir.visitor import walk

NARROW = ["int8", "uint8", "int16", "uint16"]


@tilecraft.jit
def shifted_sums():
    """Y[j] += X[by * 2 + 1 + i, bx * 128 - 44 + j] (0 outside X): columns before the tensor
    read 0 on the interpreter; the GPU used to read the previous row's tail there."""

    @T.prim_func
    def k(X: T.Tensor((4, 120), "int16"), Y: T.Tensor((128,), "int16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            t = T.alloc_fragment((2, 128), "int16")
            T.copy(X[by * 2 + 1, bx * 128 - 44], t)
            for i, j in T.Parallel(2, 128):
                T.atomic_add(Y[j], t[i, j])

    return k


@tilecraft.jit
def narrow_bins(kind, dtype, bins=6):
    """C[(i + j) % bins] <kind>= A[bx, i, j]: 1024 updates per block on 6 neighbouring elements
    (1- and 2-byte elements share 32-bit words), sums wrapping around the type."""
    atomic = getattr(T, f"atomic_{kind}")

    @T.prim_func
    def k(A: T.Tensor((4, 32, 32), dtype), C: T.Tensor((bins + 2,), dtype)):
        with T.Kernel(4, threads=128) as bx:
            for i, j in T.Parallel(32, 32):
                atomic(C[1 + (i + j) % bins], A[bx, i, j])

    return k


def _shifted_model(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = y.astype(np.int64)
    for bx in range(2):
        for by in range(2):
            for i in range(2):
                r, c = by * 2 + 1 + i, bx * 128 - 44 + np.arange(128)
                ok = (c >= 0) & (c < 120)
                if r < 4:
                    out[ok] += x[r, c[ok]]
    return ((out + 2**15) % 2**16 - 2**15).astype(np.int16)


def _inputs_500316():
    rng = np.random.default_rng(500316)
    return (rng.integers(-2**15, 2**15, (4, 120)).astype(np.int16),
            rng.integers(-2**15, 2**15, 128).astype(np.int16))


def test_atomics_after_a_copy_starting_before_the_tensor_read_zeros_there():
    x, y = _inputs_500316()
    want = _shifted_model(x, y)
    shifted_sums()(x, y)  # the interpreter
    assert np.array_equal(y, want)
    src = generate_cuda(shifted_sums().func, "sm_90a").source
    copy = src[src.index("// load_global(X, "):src.index("// for i, j in parallel(")]
    assert "(bx_ * 128 - 44 + (tid % 64) * 2 + li) >= 0" in copy


def test_a_tile_atomic_from_part_of_a_fragment_is_refused_on_cuda():
    @tilecraft.jit
    @T.prim_func
    def k(X: T.Tensor((8, 8), "int32"), Y: T.Tensor((4, 8), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.alloc_fragment((8, 8), "int32")
            T.copy(X, t)
            T.atomic_add(Y, t[4:8, 0:8])

    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    y = np.ones((4, 8), np.int32)
    k(x, y)  # the interpreter adds rows 4..7
    assert np.array_equal(y, x[4:] + 1)
    line = next(s for s in walk(k.func.body) if isinstance(s, Atomic)).span.line
    with pytest.raises(tilecraft.TilecraftError) as e:  # was: all 8 rows added into Y's 4
        generate_cuda(k.func, "sm_90a")
    assert e.value.code == "TC502" and e.value.line == line
    assert "part of the fragment `t`" in str(e.value)


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_atomics_loop_on_a_32_bit_compare_and_swap(dtype):
    """Every atomic is a 32-bit CAS (the word holding the element), retried by a branch back."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from sass import cuobjdump, sass

    from tilecraft.runtime import compile_cuda

    if cuobjdump() is None:
        pytest.skip("cuobjdump is not installed")
    gen = generate_cuda(narrow_bins.factory("add", dtype), "sm_90a")
    lines = sass(compile_cuda(gen.source, "sm_90a", name=gen.name).cubin)
    addr = [int(re.search(r"/\*([0-9a-f]{4,})\*/", ln).group(1), 16) for ln in lines]
    atoms = [k for k, ln in enumerate(lines) if "ATOM" in ln or "RED" in ln]
    assert atoms
    for k in atoms:
        assert "CAS" in lines[k] and ".64" not in lines[k], lines[k]
        back = next(ln for ln in lines[k + 1:] if "BRA" in ln)
        assert int(re.search(r"BRA (0x[0-9a-f]+)", back).group(1), 16) <= addr[k], back


# ---- on the GPU, against the interpreter ------------------------------------------------

def _gpu(kernel, *arrays):
    import torch

    dev = [torch.from_numpy(a.copy()).cuda() for a in arrays]
    kernel(*dev)
    torch.cuda.synchronize()
    return [d.cpu().numpy() for d in dev]


@pytest.mark.gpu
def test_atomics_after_a_copy_starting_before_the_tensor_match_on_the_gpu():
    x, y = _inputs_500316()
    _, got = _gpu(shifted_sums(), x, y)
    assert np.array_equal(got, _shifted_model(x, y))  # was 44 of 128 wrong (seed 500316)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["add", "max", "min"])
@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_atomics_wrap_and_spare_neighbours_on_the_gpu(kind, dtype):
    """Integer results do not depend on the order of the updates: GPU == interpreter exactly.
    C[0] and C[7] are never updated; they share words with updated elements."""
    info = np.iinfo(resolve(dtype).np_dtype)
    rng = np.random.default_rng(7)
    a = rng.integers(info.min, info.max + 1, (4, 32, 32)).astype(dtype)
    c = rng.integers(info.min, info.max + 1, 8).astype(dtype)
    want = c.copy()
    narrow_bins(kind, dtype)(a, want)  # the interpreter
    _, got = _gpu(narrow_bins(kind, dtype), a, c)
    assert got[0] == c[0] and got[7] == c[7]
    assert np.array_equal(got, want)
