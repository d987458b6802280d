"""A statement outside T.Parallel runs once per block, as on the interpreter: a scalar store or
atomic to global or shared memory there is thread 0's (`if (tid == 0)`) unless its index or
value depends on the thread, and a barrier orders thread 0's global accesses with the other
threads' (before a later read of what it wrote, before it overwrites what they read), never
inside control flow on the thread index. Stores to `var`/`local` buffers stay per thread."""

import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tests.codegen.test_index64_multidim import corner, corner_reference
from tilecraft.codegen.cuda.build import generate_cuda


def _body(factory) -> str:
    return generate_cuda(factory.func, "sm_90a").source.split('extern "C"')[1]


def _line(src: str, marker: str) -> str:
    """The one generated line holding `marker`."""
    lines = [ln.strip() for ln in src.splitlines() if marker in ln]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def _syncs_between(src: str, a: str, b: str) -> int:
    """__syncthreads() between the first `a` and the next `b` after it."""
    i = src.index(a)
    return src[i: src.index(b, i + len(a))].count("__syncthreads();")


@tilecraft.jit
@T.prim_func
def rmw_and_read_back(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32"),
                      C: T.Tensor((2,), "int32")):
    """+5 on two elements of A (once per block), then the block reads A back."""
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((64,), "int32")
        for s in T.serial(2):
            A[s] = A[s] + 5
        C[0] = 7  # another buffer: no barrier for it
        T.copy(A[0], f)
        T.copy(f, B[0])


def test_read_modify_write_at_block_level_is_thread_0s():
    src = _body(rmw_and_read_back)
    assert _line(src, "A_[s_] =").startswith("if (tid == 0) A_[s_] = ")
    assert _line(src, "C_[0] =").startswith("if (tid == 0) ")


def test_the_block_reads_what_thread_0_stored_after_a_barrier():
    src = _body(rmw_and_read_back)
    assert _syncs_between(src, "A_[s_] =", "load_global(A,") == 1
    assert _syncs_between(src, "A_[s_] =", "C_[0] =") == 0
    assert src.count("__syncthreads();") == 1


def test_block_level_stores_run_once_per_block_on_the_interpreter():
    a = np.arange(64, dtype=np.int32)
    b, c = np.zeros(64, np.int32), np.zeros(2, np.int32)
    rmw_and_read_back(a, b, c)
    assert a[:3].tolist() == [5, 6, 2] and b[:3].tolist() == [5, 6, 2] and c[0] == 7
    x = np.random.default_rng(0).integers(-100, 100, (64, 4096)).astype(np.int8)
    want = corner_reference(x)
    corner(64, 4096)(x)
    assert np.array_equal(x[-3:, -2048:], want)


def test_corner_stores_its_scalars_from_thread_0_after_the_copy_out():
    for src in (_body(corner(64, 4096)), _body(corner(2**16 + 8, 2**15, True))):
        store = _line(src, "<signed char>(A_[")
        assert store.startswith("if (tid == 0) A_[")
        assert _syncs_between(src, "store_global(f, A,", "<signed char>(A_[") == 1


