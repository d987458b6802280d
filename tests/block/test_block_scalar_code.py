"""The kernel's scalar code on the block path: block-level stores to global and shared memory
(thread 0's, once per block, as the interpreter runs them), scalar loads of shared memory,
`while`, `break`, mutable locals (`var`), local arrays and their copies, fills and cumsums,
conditions that read memory, 64-bit lets. The lowered program runs on the block VM exactly as
the Tile IR runs on the interpreter; the printed CUDA puts thread 0's stores under
`if (tid == 0)`, the barriers where the other threads meet them (never inside control flow on a
per-thread value), compiles with NVRTC and, on a GPU, computes what the interpreter computes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tests.codegen import test_block_level_stores as stores
from tests.codegen.test_debug_ops import cumsum_kernel, local_copy_kernel
from tests.codegen.test_index64 import flat_scale
from tests.codegen.test_index64_multidim import corner
from tests.frontend import test_mutable_locals as locals_
from tests.frontend.helpers import err_line
from tests.frontend.test_python_subset import big_constant
from tests.interp import semantics_kernels as K
from tilecraft import interp
from tilecraft.block import Synchronize
from tilecraft.block.barriers import insert_barriers
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.values import np_type
from tilecraft.ir import Buffer, If
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM, target_from_arch


@T.prim_func
def shared_walk(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"),
                C: T.Tensor((8,), "int32")):
    """A while loop on a shared element, a break, shared stores from thread 0, an if on shared
    values, a local array filled and updated, a var counter."""
    with T.Kernel(2, threads=64) as bx:
        S = T.alloc_shared((64,), "float32")
        L = T.alloc_local((4,), "int32")
        n = T.alloc_var("int32")
        T.copy(A[bx * 64], S)
        T.fill(L, 3)
        n = 0
        while S[n] < 1.0:
            S[n] = S[n] + 0.5
            n = n + 1
            if n >= 60:
                break
        for i in T.serial(4):
            if S[i] > 0.25:
                L[i] = L[i] + i + n
        T.copy(S, B[bx * 64])
        T.copy(L, C[bx * 4])


@T.prim_func
def local_regions(A: T.Tensor((8, 8), "float16"), B: T.Tensor((8,), "float32"),
                  C: T.Tensor((16, 8), "float32")):
    """Fills of a var and of a local row, a copy reading past A's rows (zeros), a local cumsum,
    local -> a region of shared memory, local -> global."""
    with T.Kernel(2, threads=32) as bx:
        v = T.alloc_var("float32")
        L = T.alloc_local((2, 4), "float32")
        S = T.alloc_shared((8, 8), "float32")
        T.fill(v, 2.5)
        T.copy(A[bx * 3 + 5, 2:6], L[1, 0:4])
        T.fill(L[0, 0:4], v)
        T.cumsum(L, dim=1)
        T.fill(S, 0.0)
        T.copy(L, S[bx * 2:bx * 2 + 2, 3:7])
        T.copy(S, C[bx * 8, 0])
        T.copy(L[1, 0:4], B[bx * 4])


def _f(k):
    return getattr(k, "func", k)


KERNELS = {
    "count_up": (stores.count_up, {}),
    "read_then_overwrite": (stores.read_then_overwrite, {}),
    "rmw_and_read_back": (stores.rmw_and_read_back, {}),
    "shared_scalar": (stores.shared_scalar, {}),
    "branch_rebind": (locals_.branch_rebind(), {}),
    "count_and_max": (locals_.count_and_max(), {}),
    "serial_sum": (locals_.serial_sum(), {}),
    "while_counter": (locals_.while_counter(), {"n": 7}),
    "pipelined_counter": (locals_.pipelined_counter(), {}),
    "big_constant": (big_constant(), {}),
    "divmod_negative": (K.divmod_negative, {"s": -9}),
    "local_copies": (local_copy_kernel(), {}),
    "local_cumsum": (cumsum_kernel(8, 16, 4, 8, dim=1, scope="local", reverse=True), {}),
    "local_cumsum_f16_in_place": (cumsum_kernel(8, 16, 4, 8, dim=0, scope="local",
                                                dtype="float16", in_place=True), {}),
    "corner": (corner(64, 4096), {}),
    "shared_walk": (shared_walk, {}),
    "local_regions": (local_regions, {}),
}


# tensors of 2^31 elements or more (64-bit indices): compiled here, run on the GPU only
HUGE = {"flat_scale": lambda: flat_scale(2**31 + 4096),
        "corner_dynamic": lambda: corner(2**16 + 8, 2**15, True)}


def _inputs(func, scalars: dict, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        if not isinstance(p, Buffer):
            out.append(np.asarray(scalars[p.name], dtype=np_type(p.dtype))[()])
        elif p.dtype.is_float:
            out.append(rng.standard_normal(p.shape).astype(np_type(p.dtype)))
        else:
            out.append(rng.integers(-5, 5, p.shape).astype(np_type(p.dtype)))
    return out


def _program(func, arch: str = "sm_90a"):
    return lowered_program(lower(func, H100_SXM if arch == "sm_90a" else target_from_arch(arch)))


def _source(func, arch: str = "sm_90a") -> str:
    return print_cuda(_program(func, arch), arch).source.split('extern "C"')[1]


@pytest.mark.parametrize("name", list(KERNELS))
def test_scalar_code_runs_on_the_vm_as_on_the_interpreter(name):
    k, scalars = KERNELS[name]
    func = _f(k)
    want = _inputs(func, scalars)
    got = [x.copy() if isinstance(x, np.ndarray) else x for x in want]
    interp.run(func, want)
    _program(func).run(*got)
    for x, y in zip(want, got):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", list(KERNELS) + list(HUGE))
def test_scalar_code_compiles(name, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    func = _f(HUGE[name]()) if name in HUGE else _f(KERNELS[name][0])
    printed = print_cuda(_program(func, arch), arch)
    compile_cuda(printed.source, arch, name=printed.name, use_cache=False)


# ---- the printed source -----------------------------------------------------------------------
def _line(src: str, marker: str) -> str:
    lines = [ln.strip() for ln in src.splitlines() if marker in ln]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def _syncs_between(src: str, a: str, b: str) -> int:
    i = src.index(a)
    return src[i: src.index(b, i + len(a))].count("__syncthreads();")


def test_block_level_stores_to_memory_are_thread_0s_and_locals_every_threads():
    src = _source(_f(stores.rmw_and_read_back))
    assert _line(src, "A_[s_] =").startswith("if (tid == 0) A_[s_] = ")
    assert _line(src, "C_[0] = 7").startswith("if (tid == 0) ")
    src = _source(shared_walk)
    assert _line(src, "S_[n_] = ").startswith("if (tid == 0) S_[n_] = ")
    assert _line(src, "n_ = tc::wrap_add").startswith("n_ = ")  # a var: every thread's own
    assert _line(src, "int n_ = int(0);") and _line(src, "int L_[4];")
    assert _line(src, "L_[i_] = ").startswith("L_[i_] = ")


def test_thread_0s_stores_meet_the_other_threads_at_barriers():
    src = _source(_f(stores.rmw_and_read_back))
    assert _syncs_between(src, "A_[s_] =", "C_[0] =") == 0  # thread 0 orders its own stores
    assert _syncs_between(src, "C_[0] = 7", "A_[") == 1  # then every thread reads A
    assert src.count("__syncthreads();") == 1
    body = _source(_f(stores.count_up))
    body = body[body.index("while ("):]
    # every thread reads A[0] in the condition before thread 0 overwrites it, and reads it
    # again after the store
    assert _syncs_between(body, "while (", "if (tid == 0) A_[0]") == 1
    assert _syncs_between(body, "if (tid == 0) A_[0]", "}") == 1
    loop = _source(_f(stores.read_then_overwrite))
    assert _syncs_between(loop, "const int x_ = A_[k_];", "if (tid == 0) A_[") == 1
    assert _syncs_between(loop, "if (tid == 0) A_[", "}") == 1


def test_a_shared_store_lands_before_the_block_reads_it():
    src = _source(_f(stores.shared_scalar))
    assert _line(src, "S_[0] =").startswith("if (tid == 0) S_[0] = ")
    load = re.search(r"S_t\d+_\[li\] = S_\[", src)[0]  # (the copy in is asynchronous)
    assert _syncs_between(src, "S_[0] =", load) == 1


def test_thread_0s_loops_over_local_arrays_have_no_barrier_inside():
    src = _source(local_copy_kernel())
    for loop in src.split("for (int c_")[1:]:
        assert "__syncthreads" not in loop[: loop.index("}")]


def test_a_tensor_thread_0_writes_is_not_restrict():
    head = print_cuda(_program(_f(stores.count_up)), "sm_90a").source
    assert "int* A_" in head and "__restrict__ A_" not in head
    head = print_cuda(_program(_f(stores.rmw_and_read_back)), "sm_90a").source
    assert "int* __restrict__ B_" in head  # written by every thread only


def test_lets_feeding_64_bit_indices_are_64_bit():
    src = _source(_f(flat_scale(2**31 + 4096)))
    assert "const long long base_ = " in src
    src = _source(_f(corner(2**16 + 8, 2**15, True)))
    assert "const long long col_ = " in src
    assert _line(src, "tc::wrap_add<signed char>(A_[").startswith("if (tid == 0) A_[")
    assert "long long" not in _source(_f(flat_scale(2**20)))


# ---- control flow on per-thread values ---------------------------------------------------------
@T.prim_func
def per_thread_branch(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        f = T.alloc_fragment((128,), "float32")
        S = T.alloc_shared((128,), "float32")
        L = T.alloc_local((1,), "float32")
        T.copy(A[0], f)
        T.copy(A[0], S)
        for i in T.Parallel(128):
            L[0] = f[i]  # each thread its own element
        if L[0] > 0:
            S[0] = L[0]
            B[1] = S[1]
        T.copy(S, B[0])


def test_no_barrier_inside_control_flow_on_a_per_thread_value():
    program = insert_barriers(_program(per_thread_branch))
    branch = next(s for s in walk(program.body) if isinstance(s, If))
    assert not any(isinstance(x, Synchronize) for x in walk(branch.then_body))
    src = _source(per_thread_branch)
    assert _line(src, "S_[0] = ").startswith("S_[0] = ")  # per thread, as written
    i = src.index("if (L_[0] > ")
    assert "__syncthreads();" in src[i - 40: i]  # before the branch (it stores shared memory)
    assert _syncs_between(src, "if (L_[0] > ", "// store_global(") == 1  # after it, before the copy


# ---- refusals -----------------------------------------------------------------------------------
def test_a_fragment_in_scalar_code_is_tc502_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "float32")
            T.fill(f, 1.0)
            A[0] = f[3]  # ERR

    with pytest.raises(TilecraftError) as info:
        _program(k)
    assert info.value.code == "TC502" and "`f` (fragment)" in info.value.message
    assert info.value.line == err_line(test_a_fragment_in_scalar_code_is_tc502_at_its_line)


def test_a_copy_from_a_fragment_to_a_local_array_is_tc502_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((64,), "float32")
            L = T.alloc_local((64,), "float32")
            T.fill(f, 1.0)
            T.copy(f, L)  # ERR
            T.copy(L, A[0])

    with pytest.raises(TilecraftError) as info:
        _program(k)
    assert info.value.code == "TC502" and "shared memory" in info.value.hint
    assert info.value.line == err_line(
        test_a_copy_from_a_fragment_to_a_local_array_is_tc502_at_its_line)


# ---- on the GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(KERNELS))
def test_gpu_scalar_code_on_the_block_path_matches_the_interpreter(name, monkeypatch):
    import torch

    k, scalars = KERNELS[name]
    func = _f(k)
    arrays = _inputs(func, scalars, seed=1)
    cpu = [torch.from_numpy(np.array(a)) if isinstance(a, np.ndarray) else a.item()
           for a in arrays]
    gpu = [a.clone().cuda() if isinstance(a, torch.Tensor) else a for a in cpu]
    kernel = tilecraft.compile(func, target="cuda")
    for _ in range(3):  # races show up as run-to-run differences too
        tilecraft.compile(func, target="interp")(*cpu)
        kernel(*gpu)
    torch.cuda.synchronize()
    for c, g in zip(cpu, gpu):
        if not isinstance(c, torch.Tensor):
            continue
        if name == "pipelined_counter":  # (the gemm adds in another order on tensor cores)
            torch.testing.assert_close(c, g.cpu(), rtol=1e-3, atol=1e-3)
        else:
            assert torch.equal(c, g.cpu()), (name, c, g.cpu())
