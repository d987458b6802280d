"""Plain Python inside a kernel: taken with its meaning, or refused at the user's line.

`**`, `@`, built-ins (abs, min, max, pow, round, int, float, print), `math.*`, `assert`,
`break`/`continue`, integer constants that must fit the value beside them, and float indices.
Kernels run on the interpreter against numpy; the CUDA source compiles through NVRTC."""

import math

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError
from tests.frontend.helpers import compiles, err_line, run


def refused(build, code) -> TilecraftError:
    """`build()` raises `code` at its `# ERR` line, in this file."""
    with pytest.raises(TilecraftError) as info:
        build()
    e = info.value
    assert (e.code, e.file, e.line) == (code, __file__, err_line(build)), e
    return e


# ---- math on device values ------------------------------------------------------------------

def math_kernel():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8, 10), "float32"),
          I: T.Tensor((8,), "int32"), J: T.Tensor((8, 4), "int32")):
        with T.Kernel(8, threads=32) as bx:
            x = A[bx]
            B[bx, 0] = math.sqrt(abs(x))
            B[bx, 1] = math.exp(x) + math.log(abs(x) + 1)
            B[bx, 2] = x ** 2 + x ** 3
            B[bx, 3] = abs(x) ** 0.5
            B[bx, 4] = pow(abs(x), 1.5)
            B[bx, 5] = round(x * 3)
            B[bx, 6] = min(x, 0.5) + max(x, -0.5, 0.25)
            B[bx, 7] = 2 ** 3 + 2.0 ** -1
            B[bx, 8] = math.floor(x) + math.ceil(x) + float(I[bx])
            B[bx, 9] = math.log(abs(x) + 1, 2)
            J[bx, 0] = I[bx] ** 3
            J[bx, 1] = I[bx] ** 0
            J[bx, 2] = abs(I[bx]) + max(I[bx], 2)
            J[bx, 3] = int(x)

    return k


def test_builtins_math_and_power_on_device_values_match_numpy():
    a = torch.tensor([-2.6, -1.5, -0.5, 0.0, 0.4, 0.5, 2.5, 3.7])
    i = torch.arange(-4, 4, dtype=torch.int32)
    _, b, _, j = run(math_kernel(), a, torch.zeros(8, 10), i, torch.zeros(8, 4, dtype=torch.int32))
    x, n = a.numpy().astype(np.float64), i.numpy().astype(np.int64)
    want = np.stack([np.sqrt(abs(x)), np.exp(x) + np.log(abs(x) + 1), x**2 + x**3, abs(x)**0.5,
                     abs(x)**1.5, np.rint(x * 3), np.minimum(x, 0.5) + np.maximum(x, 0.25),
                     np.full(8, 8.5), np.floor(x) + np.ceil(x) + n, np.log2(abs(x) + 1)], 1)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-5, atol=1e-5)
    assert j.numpy().tolist() == np.stack([n**3, n**0, abs(n) + np.maximum(n, 2),
                                           np.trunc(x).astype(int)], 1).tolist()
    src = compiles(math_kernel())
    assert "powf" not in src.split("B_[")[3]  # x ** 2 + x ** 3 multiply


def test_min_max_and_sum_of_a_list_of_device_values():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = max([A[1], A[2], 0.5]) + sum([A[3], A[4]]) + min((A[5], A[6]))

    (a,) = run(k, torch.arange(8.0))
    assert a[0].item() == 2 + 3 + 4 + 5


def test_len_of_a_buffer_names_its_shape():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[0] = len(A)  # ERR

    assert "shape" in refused(build, "TC117").hint


def test_power_on_python_values_is_computed_at_build_time():
    @T.prim_func
    def k(B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            B[0] = 2 ** 3
            B[1] = 3 ** 2 ** 0.5

    (b,) = run(k, torch.zeros(2))
    assert b.tolist() == pytest.approx([8.0, 3 ** 2 ** 0.5])


def test_print_of_a_device_value_names_t_print():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(8, threads=32) as bx:
                print(A[bx])  # ERR

    assert "T.print" in refused(build, "TC117").hint


def test_math_function_without_a_t_equivalent_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(8, threads=32) as bx:
                A[bx] = math.atan2(A[bx], 1.0)  # ERR

    e = refused(build, "TC117")
    assert "math.atan2" in e.message and "T.call_extern" in e.hint


def test_integer_to_a_device_power_is_refused_with_the_float_form():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            with T.Kernel(8, threads=32) as bx:
                A[bx] = 2 ** A[bx]  # ERR

    assert "1 << k" in refused(build, "TC117").hint


def test_matmul_operator_on_buffers_names_t_gemm():
    def build():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=128) as bx:
                As = T.alloc_shared((16, 16), "float16")
                T.copy(A[0, 0], As)
                C[0, 0] = As @ As  # ERR

    assert "T.gemm" in refused(build, "TC117").hint


