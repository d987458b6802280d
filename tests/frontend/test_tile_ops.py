"""Tile-op semantics on the interpreter: reductions, cumsum, atomics, fill, asserts."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError

SURFACE = """prim_func Tensor Buffer Kernel get_thread_binding dynamic symbolic ceildiv min max
if_then_else infinity cast alloc_shared alloc_fragment alloc_local alloc_var copy gemm reduce_sum
reduce_max reduce_min reduce_abssum reduce_absmax cumsum fill clear atomic_add atomic_max atomic_min
Parallel Pipelined serial unroll vectorized use_swizzle annotate_layout exp exp2 log log2 sqrt rsqrt
tanh sigmoid abs pow floor ceil print device_assert call_extern GemmWarpPolicy""".split()


def test_the_language_surface_is_complete_and_documented():
    for name in SURFACE:
        obj = getattr(T, name)
        assert obj.__doc__, f"T.{name} has no docstring"
    assert T.layout.make_swizzled_layout is not None


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions_match_torch(kind, dim):
    M, N = 16, 24
    out_shape = (N,) if dim == 0 else (M,)

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), R: T.Tensor(out_shape, "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((M, N), "float32")
            O = T.alloc_fragment(out_shape, "float32")
            T.copy(A, F)
            getattr(T, f"reduce_{kind}")(F, O, dim=dim)
            T.copy(O, R)

    a = torch.randn(M, N)
    r = torch.full(out_shape, float("nan"))
    tilecraft.compile(k)(a, r)
    ref = {"sum": a.sum(dim), "max": a.amax(dim), "min": a.amin(dim), "abssum": a.abs().sum(dim),
           "absmax": a.abs().amax(dim)}[kind]
    assert torch.allclose(r, ref, atol=1e-5)


def test_reduce_without_clear_combines_with_the_old_value():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32"), R: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((8, 8), "float32")
            O = T.alloc_fragment((8,), "float32")
            T.copy(A, F)
            T.fill(O, 100.0)
            T.reduce_sum(F, O, dim=1, clear=False)
            T.copy(O, R)

    a, r = torch.randn(8, 8), torch.zeros(8)
    tilecraft.compile(k)(a, r)
    assert torch.allclose(r, a.sum(1) + 100)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(reverse):
    @T.prim_func
    def k(A: T.Tensor((4, 16), "float32"), R: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((4, 16), "float32")
            T.copy(A, S)
            T.cumsum(S, dim=1, reverse=reverse)
            T.copy(S, R)

    a, r = torch.randn(4, 16), torch.zeros(4, 16)
    tilecraft.compile(k)(a, r)
    ref = a.flip(1).cumsum(1).flip(1) if reverse else a.cumsum(1)
    assert torch.allclose(r, ref, atol=1e-5)


def test_atomic_add_accumulates_across_blocks():
    @T.prim_func
    def k(A: T.Tensor((8, 16), "float32"), R: T.Tensor((16,), "float32"),
          Mx: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            F = T.alloc_fragment((16,), "float32")
            T.copy(A[bx, :], F)
            T.atomic_add(R, F)
            T.atomic_max(Mx[0], A[bx, 3])

    a, r, mx = torch.randn(8, 16), torch.zeros(16), torch.full((1,), -1e9)
    tilecraft.compile(k)(a, r, mx)
    assert torch.allclose(r, a.sum(0), atol=1e-5) and mx.item() == a[:, 3].max().item()


def test_device_assert_fails_with_the_line():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.device_assert(A[0] > 0, "A[0] must be positive")

    kernel = tilecraft.compile(k)
    kernel(torch.ones(4))
    with pytest.raises(TilecraftError, match="must be positive"):
        kernel(-torch.ones(4))


def test_out_of_bounds_element_access_is_an_error_on_the_interpreter():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(4):
                A[bx * 4 + i] = 1.0

    with pytest.raises(TilecraftError) as info:
        tilecraft.compile(k)(torch.zeros(4))
    assert info.value.code == "TC401" and "block (1,)" in info.value.message


def test_jit_factory_caches_per_argument_set():
    calls = []

    @tilecraft.jit(out_idx=[-1])
    def scale(n, factor):
        calls.append(n)

        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * factor

        return k

    k1, k2, k3 = scale(8, 2.0), scale(8, 2.0), scale(8, 3.0)
    assert k1 is k2 and k1 is not k3 and calls == [8, 8]
    a = torch.randn(8)
    assert torch.allclose(k3(a), a * 3)


def test_interpret_env_forces_the_interpreter(monkeypatch):
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(4):
                A[i] = 5.0

    monkeypatch.setenv("TILECRAFT_INTERPRET", "1")
    kernel = tilecraft.compile(k, target="cuda")
    a = torch.zeros(4)
    kernel(a)
    assert a.tolist() == [5.0] * 4
