"""`return_prev` and `memory_order` on a block-level scalar atomic (docs/language.md, "Atomics"):
thread 0's atomic (one `atom.<sem>.gpu` where PTX has it, else between fences), barriers
around it, its old value in a shared element every thread reads. The split-sum pattern (each
block writes its part, counts itself, the last one adds all parts and resets the count) runs
on the interpreter, on the VM bit for bit as on the interpreter, compiles for sm_90a and
sm_80, and on a GPU gives the interpreter's bits, call after call. Forms it does not take are
TC113/TC112 at the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import interp
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

from .refusals import refused


@tilecraft.jit
def split_sum(N, S, BN=64, order="acq_rel"):
    """Y = 2 * sum over the S rows of X: block (bn, bs) writes its part into P[bs], counts
    itself in C[bn]; the tile's last block adds the parts in order, records its bs in L."""

    @T.prim_func
    def k(X: T.Tensor((S, N), "float32"), P: T.Tensor((S, N), "float32"),
          C: T.Tensor((N // BN,), "int32"), Y: T.Tensor((N,), "float32"),
          L: T.Tensor((N // BN,), "int32")):
        with T.Kernel(N // BN, S, threads=BN) as (bn, bs):
            acc = T.alloc_fragment((BN,), "float32")
            for i in T.Parallel(BN):
                acc[i] = X[bs, bn * BN + i] * 2.0
            for i in T.Parallel(BN):
                P[bs, bn * BN + i] = acc[i]
            arrived = T.atomic_add(C[bn], 1, memory_order=order, return_prev=True)
            if arrived == S - 1:
                T.clear(acc)
                for p in T.serial(S):
                    for i in T.Parallel(BN):
                        acc[i] += P[p, bn * BN + i]
                for i in T.Parallel(BN):
                    Y[bn * BN + i] = acc[i]
                L[bn] = bs
                C[bn] = 0

    return k


@tilecraft.jit
def previous_values():
    """max / min / add returning the old value, on global and shared elements, relaxed."""

    @T.prim_func
    def k(D: T.Tensor((4,), "int32"), R: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((1,), "int32")
            S[0] = 5
            R[0] = T.atomic_max(D[0], 7, return_prev=True)
            R[1] = T.atomic_min(D[1], -3, return_prev=True)
            R[2] = T.atomic_add(S[0], 10, return_prev=True)
            R[3] = S[0] + T.atomic_add(D[2], bx + 1, memory_order="release", return_prev=True)

    return k


@tilecraft.jit
def narrow_constants():
    """Constants into 8- and 16-bit elements (C's int literal would match no overload)."""

    @T.prim_func
    def k(B: T.Tensor((4,), "int8"), H: T.Tensor((4,), "float16"), R: T.Tensor((2,), "int8")):
        with T.Kernel(1, threads=32):
            R[0] = T.atomic_min(B[1], -3, return_prev=True)
            T.atomic_add(H[0], 1.5, memory_order="release")
            for i in T.Parallel(4):
                T.atomic_max(B[i], 2)

    return k


def _args(N, S, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((S, N)).astype(np.float32)
    return [x, np.full((S, N), np.nan, np.float32), np.zeros(N // 64, np.int32),
            np.full(N, np.nan, np.float32), np.full(N // 64, -1, np.int32)]


def test_the_last_block_adds_every_part_and_resets_the_count_on_the_interpreter():
    N, S = 256, 4
    args = _args(N, S)
    interp.run(split_sum(N, S).func, args)
    x, _, c, y, last = args
    want = np.zeros(N, np.float32)
    for p in range(S):
        want += 2 * x[p]
    np.testing.assert_array_equal(y, want)
    assert (c == 0).all() and (last == S - 1).all()  # (blocks run in order here)


def test_previous_values_are_the_elements_before_the_atomic():
    d, r = np.array([3, 4, 100, 0], np.int32), np.zeros(4, np.int32)
    interp.run(previous_values().func, [d, r])
    assert d.tolist() == [7, -3, 101, 0] and r.tolist() == [3, 4, 5, 15 + 100]


@tilecraft.jit
def old_value_outlives_a_tile():
    """The old value is read after a shared tile's whole life: the tile may not take its
    bytes (block/smem_lifetimes.py counts the atomic's write of it)."""

    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32"), C: T.Tensor((1,), "int32"),
          R: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64):
            pair = (T.atomic_add(C[0], 1, return_prev=True), 0)
            X = T.alloc_shared((64,), "int32")
            T.copy(A, X)
            T.copy(X, B)
            R[0] = pair[0]

    return k


def _vm_cases():
    ints = [np.array([3, 4, 100, 0], np.int32), np.zeros(4, np.int32)]
    tile = [np.arange(100, 164, dtype=np.int32), np.zeros(64, np.int32),
            np.array([7], np.int32), np.zeros(1, np.int32)]
    return [(lambda: split_sum(256, 4).func, lambda: _args(256, 4)),
            (lambda: previous_values().func, lambda: [a.copy() for a in ints]),
            (lambda: old_value_outlives_a_tile().func, lambda: [a.copy() for a in tile])]


@pytest.mark.parametrize("arena", [False, True], ids=["tensors", "arena"])
@pytest.mark.parametrize("case", range(3))
def test_the_vm_runs_the_lowered_program_as_the_interpreter(case, arena):
    from tilecraft.block.vm import run

    make, args = _vm_cases()[case]
    func, args = make(), args()
    want, got = [a.copy() for a in args], [a.copy() for a in args]
    interp.run(func, want)
    run(lowered_program(lower(func, H100_SXM)), got, arena=arena)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
    if case == 2:
        assert want[3][0] == 7


def test_the_hidden_element_is_allocated_at_the_atomics_line():
    src = _source(split_sum(256, 4).func)
    line = next(k + 1 for k, text in enumerate(open(__file__).read().splitlines())
                if "arrived = T.atomic_add(C[bn], 1" in text)
    assert re.search(rf"// C_prev = allocate_shared\(int32\[1\].*\(line {line}\)", src)


def _source(func, arch="sm_90a") -> str:
    return print_cuda(lowered_program(lower(func, H100_SXM)), arch).source


@pytest.mark.parametrize("order", ["acq_rel", "release", "acquire"])
def test_an_ordered_int_atomic_on_global_memory_is_one_atom_with_its_order(order):
    src = _source(split_sum(256, 4, order=order).func)
    i = src.index(f"if (tid == 0) {{  // T.atomic_add, memory_order {order}")
    block = src[i:src.index("}", i)]
    assert re.search(rf"C_prev_\[0\] = tc::atomic_add_{order}\(&C_\[bn_\], 1\);", block)
    assert "__threadfence" not in block  # (the atom's own order)
    assert ("tc::fence_proxy_async_global();" in block) == (order != "release")
    assert src[:i].rstrip().endswith("__syncthreads();")  # every thread's part is written
    assert src[i:].split("}", 1)[1].split("const int arrived_", 1)[0].count("__syncthreads") == 1
    assert "int* C_" in src and "__restrict__ C_" not in src


def test_a_seq_cst_atomic_is_thread_0s_between_fences_and_barriers():
    src = _source(split_sum(256, 4, order="seq_cst").func)
    i = src.index("if (tid == 0) {  // T.atomic_add, memory_order seq_cst")
    block = src[i:src.index("}", i)]
    assert re.search(r"__threadfence\(\);\s*C_prev_\[0\] = tc::atomic_add\(&C_\[bn_\], 1\);"
                     r"\s*__threadfence\(\);\s*tc::fence_proxy_async_global\(\);", block)
    assert src[:i].rstrip().endswith("__syncthreads();")


def test_relaxed_return_prev_has_no_fences():
    src = _source(previous_values().func)
    assert "__threadfence" not in src  # (its one release atomic is an int add: an atom)
    assert "tc::atomic_add_release(&D_[2]" in src
    assert re.search(r"S_prev_\[0\] = tc::atomic_add\(&S_\[0\], 10\);", src)


def test_an_ordered_atomic_ptx_has_no_order_for_keeps_the_fences():
    src = _source(narrow_constants().func)  # (a float16 add with release: a CAS loop)
    i = src.index("if (tid == 0) {  // T.atomic_add, memory_order release")
    block = src[i:src.index("}", i)]
    assert block.count("__threadfence();") == 1 and "tc::atomic_add(&H_[0]" in block


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_ordered_atomics_compile(arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    for func in (split_sum(1024, 8).func, previous_values().func, narrow_constants().func):
        printed = print_cuda(lowered_program(lower(func, H100_SXM)), arch)
        assert compile_cuda(printed.source, arch, name=printed.name).resources.spill_stores == 0


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_every_ordered_atom_compiles(arch):
    """Each (kind, type) the printer sends to an `atom.<sem>.gpu` has its function, for each
    order (NVRTC checks an inline asm only where it is used)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.block_cuda.atomics import ORDERED
    from tilecraft.runtime import compile_cuda

    body = [f"  {{ {t} v = ({t})1; v = tc::atomic_{k}_{o}(({t}*)p, v); *({t}*)q += v; }}"
            for k, t in sorted(ORDERED) for o in ("acquire", "release", "acq_rel")]
    src = "\n".join(['#include "tilecraft/common.cuh"', '#include "tilecraft/atomic.cuh"',
                     'extern "C" __global__ void k(void* p, void* q) {', *body, "}"])
    compile_cuda(src, arch, name="k", use_cache=False)


@tilecraft.jit
def counted(kind, dtype, order, G=96):
    """G blocks each apply one ordered atomic to A[0] (value 1 for add, bx + 1 for max, -bx for
    min) and keep the old value in R[bx]."""

    @T.prim_func
    def k(A: T.Tensor((1,), dtype), R: T.Tensor((G,), dtype)):
        with T.Kernel(G, threads=32) as bx:
            v = 1 if kind == "add" else bx + 1 if kind == "max" else -bx
            if dtype.startswith("uint") and kind == "min":
                v = G - bx
            R[bx] = getattr(T, f"atomic_{kind}")(A[0], v, memory_order=order, return_prev=True)

    return k


ORDERED_CASES = [(k, d) for k in ("add", "max", "min")
                 for d in ("int32", "uint32", "int64", "uint64")] \
    + [("add", "float32"), ("add", "float64")]


@pytest.mark.parametrize("kind, dtype", ORDERED_CASES)
def test_each_ordered_case_prints_its_atom(kind, dtype):
    for order in ("acquire", "release", "acq_rel"):
        src = _source(counted(kind, dtype, order).func)
        assert f"tc::atomic_{kind}_{order}(&A_[0]" in src and "__threadfence" not in src


def _counted_check(kind, dtype, order, run):
    """A[0]'s final value is the interpreter's; the old values are one per arrival."""
    G = 96
    a0 = {"add": 10, "max": 0, "min": G + 5}[kind]
    want = [np.array([a0], dtype), np.zeros(G, dtype)]
    interp.run(counted(kind, dtype, order, G).func, want)
    got = run([np.array([a0], dtype), np.zeros(G, dtype)])
    np.testing.assert_array_equal(got[0], want[0])
    if kind == "add":  # (every arrival sees the count before it: a permutation)
        assert sorted(got[1].tolist()) == [a0 + i for i in range(G)]


@pytest.mark.parametrize("kind, dtype", ORDERED_CASES)
def test_each_ordered_case_counts_on_the_vm_as_on_the_interpreter(kind, dtype):
    from tilecraft.block.vm import run

    func = counted(kind, dtype, "acq_rel").func

    def on_vm(args):
        run(lowered_program(lower(func, H100_SXM)), args)
        return args

    _counted_check(kind, dtype, "acq_rel", on_vm)


# ---- refused forms ---------------------------------------------------------------------------
def test_return_prev_inside_parallel_is_tc113_at_its_line():
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    B[i] = T.atomic_add(A[0], 1, return_prev=True)  # ERR

    assert "outside T.Parallel" in refused(factory, "TC113").hint


@pytest.mark.parametrize("where", ["while", "and", "ifexp"])
def test_an_atomic_where_python_would_run_it_once_or_never_is_tc103_at_its_line(where):
    def factory():
        @T.prim_func
        def k(F: T.Tensor((4,), "int32"), R: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                n = T.alloc_var("int32", init=0)
                if where == "while":
                    while T.atomic_add(F[0], 1, return_prev=True) < 3:  # ERR
                        n = n + 1
                elif where == "and":
                    if F[1] > 0 and T.atomic_add(F[0], 1, return_prev=True) == 0:  # ERR
                        n = n + 1
                else:
                    R[0] = T.atomic_add(F[0], 1, return_prev=True) if F[1] > 0 else 0  # ERR
                R[1] = n

    err = refused(factory, "TC103")
    assert "T.atomic_*" in err.message and "statement of its own" in err.hint


def test_an_acquire_inside_t_pipelined_is_tc502_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 128), "float16"),
          C: T.Tensor((4,), "int32"), Y: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, threads=256) as bx:
            a_s = T.alloc_shared((128, 64), "float16")
            b_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for kk in T.Pipelined(4, num_stages=2):
                T.atomic_add(C[kk], 1, memory_order="acquire")  # ERR
                T.copy(A[bx * 128, kk * 64], a_s)
                T.copy(B[kk * 64, 0], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, Y)

    with pytest.raises(TilecraftError) as info:
        lower(k, H100_SXM)
    err = info.value
    assert err.code == "TC502" and "# ERR" in err.span.source_line()
    assert "T.serial" in err.hint


def test_an_ordered_tile_atomic_is_tc113_at_its_line():
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.atomic_add(B, A, memory_order="release")  # ERR

    assert "tile form" in refused(factory, "TC113").hint


def test_an_unknown_memory_order_is_tc112_at_its_line():
    def factory():
        @T.prim_func
        def k(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                T.atomic_add(A[0], 1, memory_order="strong")  # ERR

    assert "acq_rel" in refused(factory, "TC112").hint


# ---- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_split_sums_on_the_gpu_are_the_interpreters_bits_call_after_call():
    import torch

    N, S = 64 * 512, 8
    func = split_sum(N, S).func
    args = _args(N, S, seed=5)
    want = [a.copy() for a in args]
    interp.run(func, want)
    kernel = tilecraft.compile(func, target="cuda")
    dev = [torch.from_numpy(a).cuda() for a in args]
    lasts = set()
    for _ in range(20):
        dev[3].fill_(float("nan"))
        kernel(*dev)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(dev[3].cpu().numpy(), want[3])
        assert (dev[2] == 0).all()
        lasts |= set(dev[4].cpu().tolist())
    assert lasts <= set(range(S))


@pytest.mark.gpu
def test_previous_values_on_the_gpu_match_the_interpreter():
    import torch

    func = previous_values().func
    d, r = np.array([3, 4, 100, 0], np.int32), np.zeros(4, np.int32)
    want = [d.copy(), r.copy()]
    interp.run(func, want)
    dev = [torch.from_numpy(d).cuda(), torch.from_numpy(r).cuda()]
    tilecraft.compile(func, target="cuda")(*dev)
    for x, y in zip(want, dev):
        np.testing.assert_array_equal(x, y.cpu().numpy())


def test_the_hidden_element_does_not_take_a_parameters_name():
    @T.prim_func
    def k(C: T.Tensor((4,), "int32"), C_prev: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            C_prev[0] = T.atomic_add(C[0], 1, return_prev=True)

    assert "C_prev_1 = T.alloc_shared((1,), 'int32')" in k.script()
    c, p = np.array([5, 0, 0, 0], np.int32), np.zeros(1, np.int32)
    interp.run(k, [c, p])
    assert c[0] == 6 and p[0] == 5


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["acquire", "release", "acq_rel"])
@pytest.mark.parametrize("kind, dtype", ORDERED_CASES)
def test_each_ordered_atom_on_the_gpu_counts_as_the_interpreter(kind, dtype, order):
    import torch

    kernel = tilecraft.compile(counted(kind, dtype, order).func, target="cuda")

    def run(args):
        dev = [torch.from_numpy(a).cuda() for a in args]
        kernel(*dev)
        torch.cuda.synchronize()
        return [d.cpu().numpy() for d in dev]

    _counted_check(kind, dtype, order, run)

