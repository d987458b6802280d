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
    writes = body.index("// store_shared(")  # (T.copy's, or T.store_shared's)
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