@tilecraft.jit
@T.prim_func
def per_thread_values(A: T.Tensor((128,), "int32"), B: T.Tensor((256,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        x = T.alloc_var("int32")
        y = T.alloc_var("int32")
        x = A[0] + 1  # the same in every thread
        y = tx * 2  # one value per thread
        B[tx + 128] = A[tx]  # index on the thread: every thread its own
        B[0] = x  # from thread 0 (its x is everyone's)
        B[y + 1] = 3  # index on a var that holds a per-thread value
        B[2] = y  # value per thread: every thread stores (as written)


def test_stores_that_depend_on_the_thread_stay_per_thread():
    src = _body(per_thread_values)
    assert _line(src, "B_[0] =").startswith("if (tid == 0) ")
    for marker in ("+ 128] = A_[", "B_[tc::wrap_add<int>(y_, 1)] =", "B_[2] ="):
        assert not _line(src, marker).startswith("if"), marker
    for marker in ("x_ = ", "y_ = "):  # registers: every thread holds its own copy
        assert all(not ln.strip().startswith("if") for ln in src.splitlines()
                   if re.match(rf"\s*{marker}", ln))


@tilecraft.jit
@T.prim_func
def shared_scalar(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64,), "float32")
        T.copy(A[0], S)
        S[0] = S[0] + 1.0
        T.copy(S, B[0])


def test_shared_scalar_store_is_thread_0s_and_lands_before_the_read():
    src = _body(shared_scalar)
    assert _line(src, "S_[0] =").startswith("if (tid == 0) ")
    assert _syncs_between(src, "S_[0] =", "load_shared(S,") == 1
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    shared_scalar(a, b)
    assert b[:2].tolist() == [1.0, 1.0]


@tilecraft.jit
@T.prim_func
def read_then_overwrite(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
    """Every thread reads A[k] before thread 0 stores A[k + 1]; the next iteration reads it."""
    with T.Kernel(1, threads=128) as bx:
        for k in T.serial(7):
            x = A[k]
            A[k + 1] = A[k + 1] + x
        B[0] = A[7]


def test_a_store_after_reads_by_the_block_and_before_the_next_iteration_gets_barriers():
    src = _body(read_then_overwrite)
    loop = src[src.index("for (int k_"):]
    assert _syncs_between(loop, "const int x_ = A_[k_];", "if (tid == 0) A_[") == 1
    assert _syncs_between(loop, "if (tid == 0) A_[", "}") == 1  # end of the loop body
    a = np.ones(8, np.int32)
    b = np.zeros(8, np.int32)
    read_then_overwrite(a, b)
    assert a.tolist() == [1, 2, 3, 4, 5, 6, 7, 8] and b[0] == 8


@tilecraft.jit
@T.prim_func
def count_up(A: T.Tensor((1,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        while A[0] < 10:  # every thread tests what thread 0 stored last time
            A[0] = A[0] + 3


def test_a_while_condition_reads_thread_0s_store_after_a_barrier():
    src = _body(count_up)
    body = src[src.index("while ("):]
    assert _syncs_between(body, "while (", "if (tid == 0) A_[0]") == 1
    assert _syncs_between(body, "if (tid == 0) A_[0]", "}") == 1
    a = np.zeros(1, np.int32)
    count_up(a)
    assert a[0] == 12


@tilecraft.jit
@T.prim_func
def divergent_reader(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        A[0] = 1
        if tx < 32:
            B[tx] = A[tx]


def test_no_barrier_inside_control_flow_on_the_thread_index():
    src = _body(divergent_reader)
    assert _syncs_between(src, "if (tid == 0) A_[0] = 1;", " < 32) {") == 1
    assert "__syncthreads();" not in src[src.index(" < 32) {"):]


@tilecraft.jit
@T.prim_func
def atomic_then_read(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((64,), "int32")
        T.atomic_add(A[3], 10)
        T.copy(A[0], f)
        T.copy(f, B[0])


def test_a_block_level_atomic_is_thread_0s_and_read_after_a_barrier():
    src = _body(atomic_then_read)
    assert _line(src, "tc::atomic_add").startswith("if (tid == 0) ")
    assert _syncs_between(src, "tc::atomic_add", "load_global(A,") == 1
    a = np.zeros(64, np.int32)
    b = np.zeros(64, np.int32)
    atomic_then_read(a, b)
    assert b[3] == 10 and b.sum() == 10


@tilecraft.jit
@T.prim_func
def thread_coordinates(B: T.Tensor((128,), "int32")):
    """Three thread dimensions (at the Tilus level: tile-level kernels have one)."""
    with T.Kernel(1, threads=(32, 2, 2)):
        x = T.get_thread_binding(0)
        y = T.get_thread_binding(1)
        z = T.get_thread_binding(2)
        T.synchronize()
        B[(z * 2 + y) * 32 + x] = x + 100 * y + 10000 * z


def _tilus_source(factory) -> str:
    from tilecraft.block.from_kernel import block_program_of
    from tilecraft.codegen.block_cuda import print_cuda

    return print_cuda(block_program_of(factory.func), "sm_90a").source


def test_thread_bindings_are_the_digits_of_the_flat_thread_index():
    src = _tilus_source(thread_coordinates)
    assert "const int tx_ = tid % 32;" in src
    assert "const int ty_ = (tid / 32) % 2;" in src
    assert "const int tz_ = tid / 64;" in src
    assert not _line(src, "B_[").startswith("if")  # a store per thread
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    compile_cuda(src, "sm_90a", name="thread_coordinates_kernel", use_cache=False)


def test_an_unused_thread_binding_is_not_declared():
    assert "tx_" not in _body(atomic_then_read)


@pytest.mark.gpu
def test_gpu_thread_bindings_are_threadidx_x_y_z():
    b = torch.zeros(128, dtype=torch.int32, device="cuda")
    thread_coordinates(b)
    t = torch.arange(128)
    want = t % 32 + 100 * (t // 32 % 2) + 10000 * (t // 64)
    assert torch.equal(b.cpu(), want.to(torch.int32))


KERNELS = [rmw_and_read_back, per_thread_values, shared_scalar, read_then_overwrite, count_up,
           divergent_reader, atomic_then_read]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.func.name)
def test_block_level_kernels_compile(k, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(k.func, arch)
    compile_cuda(gen.source, arch, name=gen.name)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [rmw_and_read_back, shared_scalar, read_then_overwrite, count_up,
                               atomic_then_read], ids=lambda k: k.func.name)
def test_gpu_block_level_stores_match_the_interpreter(k):
    g = torch.Generator().manual_seed(0)
    args = []
    for p in k.func.params:
        shape = tuple(int(n) for n in p.shape)
        dtype = getattr(torch, p.dtype.name)
        if p.name == "A" and k is count_up:
            args.append(torch.zeros(shape, dtype=dtype))
        elif dtype.is_floating_point:
            args.append(torch.randn(shape, generator=g).to(dtype))
        else:
            args.append(torch.randint(-5, 5, shape, generator=g).to(dtype))
    cpu = [a.clone() for a in args]
    gpu = [a.cuda() for a in args]
    for _ in range(3):  # races show up as run-to-run differences too
        k(*cpu)
        k(*gpu)
    torch.cuda.synchronize()
    for c, g_ in zip(cpu, gpu):
        assert torch.equal(c, g_.cpu()), (k.func.name, c, g_.cpu())


def test_a_tensor_thread_0_writes_is_not_restrict_and_is_reloaded_after_the_barrier():
    """With `__restrict__`, NVRTC kept the other threads' first load of A[0] in a register across
    the barriers of `while A[0] < 10`, so they looped forever (a hang on the H100)."""
    src = generate_cuda(count_up.func, "sm_90a").source
    assert "int* A_" in src and "__restrict__ A_" not in src
    pytest.importorskip("cuda.bindings.nvrtc")
    from tests.codegen.sass import cuobjdump, sass
    from tilecraft.runtime import compile_cuda

    if cuobjdump() is None:
        pytest.skip("cuobjdump not installed")
    gen = generate_cuda(count_up.func, "sm_90a")
    lines = sass(compile_cuda(gen.source, "sm_90a", name=gen.name, use_cache=False).cubin)
    last_bar = max(i for i, ln in enumerate(lines) if "BAR.SYNC" in ln)
    loop_back = next(i for i, ln in enumerate(lines) if i > last_bar and " BRA " in ln)
    assert any("LDG" in ln for ln in lines[last_bar:loop_back]), lines


def test_tensors_no_single_thread_writes_keep_restrict():
    src = generate_cuda(read_then_overwrite.func, "sm_90a").source
    assert "__restrict__ B_" not in src  # thread 0 writes B[0] too
    src = generate_cuda(atomic_then_read.func, "sm_90a").source
    assert "int* A_" in src and "__restrict__ B_" in src  # A: thread 0's atomic; B: all threads
