"""A Tilus register tensor in tile-level statements: T.copy from and into it, T.gemm accumulating
into it, T.reduce_* and T.fill on it, and reads and writes in T.Parallel. In a tile-level
statement a register tensor is a fragment whose layout is the tensor's (strict for inference,
the mirror of T.alloc_fragment(layout=)), and lowering uses that same register tensor. Each
kernel runs on the block VM (the lowered program) against torch and compiles through NVRTC
for sm_90a and sm_80; the same kernels run on the GPU under `-m gpu`."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import spatial
from tilecraft.passes.layout_inference.rules_gemm import a_layout, c_layout
from tilecraft.runtime import compile_cuda

TILE = spatial(16, 8).local(4, 8)  # a [64, 64] register tile on 128 threads
F16, F32 = "float16", "float32"


@T.prim_func
def copy_to_global(A: T.Tensor((64, 64), F16), B: T.Tensor((64, 64), F32)):
    with T.Kernel(1, threads=128) as bx:
        r = T.load_global(A, layout=TILE)
        T.copy(r * 2, B[0, 0])  # (with the f16 -> f32 cast a copy does)


@T.prim_func
def copy_through_shared(A: T.Tensor((64, 64), F16), B: T.Tensor((64, 64), F16)):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), F16)
        r = T.load_global(A, layout=TILE)
        T.copy(r + 1, S)
        T.copy(S, B[0, 0])


@T.prim_func
def copy_into_register(A: T.Tensor((64, 64), F16), B: T.Tensor((64, 64), F16)):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), F16)
        T.copy(A[0, 0], S)
        r = T.allocate_register(F16, layout=TILE)
        T.copy(S, r)  # shared -> the register tensor, in its layout
        T.store_global(r * 3, B)


@T.prim_func
def parallel_read_write(A: T.Tensor((64, 64), F16), B: T.Tensor((64, 64), F16)):
    with T.Kernel(1, threads=128) as bx:
        r = T.load_global(A, layout=TILE)
        f = T.alloc_fragment((64, 64), F16)
        for i, j in T.Parallel(64, 64):
            f[i, j] = r[i, j] * 2
        for i, j in T.Parallel(64, 64):
            r[i, j] = f[i, j] + r[i, j]
        T.store_global(r, B)


@T.prim_func
def reduce_max_rows(A: T.Tensor((64, 64), F32), B: T.Tensor((64,), F32),
                    C: T.Tensor((64,), F32)):
    with T.Kernel(1, threads=128) as bx:
        r = T.load_global(A, layout=TILE)
        m = T.alloc_fragment((64,), F32)
        T.reduce_max(r, m, dim=1)  # into a fragment: its layout is r's reduced
        T.copy(m, B[0])
        s = T.allocate_register(F32, layout=TILE.reduce(1, keepdim=False))
        T.reduce_sum(r, s, dim=1)  # into a register tensor
        T.store_global(s, C)


@T.prim_func
def fill_register(B: T.Tensor((64, 64), F32)):
    with T.Kernel(1, threads=128) as bx:
        r = T.allocate_register(F32, layout=TILE)
        T.fill(r, 3.0)
        T.store_global(r + 1, B)


@T.prim_func
def atomic_add_tile(A: T.Tensor((64, 64), F32), C: T.Tensor((64, 64), F32)):
    with T.Kernel(2, threads=128) as bx:  # both blocks add into C
        r = T.load_global(A, layout=TILE)
        T.atomic_add(C[0, 0], r)


@T.prim_func
def register_a_operand(A: T.Tensor((64, 32), F16), B: T.Tensor((32, 64), F16),
                       C: T.Tensor((64, 64), F32)):
    with T.Kernel(1, threads=128) as bx:
        B_s = T.alloc_shared((32, 64), F16)
        a = T.load_global(A, layout=a_layout(64, 32, 4))  # the mma A layout of 4 warps on M
        acc = T.alloc_fragment((64, 64), F32)
        T.copy(B[0, 0], B_s)
        T.gemm(a, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
        T.copy(acc, C[0, 0])


def _gemm(layout, policy):
    @T.prim_func
    def gemm_into_register(A: T.Tensor((64, 128), F16), B: T.Tensor((128, 64), F16),
                           C: T.Tensor((64, 64), F16)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), F16)
            B_s = T.alloc_shared((32, 64), F16)
            acc = T.allocate_register(F32, layout=layout, init=0.0)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, acc, policy=policy)
            T.store_global(T.cast(acc, F16), C)  # the Tilus-level epilogue

    return gemm_into_register


# the declared layout picks the warp partition, whatever the policy says
GEMMS = {"full_row": _gemm(c_layout(64, 64, 4, 1), T.GemmWarpPolicy.FullRow),
         "full_col_declared_under_full_row": _gemm(c_layout(64, 64, 1, 4),
                                                   T.GemmWarpPolicy.FullRow),
         "square": _gemm(c_layout(64, 64, 2, 2), T.GemmWarpPolicy.Square),
         "two_copies": _gemm(c_layout(64, 64, 2, 1, 2), T.GemmWarpPolicy.Square)}


def _rand(*shape, dtype=torch.float16):
    return torch.randn(*shape, generator=_GEN).to(dtype)


_GEN = torch.Generator().manual_seed(7)


def _poison(*shape, dtype=torch.float16):
    return torch.full(shape, float("nan"), dtype=dtype)


def _case(name):
    """(kernel, inputs, expected outputs by argument index)."""
    if name in GEMMS:
        a, b = _rand(64, 128), _rand(128, 64)
        want = (a.double() @ b.double()).float()
        return GEMMS[name], [a, b, _poison(64, 64)], {2: want}
    if name == "atomic_add_tile":
        a, c = _rand(64, 64, dtype=torch.float32), _rand(64, 64, dtype=torch.float32)
        return atomic_add_tile, [a, c], {1: c + 2 * a}
    if name == "register_a_operand":
        a, b = _rand(64, 32), _rand(32, 64)
        return (register_a_operand, [a, b, _poison(64, 64, dtype=torch.float32)],
                {2: (a.double() @ b.double()).float()})
    if name == "copy_to_global":
        a = _rand(64, 64)
        return copy_to_global, [a, _poison(64, 64, dtype=torch.float32)], {1: (a * 2).float()}
    if name == "copy_through_shared":
        a = _rand(64, 64)
        return copy_through_shared, [a, _poison(64, 64)], {1: a + 1}
    if name == "copy_into_register":
        a = _rand(64, 64)
        return copy_into_register, [a, _poison(64, 64)], {1: a * 3}
    if name == "parallel_read_write":
        a = _rand(64, 64)
        return parallel_read_write, [a, _poison(64, 64)], {1: a * 2 + a}
    if name == "reduce_max_rows":
        a = _rand(64, 64, dtype=torch.float32)
        return (reduce_max_rows, [a, _poison(64, dtype=torch.float32),
                                  _poison(64, dtype=torch.float32)],
                {1: a.amax(dim=1), 2: a.double().sum(dim=1).float()})
    assert name == "fill_register"
    return fill_register, [_poison(64, 64, dtype=torch.float32)], {0: torch.full((64, 64), 4.0)}


CASES = ["copy_to_global", "copy_through_shared", "copy_into_register", "parallel_read_write",
         "reduce_max_rows", "fill_register", "atomic_add_tile",
         "register_a_operand", *GEMMS]


def _check(args, want):
    for i, w in want.items():
        torch.testing.assert_close(args[i].cpu().float(), w.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", CASES)
def test_a_register_tensor_in_tile_ops_on_the_vm(name):
    func, args, want = _case(name)
    tilecraft.jit(func)(*args)  # CPU tensors: the lowered program on the block VM
    _check(args, want)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_register_tensor_in_tile_ops_compiles(name, arch):
    func = _case(name)[0]
    gen = generate_cuda(func, arch)
    assert compile_cuda(gen.source, arch, name=gen.name).resources.spill_stores == 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_a_register_tensor_in_tile_ops_on_the_gpu(name):
    func, args, want = _case(name)
    args = [a.cuda() for a in args]
    tilecraft.jit(func)(*args)
    torch.cuda.synchronize()
    _check(args, want)


def _gemm_state(func, target):
    from tilecraft.ir import Gemm
    from tilecraft.ir.visitor import walk
    from tilecraft.passes import lower

    state = lower(func, target)
    (gemm,) = [s for s in walk(state.kernel.body) if isinstance(s, Gemm)]
    return state, gemm


@pytest.mark.parametrize("name, warps", [("full_row", (4, 1)),
                                         ("full_col_declared_under_full_row", (1, 4)),
                                         ("square", (2, 2)), ("two_copies", (2, 1))])
def test_a_declared_accumulator_layout_picks_the_warp_partition(name, warps):
    from tilecraft.targets import A100_SXM

    state, gemm = _gemm_state(GEMMS[name], A100_SXM)
    assert state.gemm_warps[gemm] == warps
    assert state.block_program is not None  # lowered on the tensor the user made


def test_a_declared_layout_that_is_wgmma_s_runs_on_wgmma_and_one_that_is_not_on_mma_sync():
    from tilecraft.targets import H100_SXM

    state, gemm = _gemm_state(GEMMS["full_row"], H100_SXM)  # = wgmma's C on one warpgroup
    assert gemm in state.gemm_wgmma
    state, gemm = _gemm_state(GEMMS["full_col_declared_under_full_row"], H100_SXM)
    assert gemm not in state.gemm_wgmma and state.gemm_warps[gemm] == (1, 4)


def test_a_fragment_s_declared_layout_picks_the_warp_partition_too():
    from tilecraft.targets import A100_SXM

    @T.prim_func
    def frag(A: T.Tensor((64, 32), F16), B: T.Tensor((32, 64), F16),
             C: T.Tensor((64, 64), F32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), F16)
            B_s = T.alloc_shared((32, 64), F16)
            acc = T.alloc_fragment((64, 64), F32, layout=c_layout(64, 64, 1, 4))
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)  # Square would be 2 x 2
            T.copy(acc, C[0, 0])

    state, gemm = _gemm_state(frag, A100_SXM)
    assert state.gemm_warps[gemm] == (1, 4)
    a, b, c = _rand(64, 32), _rand(32, 64), _poison(64, 64, dtype=torch.float32)
    tilecraft.jit(frag)(a, b, c)
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-3, atol=1e-3)


def test_a_layout_no_warp_partition_gives_is_tc501_at_the_gemm_naming_both_layouts():
    @T.prim_func
    def bad(A: T.Tensor((64, 32), F16), B: T.Tensor((32, 64), F16),
            C: T.Tensor((64, 64), F32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), F16)
            B_s = T.alloc_shared((32, 64), F16)
            acc = T.allocate_register(F32, layout=TILE, init=0.0)  # DECLARED
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, acc)  # ERR
            T.store_global(acc, C)

    with pytest.raises(TilecraftError) as err:
        tilecraft.jit(bad)(_rand(64, 32), _rand(32, 64), _poison(64, 64, dtype=torch.float32))
    e = err.value
    assert e.code == "TC501" and "# ERR" in e.span.source_line()
    assert repr(TILE) in str(e) and "no warp partition" in str(e)
    assert "policy Square gives" in str(e)  # the other layout
    assert any("# DECLARED" in sp.source_line() for sp, _ in e.notes)


def test_a_register_tensor_read_outside_t_parallel_is_tc502_at_the_line():
    @T.prim_func
    def scalar_read(A: T.Tensor((64, 64), F32), B: T.Tensor((1,), F32)):
        with T.Kernel(1, threads=128) as bx:
            r = T.load_global(A, layout=TILE)
            B[0] = r[0, 0]  # ERR

    with pytest.raises(TilecraftError) as err:
        tilecraft.jit(scalar_read)(_rand(64, 64, dtype=torch.float32),
                                   _poison(1, dtype=torch.float32))
    assert err.value.code == "TC502" and "# ERR" in err.value.span.source_line()


def test_a_fragment_of_another_layout_than_a_register_tensor_s_is_tc501_at_the_line():
    @T.prim_func
    def two_layouts(A: T.Tensor((64, 64), F32), B: T.Tensor((64, 64), F32)):
        with T.Kernel(1, threads=128) as bx:
            r = T.load_global(A, layout=TILE)
            f = T.alloc_fragment((64, 64), F32, layout=spatial(8, 16).local(8, 4))
            T.copy(r, f)  # ERR
            T.copy(f, B[0, 0])

    with pytest.raises(TilecraftError) as err:
        tilecraft.jit(two_layouts)(_rand(64, 64, dtype=torch.float32),
                                   _poison(64, 64, dtype=torch.float32))
    assert err.value.code == "TC501" and "# ERR" in err.value.span.source_line()
