"""Atomics on the block path mean what they mean on the interpreter: inside a `parallel` once per
logical element of the loop (one replica of a replicated layout), at block level once per block
(thread 0), on global and shared memory, in every standard dtype; a tile atomic into shared
memory lowers to a `parallel` of scalar atomics; barriers order atomics like stores. The VM
runs the lowered programs bit for bit as the interpreter runs the Tile IR, the printed CUDA
compiles (NVRTC, sm_90a and sm_80), and on a GPU it gives the interpreter's results."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import interp
from tilecraft.block import ParallelCompute
from tilecraft.block.barriers import insert_barriers
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes import resolve
from tilecraft.ir import Atomic
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

KINDS = ["add", "max", "min"]
DTYPES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8",
          "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@tilecraft.jit
def atomics(dtype, kinds=("add", "max", "min")):
    """Every form at once, kinds[k] for form k: per element into global D (masked, many
    elements per address, 2 blocks) and into shared S (a replicated-free 16x32 loop), a tile
    atomic from a replicated fragment into S, block-level atomics on D[8] and S[8]."""
    a0, a1, a2 = (getattr(T, f"atomic_{k}") for k in kinds)

    @T.prim_func
    def k(A: T.Tensor((2, 16, 32), dtype), C: T.Tensor((2, 9), dtype),
          D: T.Tensor((9,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((9,), dtype)
            F = T.alloc_fragment((8,), dtype)
            T.copy(C[bx, 0:9], S)
            T.copy(C[bx, 0:8], F)
            for i, j in T.Parallel(16, 32):
                if T.cast(A[bx, i, j], "float32") != 0:  # (no fp8 comparisons in C)
                    a0(D[(i + j) % 8], A[bx, i, j])
                    a1(S[(i + j) % 8], A[bx, i, j])
            a2(S[0:8], F)
            a0(D[8], A[bx, 0, 1])
            a1(S[8], A[bx, 1, 0])
            T.copy(S, C[bx, 0:9])

    return k


@tilecraft.jit
def column_sums():
    """C[j] += A[bx, j]: 64 elements on 128 threads, each held by 2 replicas."""

    @T.prim_func
    def k(A: T.Tensor((4, 64), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            for j in T.Parallel(64):
                T.atomic_add(C[j], A[bx, j])

    return k


@tilecraft.jit
def counted_then_read():
    """A block-level atomic, then every thread reads the tensor (a barrier between)."""

    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64,), "int32")
            T.atomic_add(A[3], 10)
            T.copy(A[0], f)
            T.copy(f, B[0])

    return k


def _inputs(dtype: str, seed: int, exact: bool) -> list[np.ndarray]:
    """A, C, D for `atomics`. `exact`: values in {-1, 0, 1} ({0, 1, 2} unsigned), A nonzero
    only for i < 2 and j < 4 (at most 2 hits per address and block): every partial sum is
    exact in every dtype, so the order of the atomics cannot matter. Else: dense, wide (floats
    multiples of 1/4: their sums are exact in float64, which the interpreter and the VM round
    once, whatever order they add in)."""
    t = resolve(dtype)
    rng = np.random.default_rng(seed)
    shapes = [(2, 16, 32), (2, 9), (9,)]
    if exact:
        lo, hi = (0, 3) if dtype.startswith("uint") else (-1, 2)
        arrays = [rng.integers(lo, hi, s) for s in shapes]
        arrays[0][:, 2:, :] = 0
        arrays[0][:, :, 4:] = 0
    elif t.is_float:
        arrays = [rng.integers(-40, 41, s) / 4 for s in shapes]
    else:
        info = np.iinfo(t.np_dtype)
        arrays = [rng.integers(info.min, info.max, s, endpoint=True, dtype=t.np_dtype)
                  for s in shapes]
    return [np.asarray(a).astype(t.np_dtype) for a in arrays]


def _vm_matches_interpreter(func, args) -> object:
    program = lowered_program(lower(func, H100_SXM))
    want = [a.copy() for a in args]
    got = [a.copy() for a in args]
    interp.run(func, want)
    program.run(*got)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
    return program


# ---- the VM runs the lowered program as the interpreter runs the kernel ----------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_atomic_form_runs_on_the_vm_as_on_the_interpreter(dtype, kind):
    program = _vm_matches_interpreter(atomics(dtype, (kind,) * 3).func,
                                      _inputs(dtype, 3, exact=False))
    text = str(program)
    assert f"T.atomic_{kind}(S[" in text and f"T.atomic_{kind}(D[" in text


def test_a_replicated_loop_updates_each_element_once_on_the_vm():
    program = _vm_matches_interpreter(column_sums().func, _inputs_columns())
    par = next(s for s in walk(program.body) if isinstance(s, ParallelCompute))
    assert par.layout.is_replicated


def _inputs_columns():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((4, 64)).astype(np.float32),
            rng.standard_normal(64).astype(np.float32)]


def test_a_tile_atomic_into_shared_memory_lowers_to_a_parallel_of_scalar_atomics():
    program = lowered_program(lower(atomics("float32").func, H100_SXM))
    pars = [s for s in walk(program.body) if isinstance(s, ParallelCompute)]
    tile = pars[-1]  # (after the T.Parallel loop)
    (atomic,) = [s for s in walk(tile.body) if isinstance(s, Atomic)]
    assert atomic.kind == "min" and atomic.dst.buffer.name == "S"
    assert tile.layout.is_replicated and tile.extents == (8,)
    assert {t.buffer.name for t in tile.tensors} == {"F", "S"}


def test_an_atomic_on_a_fragment_is_tc502_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64,), "float32")
            T.copy(A[0], f)
            for i in T.Parallel(64):
                T.atomic_add(f[i], 1.0)
            T.copy(f, A[0])

    line = next(s for s in walk(k.body) if isinstance(s, Atomic)).span.line
    with pytest.raises(TilecraftError) as e:
        lowered_program(lower(k, H100_SXM))
    assert e.value.code == "TC502" and e.value.line == line


# ---- barriers ----------------------------------------------------------------------------
def test_a_parallel_loop_writes_its_atomics_destinations_and_the_globals_it_stores():
    program = lowered_program(lower(atomics("float32").func, H100_SXM))
    par = next(s for s in walk(program.body) if isinstance(s, ParallelCompute))
    assert {t.buffer.name for t in par.writes()} == {"D", "S"}
    assert {t.buffer.name for t in par.reads()} == {"A", "D", "S"}


def test_atomics_are_ordered_by_barriers_like_stores():
    body = str(insert_barriers(lowered_program(lower(counted_then_read().func, H100_SXM))))
    at = body.index("T.atomic_add(A[3], 10)")
    assert body.index("synchronize()", at) < body.index("load_global(A", at)
    text = str(insert_barriers(lowered_program(lower(atomics("float32").func, H100_SXM))))
    # atomics of two kinds on the same shared elements: max, then (all threads) min, then max
    first = text.index("T.atomic_max(S[(i + j) % 8]")
    tile = text.index("T.atomic_min(S[i0], F[i0])")
    assert "synchronize()" in text[first:tile]
    assert "synchronize()" in text[tile:text.index("T.atomic_max(S[8]")]


# ---- the printed CUDA -----------------------------------------------------------------------
def _source(func) -> str:
    return print_cuda(lowered_program(lower(func, H100_SXM)), "sm_90a").source


def test_a_replicated_loop_issues_each_atomic_from_one_replica():
    src = _source(column_sums().func)
    assert re.search(r"if \(\(tid / 64\) == 0\) tc::atomic_add\(&C_\[j_\], ", src)


def test_block_level_atomics_are_thread_0s_and_their_tensor_is_not_restrict():
    src = _source(atomics("float32").func)
    assert re.search(r"if \(tid == 0\) tc::atomic_add\(&D_\[8\], ", src)
    assert re.search(r"if \(tid == 0\) tc::atomic_max\(&S_\[8\], ", src)
    assert "float* D_" in src and "__restrict__ A_" in src
    loop = src[src.index("// parallel over [16, 32]"):]
    assert re.search(r"\n\s+tc::atomic_max\(&S_\[", loop)  # no replicas: every thread


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_atomics_of_every_dtype_compile(dtype, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    printed = print_cuda(lowered_program(lower(atomics(dtype).func, H100_SXM)), arch)
    res = compile_cuda(printed.source, arch, name=printed.name).resources
    assert res.spill_stores == 0


# ---- on the GPU, through the block printer, against the interpreter ------------------------
def _gpu(monkeypatch, func, arrays):
    """`func` compiled through the block path and run on the GPU; results as numpy (bf16 and
    fp8 moved through integer views of the same bytes)."""
    import torch

    kernel = tilecraft.compile(func, target="cuda")
    ints = [getattr(torch, f"int{8 * a.itemsize}") for a in arrays]
    dev = [torch.from_numpy(a.view(f"i{a.itemsize}").copy()).cuda()
           .view(resolve(str(a.dtype)).torch_dtype) for a in arrays]
    kernel(*dev)
    torch.cuda.synchronize()
    assert "from the block program" in kernel.get_kernel_source()
    return [d.view(i).cpu().numpy().view(a.dtype) for d, i, a in zip(dev, ints, arrays)]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_atomic_form_on_the_gpu_matches_the_interpreter(monkeypatch, dtype, kind):
    func = atomics(dtype, (kind,) * 3).func
    args = _inputs(dtype, 4, exact=True)
    want = [a.copy() for a in args]
    interp.run(func, want)
    got = _gpu(monkeypatch, func, args)
    for x, y in zip(want, got):
        assert np.array_equal(x.astype(np.float64), y.astype(np.float64)), (x, y)


@pytest.mark.gpu
def test_mixed_atomic_kinds_on_the_gpu_match_the_interpreter(monkeypatch):
    func = atomics("int32").func  # add, max, min on separate addresses: order-free
    args = _inputs("int32", 6, exact=False)
    want = [a.copy() for a in args]
    interp.run(func, want)
    for x, y in zip(want, _gpu(monkeypatch, func, args)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.gpu
def test_replicated_and_block_level_atomics_on_the_gpu_match_the_interpreter(monkeypatch):
    a, c = _inputs_columns()
    want = c.copy()
    interp.run(column_sums().func, [a.copy(), want])
    _, got = _gpu(monkeypatch, column_sums().func, [a, c])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    a, b = np.arange(64, dtype=np.int32), np.full(64, -7, np.int32)
    want = [a.copy(), b.copy()]
    interp.run(counted_then_read().func, want)
    for x, y in zip(want, _gpu(monkeypatch, counted_then_read().func, [a, b])):
        np.testing.assert_array_equal(x, y)