def test_matmul_operator_on_python_values_runs_in_python():
    w = np.array([[1.0, 2.0], [3.0, 4.0]])

    @T.prim_func
    def k(B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            B[0] = float((w @ w)[1, 1])

    (b,) = run(k, torch.zeros(1))
    assert b.item() == 22.0


def test_assert_on_a_mutable_local_is_a_device_assert_at_its_line():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            with T.Kernel(8, threads=32) as bx:
                x = T.alloc_var("int32")
                x = A[bx]
                assert x, "zero input"  # ERR

        return k

    run(make(), torch.ones(8, dtype=torch.int32))
    with pytest.raises(TilecraftError) as info:
        run(make(), torch.tensor([1, 2, 3, 0, 5, 6, 7, 8], dtype=torch.int32))
    assert info.value.code == "TC402" and info.value.line == err_line(make)
    compiles(make())


# ---- break and continue ---------------------------------------------------------------------

def test_break_and_continue_in_a_python_loop_shape_the_unrolling():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in [0, 1, 2, 3, 4, 5, 6, 7]:
                if i == 5:
                    break
                if i % 2 == 1:
                    continue
                A[i] = 1.0

    (a,) = run(k, torch.zeros(8))
    assert a.tolist() == [1, 0, 1, 0, 1, 0, 0, 0]


def test_break_under_a_device_if_in_a_serial_loop():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            n = 0
            for i in T.serial(8):
                if A[i] < 0:
                    break
                n = n + 1
            B[0] = n

    _, b = run(k, torch.tensor([1.0, 2, 3, -1, 5, 6, 7, 8]), torch.zeros(1, dtype=torch.int32))
    assert b.item() == 3
    compiles(k)


def test_break_inside_parallel_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    if A[i] < 0:
                        break  # ERR
                    A[i] = 1.0

    assert "T.Parallel" in refused(build, "TC103").message


def test_break_inside_pipelined_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for k in T.Pipelined(4, num_stages=2):
                    if A[k] < 0:
                        break  # ERR

    assert "T.Pipelined" in refused(build, "TC103").message


def test_break_under_a_device_if_in_a_python_loop_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in range(4) if False else [0, 1, 2, 3]:
                    if A[i] < 0:
                        break  # ERR
                    A[i] = 1.0

    assert "T.serial" in refused(build, "TC103").hint


def test_continue_in_a_device_loop_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.serial(4):
                    if A[i] < 0:
                        continue  # ERR
                    A[i] = 1.0

    assert "`if`" in refused(build, "TC103").hint


# ---- integer constants and indices ------------------------------------------------------------

def test_a_constant_outside_the_operands_type_is_tc118():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "int8")):
            with T.Kernel(8, threads=32) as bx:
                A[bx] = A[bx] + 200  # ERR

    e = refused(build, "TC118")
    assert "200" in e.message and "int8" in e.message and 'T.cast(x, "int32")' in e.hint


def test_a_negative_constant_with_an_unsigned_value_is_tc118():
    def build():
        @T.prim_func
        def k(U: T.Tensor((8,), "uint8")):
            with T.Kernel(8, threads=32) as bx:
                U[bx] = U[bx] - (-1)  # ERR

    refused(build, "TC118")


def wrapping_constants():
    @T.prim_func
    def k(U: T.Tensor((4,), "uint8"), X: T.Tensor((4,), "int8"), W: T.Tensor((4, 2), "int32")):
        with T.Kernel(4, threads=32) as bx:
            U[bx] = U[bx] - 15
            X[bx] = X[bx] + 100
            W[bx, 0] = T.cast(X[bx], "int32") + 200
            W[bx, 1] = T.cast(300, "int8")  # an explicit conversion wraps, as in C

    return k


def _wrapping_inputs():
    return [torch.tensor([0, 10, 15, 255], dtype=torch.uint8),
            torch.tensor([-128, 0, 27, 100], dtype=torch.int8),
            torch.zeros(4, 2, dtype=torch.int32)]


def test_a_constant_that_fits_takes_the_type_and_wraps():
    u, x, w = _wrapping_inputs()
    u0, x0 = u.clone(), x.clone()
    run(wrapping_constants(), u, x, w)
    assert u.tolist() == [(v - 15) % 256 for v in u0.tolist()]
    assert x.tolist() == [(v + 100 + 128) % 256 - 128 for v in x0.tolist()]
    assert w[:, 0].tolist() == [v + 200 for v in x.tolist()] and w[:, 1].tolist() == [44] * 4
    compiles(wrapping_constants())


BIG = 3_000_000_000


def big_constant():
    @T.prim_func
    def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int64")):
        with T.Kernel(4, threads=32) as bx:
            B[bx] = A[bx] + BIG

    return k


def _big_inputs():
    return [torch.tensor([-5, 0, 7, 2**31 - 1], dtype=torch.int32),
            torch.zeros(4, dtype=torch.int64)]


def test_a_big_constant_with_an_int32_value_computes_in_int64():
    _, b = run(big_constant(), *_big_inputs())
    assert b.tolist() == [BIG - 5, BIG, BIG + 7, BIG + 2**31 - 1]
    compiles(big_constant())


@pytest.mark.gpu
@pytest.mark.parametrize("factory, inputs", [(wrapping_constants, _wrapping_inputs),
                                             (big_constant, _big_inputs)])
def test_constants_mean_the_same_on_the_gpu(factory, inputs):
    cpu = inputs()
    gpu = [x.cuda() for x in cpu]
    tilecraft.compile(factory(), target="interp")(*cpu)
    tilecraft.compile(factory(), target="cuda")(*gpu)
    for c, d in zip(cpu, gpu):
        assert torch.equal(d.cpu(), c)


def test_a_float_index_is_tc119_at_the_subscript():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(8, threads=32) as bx:
                B[bx] = A[bx * 0.5]  # ERR

    e = refused(build, "TC119")
    assert "`A`" in e.message and "float32" in e.message and "T.cast" in e.hint


def test_a_python_float_index_is_tc119():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[1.0] = 2.0  # ERR

    refused(build, "TC119")


def test_python_arithmetic_errors_are_located():
    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[0] = 1 // 0  # ERR

    assert "division" in refused(build, "TC108").message
