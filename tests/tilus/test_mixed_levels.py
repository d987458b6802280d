"""Both language levels in one kernel, meeting in memory: a tile-level shared tile (T.alloc_shared,
filled by T.copy) read by T.load_shared, and a shared tile T.store_shared writes copied out by
T.copy. The pass pipeline lowers the tile ops and keeps the block instructions on the tensors
lowering made (the tile's planned, swizzled layout); the block VM runs that program on the CPU
(the meaning of each instruction is its level's), the printer prints it with the barriers
between the levels."""

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.layout import spatial
from tilecraft.runtime import compile_cuda

TILE = spatial(16, 8).local(4, 8)  # a [64, 64] register tile on 128 threads


@T.prim_func
def tile_then_tilus(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 64), "float16")
        T.copy(A[0, 0], A_s)  # tile level
        r = T.load_shared(A_s, layout=TILE)  # Tilus level, reading the tile-level buffer
        T.store_global(r * 2, B)


@T.prim_func
def tilus_then_tile(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), "float16")
        r = T.load_global(A, layout=TILE)
        T.store_shared(r + 1, S)  # Tilus level, writing the tile-level buffer
        T.copy(S, B[0, 0])  # tile level


def _inputs():
    g = torch.Generator().manual_seed(3)
    return torch.randn(64, 64, generator=g).half(), torch.zeros(64, 64, dtype=torch.float16)


@pytest.mark.parametrize("func, want", [(tile_then_tilus, lambda a: a * 2),
                                        (tilus_then_tile, lambda a: a + 1)],
                         ids=["tile_then_tilus", "tilus_then_tile"])
def test_both_levels_meet_in_shared_memory_on_the_vm(func, want):
    a, b = _inputs()
    tilecraft.jit(func)(a, b)  # CPU tensors: the lowered program on the block VM
    assert torch.equal(b, want(a))


@pytest.mark.parametrize("func", [tile_then_tilus, tilus_then_tile], ids=lambda f: f.name)
def test_mixed_kernels_print_with_a_barrier_between_the_levels(func):
    gen = generate_cuda(func, "sm_90a")
    body = gen.source.split('extern "C"')[1]
    # (T.copy's copy_async, landing at its wait, or T.store_shared's store)
    writes = body.index("// copy_async_wait_group(" if "// copy_async(" in body
                        else "// store_shared(")
    reads = body.index("// load_shared(")  # (T.load_shared's, or T.copy's)
    assert "__syncthreads();" in body[writes:reads]
    for arch in ("sm_90a", "sm_80"):
        assert compile_cuda(generate_cuda(func, arch).source, arch,
                            name=gen.name).resources.spill_stores == 0


def test_the_tilus_load_reads_the_tile_with_the_layout_lowering_planned():
    from tilecraft.block import LoadShared
    from tilecraft.ir.visitor import walk
    from tilecraft.passes import lower
    from tilecraft.targets import H100_SXM

    program = lower(tile_then_tilus, H100_SXM).block_program
    (load,) = [s for s in walk(program.body) if isinstance(s, LoadShared)]
    assert load.src.layout.swizzle is not None  # the canonical swizzled tile, not row-major


@pytest.mark.gpu
@pytest.mark.parametrize("func, want", [(tile_then_tilus, lambda a: a * 2),
                                        (tilus_then_tile, lambda a: a + 1)],
                         ids=["tile_then_tilus", "tilus_then_tile"])
def test_both_levels_meet_in_shared_memory_on_the_gpu(func, want):
    a, b = (x.cuda() for x in _inputs())
    tilecraft.jit(func)(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b.cpu(), want(a.cpu()))



def _acc_layout():
    from tilecraft.passes.layout_inference.rules_gemm import c_layout

    return c_layout(64, 64, 4, 1)  # mma.sync's accumulator layout on 4 warps


def _gemm_with_tilus_epilogue():
    acc_layout = _acc_layout()

    @T.prim_func
    def gemm_epilogue(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                      C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32", layout=acc_layout)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)  # into L
            T.store_global(T.cast(acc, "float16"), C)  # Tilus level, on the same registers

    return gemm_epilogue


def _gemm_inputs():
    g = torch.Generator().manual_seed(5)
    return (torch.randn(64, 32, generator=g).half(), torch.randn(32, 64, generator=g).half(),
            torch.zeros(64, 64, dtype=torch.float16))


def test_a_fragment_with_a_declared_layout_is_shared_by_both_levels():
    """T.alloc_fragment(layout=L): a strict constraint for inference (the gemm accumulates in
    L) and a register tensor of layout L for block instructions (the epilogue)."""
    a, b, c = _gemm_inputs()
    func = _gemm_with_tilus_epilogue()
    tilecraft.jit(func)(a, b, c)  # (the interpreter's gemm: float64 products, one rounding)
    assert torch.equal(c, (a.double() @ b.double()).float().half())
    for arch in ("sm_90a", "sm_80"):
        src = generate_cuda(func, arch)
        assert compile_cuda(src.source, arch, name=src.name).resources.spill_stores == 0


def test_a_fragment_without_a_layout_in_a_block_instruction_is_tc603_at_the_line():
    from tilecraft.diagnostics import TilecraftError

    with pytest.raises(TilecraftError) as err:
        @T.prim_func
        def no_layout(C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                acc = T.alloc_fragment((64, 64), "float32")
                T.fill(acc, 1.0)
                T.store_global(acc, C)  # ERR
    assert err.value.code == "TC603" and "# ERR" in err.value.span.source_line()
    assert "layout=" in str(err.value)


@pytest.mark.gpu
def test_a_fragment_shared_by_both_levels_on_the_gpu():
    a, b, c = (x.cuda() for x in _gemm_inputs())
    tilecraft.jit(_gemm_with_tilus_epilogue())(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.cpu().float(), (a.double() @ b.double()).float().cpu(),
                               rtol=1e-2, atol=1e-2)
