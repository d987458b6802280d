"""A name rebound inside a device `if`, loop or `while` keeps its new value (a mutable local);
what cannot be honoured (a new dtype, per-element values in T.Parallel) is a located error.

Kernels run on the interpreter against numpy, and their CUDA source compiles through NVRTC."""


import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError
from tests.frontend.helpers import compiles, err_line, run


def raises(build, code) -> TilecraftError:
    with pytest.raises(TilecraftError) as info:
        build()
    assert info.value.code == code, info.value
    assert info.value.file == __file__
    return info.value


# ---- what works -----------------------------------------------------------------------------

def branch_rebind():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            v = A[bx] * 2
            if A[bx] > 0:
                v = A[bx] * 100
            B[bx] = v

    return k


def test_a_name_rebound_in_a_device_if_keeps_the_new_value():
    a = torch.tensor([1.0, -1.0, 2.0, -2.0, 0.5, 0.0, -3.0, 4.0])
    (_, b) = run(branch_rebind(), a, torch.zeros(8))
    want = np.where(a.numpy() > 0, a.numpy() * 100, a.numpy() * 2)
    np.testing.assert_allclose(b.numpy(), want)
    compiles(branch_rebind())


def serial_sum():
    @T.prim_func
    def k(A: T.Tensor((4, 6), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            x = 0.0
            for j in T.serial(6):
                x = x + A[bx, j]
            B[bx] = x

    return k


def test_a_python_number_accumulates_device_values_in_a_serial_loop():
    a = torch.randn(4, 6)
    (_, b) = run(serial_sum(), a, torch.zeros(4))
    np.testing.assert_allclose(b.numpy(), a.numpy().sum(1), rtol=1e-5, atol=1e-6)
    src = compiles(serial_sum())
    assert "float x_ = " in src  # one register, updated by the loop


def count_and_max():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), C: T.Tensor((2,), "int32"),
          M: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            count = 0
            m = T.cast(A[0], "float16")
            for i in range(16):
                if A[i] > 0:
                    count += 1
                    m = T.max(m, T.cast(A[i], "float16"))
            C[0] = count
            C[1] = count * 2
            M[0] = m

    return k


def test_augmented_assignment_counts_and_max_in_loops_and_branches():
    a = torch.randn(16)
    _, c, m = run(count_and_max(), a, torch.zeros(2, dtype=torch.int32),
                  torch.zeros(1, dtype=torch.float16))
    pos = a.numpy()[a.numpy() > 0]
    assert c.tolist() == [len(pos), 2 * len(pos)]
    assert m.item() == np.float16(max([a[0].item(), *pos]))
    compiles(count_and_max())


def test_a_name_first_bound_in_both_branches_is_defined_after_the_if():
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(8, threads=32) as bx:
            if A[bx] % 2 == 0:
                v = A[bx] // 2
            else:
                v = 3 * A[bx] + 1
            B[bx] = v

    a = torch.arange(-4, 4, dtype=torch.int32)
    _, b = run(k, a, torch.zeros(8, dtype=torch.int32))
    assert b.tolist() == [x // 2 if x % 2 == 0 else 3 * x + 1 for x in a.tolist()]
    compiles(k)


def while_counter():
    @T.prim_func
    def k(A: T.Tensor((1,), "int32"), n: T.int32):
        with T.Kernel(1, threads=32) as bx:
            i = 0
            total = 0
            while i < n:
                total = total + i * i
                i = i + 1
            A[0] = total

    return k


def test_while_loop_updates_its_counter():
    (a,) = run(while_counter(), torch.zeros(1, dtype=torch.int32), 7)[:1]
    assert a.item() == sum(i * i for i in range(7))
    compiles(while_counter())


def test_tuple_assignment_reads_every_value_before_storing():
    @T.prim_func
    def k(F: T.Tensor((1,), "int64")):
        with T.Kernel(1, threads=32) as bx:
            a = T.cast(0, "int64")
            b = T.cast(1, "int64")
            for _ in T.serial(20):
                a, b = b, a + b
            F[0] = a

    (f,) = run(k, torch.zeros(1, dtype=torch.int64))
    assert f.item() == 6765
    compiles(k)


def test_copy_of_a_mutable_local_keeps_the_value_of_its_time():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            x = 0.0
            first = x
            for j in T.serial(4):
                x = x + A[j]
                if j == 0:
                    first = x
            B[0] = first
            B[1] = x

    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    _, b = run(k, a, torch.zeros(2))
    assert b.tolist() == [1.0, 10.0]


def test_a_python_loop_inside_a_device_loop_may_reuse_a_name():
    @T.prim_func
    def k(A: T.Tensor((2, 4), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for h in [0, 1]:
                A[h, 0] = 1.0
            for j in T.serial(3):
                for h, w in [(0, 1.0), (1, 2.0)]:
                    A[h, j + 1] = w

    (a,) = run(k, torch.zeros(2, 4))
    assert a.tolist() == [[1, 1, 1, 1], [1, 2, 2, 2]]


def test_binding_a_name_to_a_var_copies_its_value():
    @T.prim_func
    def k(A: T.Tensor((1,), "int32"), B: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            x = T.alloc_var("int32")
            x = A[0]
            y = x
            y = y + 10  # a new value for y; x keeps its own
            x = x + 1
            B[0] = y
            B[1] = x

    _, b = run(k, torch.tensor([5], dtype=torch.int32), torch.zeros(2, dtype=torch.int32))
    assert b.tolist() == [15, 6]


def test_straight_line_rebinding_may_change_the_dtype():
    @T.prim_func
    def k(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            v = A[bx]
            for _ in T.serial(2):
                v = v * 2
            v = T.cast(v, "float32") + 0.25  # a new float32 value for the rest of the block
            v = v * 4
            B[bx] = v

    a = torch.tensor([1.5, -2.0, 0.125, 3.0], dtype=torch.float16)
    _, b = run(k, a, torch.zeros(4))
    np.testing.assert_allclose(b.numpy(), (a.float().numpy() * 4 + 0.25) * 4)
    compiles(k)


def test_widening_stores_keep_the_first_values_type():
    @T.prim_func
    def k(A: T.Tensor((4,), "float16"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            acc = 0.0
            for j in T.serial(4):
                acc = A[j]  # float16 into the float32 local: exact
            B[0] = acc

    _, b = run(k, torch.tensor([1, 2, 3, 0.5], dtype=torch.float16), torch.zeros(1))
    assert b.item() == 0.5


def pipelined_counter():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"),
          C: T.Tensor((128, 128), "float32"), S: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            steps = 0
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[0, ko * 32], As)
                T.copy(B[ko * 32, 0], Bs)
                T.gemm(As, Bs, acc)
                steps = steps + 1
            T.copy(acc, C[0, 0])
            S[0] = steps

    return k


def test_mutable_local_in_a_pipelined_gemm_loop_compiles():
    a, b = torch.randn(128, 128).half(), torch.randn(128, 128).half()
    _, _, c, s = run(pipelined_counter(), a, b, torch.zeros(128, 128),
                     torch.zeros(1, dtype=torch.int32))
    assert s.item() == 4
    np.testing.assert_allclose(c.numpy(), a.float().numpy() @ b.float().numpy(), rtol=1e-3,
                               atol=1e-3)
    compiles(pipelined_counter())


def _gpu_inputs(name):
    g = torch.Generator().manual_seed(0)
    return {
        "branch_rebind": lambda: [torch.randn(8, generator=g), torch.full((8,), 7.0)],
        "serial_sum": lambda: [torch.randn(4, 6, generator=g), torch.full((4,), 7.0)],
        "count_and_max": lambda: [torch.randn(16, generator=g),
                                  torch.full((2,), 7, dtype=torch.int32),
                                  torch.full((1,), 7, dtype=torch.float16)],
        "while_counter": lambda: [torch.full((1,), 7, dtype=torch.int32), 9],
        "pipelined_counter": lambda: [torch.randn(128, 128, generator=g).half(),
                                      torch.randn(128, 128, generator=g).half(),
                                      torch.full((128, 128), 7.0),
                                      torch.full((1,), 7, dtype=torch.int32)],
    }[name]()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["branch_rebind", "serial_sum", "count_and_max",
                                  "while_counter", "pipelined_counter"])
def test_mutable_locals_on_the_gpu_match_the_interpreter(name):
    func = globals()[name]()
    cpu = _gpu_inputs(name)
    gpu = [x.cuda() if isinstance(x, torch.Tensor) else x for x in cpu]
    tilecraft.compile(func, target="interp")(*cpu)
    tilecraft.compile(func, target="cuda")(*gpu)
    for c, d in zip(cpu, gpu):
        if isinstance(c, torch.Tensor):
            torch.testing.assert_close(d.cpu(), c, rtol=1e-3, atol=1e-3)


# ---- what is refused, at the user's line ------------------------------------------------------

def test_a_new_dtype_inside_a_loop_is_tc115():
    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                x = 0
                for j in T.serial(4):
                    x = x + A[j]  # ERR
                B[0] = x

    e = raises(build, "TC115")
    assert e.line == err_line(build)
    assert "int32" in e.message and "float32" in e.message
    assert "`x = 0.0`" in e.hint and f"line {err_line(build) - 2}" in e.message


def test_rebinding_a_name_bound_outside_a_parallel_loop_is_tc116():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                total = 0.0
                for i in T.Parallel(64):
                    total = total + A[i]  # ERR
                B[0] = total

    e = raises(build, "TC116")
    assert e.line == err_line(build)
    assert "T.Parallel" in e.message and "reduce_sum" in e.hint


def test_accumulating_in_a_serial_loop_inside_parallel_is_tc116():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64, 8), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    s = 0.0
                    for j in T.serial(8):
                        s = s + A[i, j]  # ERR
                    B[i] = s

    assert raises(build, "TC116").line == err_line(build)


@pytest.mark.parametrize("alloc", ["var", "local", "fragment", "shared"])
def test_an_allocation_inside_a_parallel_body_is_tc121(alloc):
    """The interpreter gave every element the last element's `T.alloc_var(init=A[i])` (31 for
    all 64), the GPU each element its own: one buffer in a per-element body is refused."""
    make = {"var": lambda: T.alloc_var("float32", init=0.0),
            "local": lambda: T.alloc_local((1,), "float32"),
            "fragment": lambda: T.alloc_fragment((1,), "float32"),
            "shared": lambda: T.alloc_shared((1,), "float32")}[alloc]

    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    v = make()  # ERR
                    B[i] = A[i]

    e = raises(build, "TC121")
    assert e.line == err_line(build) and "`v`" in e.message and "before the T.Parallel" in e.hint


def test_an_allocation_beside_a_parallel_loop_is_fine():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i]
            v = T.alloc_var("float32", init=A[3])
            B[0] = v

    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    run(k, a, b)
    assert b[0] == 3 and b[5] == 5


def test_per_element_if_else_definitions_in_parallel_suggest_if_then_else():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    if A[i] > 0:
                        v = A[i]
                    else:
                        v = -A[i]
                    B[i] = v  # ERR

    e = raises(build, "TC116")
    assert e.line == err_line(build) and "T.if_then_else" in e.hint


def test_a_var_stored_inside_parallel_is_tc116():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                x = T.alloc_var("float32")
                for i in T.Parallel(64):
                    x = A[i]  # ERR
                    A[i] = x + 1

    assert raises(build, "TC116").line == err_line(build)


def test_rebinding_a_buffer_name_in_a_device_if_is_tc116():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                src = A
                if A[0] > 0:
                    src = B  # ERR
                T.copy(src[0:64], B[0:64])

    e = raises(build, "TC116")
    assert e.line == err_line(build) and "buffer `A`" in e.message


def test_branches_binding_different_dtypes_is_tc115():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float16"), B: T.Tensor((8,), "float32")):
            with T.Kernel(8, threads=32) as bx:
                if A[bx] > 0:
                    v = A[bx]
                else:
                    v = T.cast(A[bx], "float32") * 2  # ERR
                B[bx] = v

    assert raises(build, "TC115").line == err_line(build)
