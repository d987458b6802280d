"""Python semantics inside kernels: constants fold at parse time, device values become IR."""

import numpy as np
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.ir import (Allocate, BufferStore, Const, For, If, KernelLaunch, LetStmt,
                          ParallelLoop, build_ftg, verify)
from tilecraft.ir.visitor import walk


def stmts(func, cls):
    return [s for s in walk(func.body) if isinstance(s, cls)]


def test_if_on_a_python_constant_is_decided_at_parse_time():
    def make(flag):
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                if flag:
                    A[0] = 1.0
                else:
                    A[1] = 2.0

        return k

    on, off = make(True), make(False)
    assert not stmts(on, If) and not stmts(off, If)
    assert [s.indices[0].value for s in stmts(on, BufferStore)] == [0]
    assert [s.indices[0].value for s in stmts(off, BufferStore)] == [1]


def test_if_on_a_device_value_becomes_an_ir_if():
    @T.prim_func
    def k(M: T.Tensor((4,), "int32"), A: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            if M[bx]:
                A[bx] = 1.0
            else:
                A[bx] = -1.0

    assert len(stmts(k, If)) == 1
    a = torch.zeros(4)
    tilecraft.compile(k)(torch.tensor([1, 0, 0, 5], dtype=torch.int32), a)
    assert a.tolist() == [1.0, -1.0, -1.0, 1.0]


def test_local_binding_is_a_let_and_closure_values_are_constants():
    scale = 3.0

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            v = A[bx] * scale
            B[bx] = v + 1.0

    lets = stmts(k, LetStmt)
    assert len(lets) == 1 and lets[0].var.name == "v"
    a, b = torch.randn(8), torch.zeros(8)
    tilecraft.compile(k)(a, b)
    assert torch.allclose(b, a * 3 + 1)


def test_augmented_assignment_on_buffer_elements():
    @T.prim_func
    def k(A: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(16, 8):
                A[i, j] *= 2.0
                A[i, j] += i

    a = torch.randn(16, 8)
    want = a * 2 + torch.arange(16)[:, None]
    tilecraft.compile(k)(a)
    assert torch.allclose(a, want)


def test_alloc_var_is_a_mutable_scalar():
    @T.prim_func
    def k(A: T.Tensor((10,), "int32"), Out: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_var("int32")
            acc = 0
            for i in range(10):
                acc = acc + A[i]
            Out[0] = acc

    a = torch.randint(-5, 5, (10,), dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    tilecraft.compile(k)(a, out)
    assert out.item() == a.sum().item()


def test_single_grid_dimension_binds_one_name_and_default_threads():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(4) as bx:
            A[bx] = bx

    (launch,) = stmts(k, KernelLaunch)
    assert len(launch.block_vars) == 1 and launch.threads == (128,)
    a = torch.zeros(4)
    tilecraft.compile(k)(a)
    assert a.tolist() == [0, 1, 2, 3]


def test_threads_tuple_and_thread_binding():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=(32, 4)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)

    (launch,) = stmts(k, KernelLaunch)
    assert launch.threads == (32, 4) and launch.num_threads == 128


def test_loops_kinds_and_steps():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(0, 16, 4):
                A[i] = 1.0
            for i in T.unroll(2):
                A[i + 1] = 2.0
            for k in T.Pipelined(3, num_stages=2):
                A[k + 13] = 3.0

    kinds = [f.kind for f in stmts(k, For)]
    assert kinds == ["serial", "unrolled", "pipelined"]
    assert stmts(k, For)[2].pipeline.num_stages == 2
    a = torch.zeros(16)
    tilecraft.compile(k)(a)
    assert a.tolist() == [1, 2, 2, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 3, 3, 3]


def test_dynamic_dimension_takes_any_size_without_reparsing():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m, 4), "float32"), B: T.Tensor((m, 4), "float32")):
        with T.Kernel(T.ceildiv(m, 8), threads=32) as bx:
            for i, j in T.Parallel(8, 4):
                if bx * 8 + i < m:
                    B[bx * 8 + i, j] = A[bx * 8 + i, j] + 1.0

    kernel = tilecraft.compile(k)
    for n in (5, 19):
        a, b = torch.randn(n, 4), torch.zeros(n, 4)
        kernel(a, b)
        assert torch.allclose(b, a + 1)


def test_printer_reads_like_the_source_and_verifier_accepts():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((32, 64), "float16")
            F = T.alloc_fragment((32, 64), "float32")
            T.copy(A[bx * 32:(bx + 1) * 32, :], S)
            T.copy(S, F)
            for i, j in T.Parallel(32, 64):
                F[i, j] = T.exp2(F[i, j])
            T.copy(F, B[bx * 32, 0])

    verify(k)
    text = k.script()
    assert "T.copy(A[bx * 32:bx * 32 + 32, 0:64], S)" in text
    assert "for i, j in T.Parallel(32, 64):" in text
    assert "F[i, j] = T.exp2(F[i, j])" in text
    assert len(stmts(k, Allocate)) == 2 and len(stmts(k, ParallelLoop)) == 1
    g = build_ftg(k)
    assert [n.kind for n in g.nodes] == ["copy", "copy", "parallel", "copy"]
    assert {b.name for comp in g.components() for b in comp} == {"S", "F"}


def test_constant_expressions_fold():
    @T.prim_func
    def k(A: T.Tensor((10,), "float32")):
        with T.Kernel(T.ceildiv(10, 4), threads=32) as bx:
            A[T.min(9, 3 * 4)] = 1.0

    (launch,) = stmts(k, KernelLaunch)
    assert launch.grid == (Const.create(3),)
    (store,) = stmts(k, BufferStore)
    assert store.indices == (Const.create(9),)


def test_interpreter_reads_zero_outside_and_drops_stores_outside():
    @T.prim_func
    def k(A: T.Tensor((10,), "float32"), B: T.Tensor((10,), "float32")):
        with T.Kernel(3, threads=32) as bx:
            S = T.alloc_shared((4,), "float32")
            T.copy(A[bx * 4], S)
            for i in T.Parallel(4):
                S[i] = S[i] + 1.0
            T.copy(S, B[bx * 4])

    a, b = torch.randn(10), torch.zeros(10)
    tilecraft.compile(k)(a, b)
    assert torch.allclose(b, a + 1)


def test_stores_round_like_the_gpu():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float16"),
          C: T.Tensor((4,), "bfloat16")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(4):
                B[i] = A[i]
                C[i] = A[i]

    a = torch.tensor([1.0001, 3.14159265, -65504.9, 1e-8])
    b, c = torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.bfloat16)
    tilecraft.compile(k)(a, b, c)
    assert torch.equal(b, a.half()) and torch.equal(c, a.bfloat16())


def test_print_runs_on_the_interpreter(capsys):
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            F = T.alloc_fragment((4,), "float32")
            T.copy(A, F)
            T.print(F, msg="tile")

    tilecraft.compile(k)(torch.arange(4, dtype=torch.float32))
    out = capsys.readouterr().out
    assert "tile" in out and "3." in out


def test_numpy_arrays_work_on_the_interpreter():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(4):
                A[i] = A[i] * 2.0

    a = np.arange(4, dtype=np.float32)
    tilecraft.compile(k)(a)
    assert a.tolist() == [0, 2, 4, 6]
