"""Blocks without tensor-core work ask ptxas for room for 2048, then 1024 threads per SM
(`__launch_bounds__(threads, blocks)`, as many blocks as their shared memory lets reside), each
tried when the one before spills, and fall back to one block per SM (`gen.source`)."""

import re
import sys
from pathlib import Path

import pytest

import tilecraft.language as T
from tilecraft.codegen.cuda.build import GeneratedKernel, compile_generated, generate_cuda

pytest.importorskip("cuda.bindings.nvrtc")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def _bounds(source: str) -> tuple[int, int]:
    m = re.search(r"__launch_bounds__\((\d+), (\d+)\)", source)
    return int(m.group(1)), int(m.group(2))


def _row_max(threads: int, width: int = 8192):
    @T.prim_func
    def row_max(X: T.Tensor((64, width), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=threads) as bx:
            x = T.alloc_fragment((1, width), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y[bx])

    return row_max


@pytest.mark.parametrize("threads, ladder", [(1024, (2, 1)), (512, (4, 2, 1)),
                                             (256, (8, 4, 1)), (128, (16, 8, 1)),
                                             (32, (32, 1))])
def test_blocks_without_tensor_cores_ask_for_2048_then_1024_threads_per_sm(threads, ladder):
    gen = generate_cuda(_row_max(threads, width=1024), "sm_90a")
    bounds = [_bounds(s) for s in (*gen.ladder_sources, gen.source)]
    assert bounds == [(threads, b) for b in ladder]


@pytest.mark.parametrize("threads, ladder", [(256, (4, 1)), (128, (1,))])
def test_no_rung_whose_register_budget_a_tensor_fills(threads, ladder):
    # 8192 float32 a row: 32 (256 threads) / 64 (128 threads) registers a thread for x alone;
    # 8 blocks of 256 threads leave 32, 8 of 128 leave 64, 16 of 128 leave 32
    gen = generate_cuda(_row_max(threads), "sm_90a")
    assert [_bounds(s)[1] for s in (*gen.ladder_sources, gen.source)] == list(ladder)


def test_the_ladder_asks_for_no_more_blocks_than_shared_memory_lets_reside():
    @T.prim_func
    def staged(X: T.Tensor((64, 16384), "float16"), Y: T.Tensor((64, 16384), "float16")):
        with T.Kernel(64, threads=128) as bx:
            s = T.alloc_shared((2, 16384), "float16")  # 64 KB: three blocks fit in 228 KB
            T.copy(X[bx // 2 * 2, 0], s)
            T.copy(s, Y[bx // 2 * 2, 0])

    gen = generate_cuda(staged, "sm_90a")
    assert [_bounds(s)[1] for s in (*gen.ladder_sources, gen.source)] == [3, 1]


def test_a_1024_thread_softmax_fits_two_blocks_per_sm_without_spills():
    from softmax import softmax

    gen = generate_cuda(softmax(4096, 16384, BLOCK_M=1, BLOCK_N=16384, threads=1024).func,
                        "sm_90a")
    compiled, source = compile_generated(gen, "sm_90a")
    res = compiled.resources
    assert source == gen.ladder_sources[0] and res.registers <= 32  # 40 with one block per SM
    assert res.spill_stores == 0 and res.spill_loads == 0


def test_tensor_core_kernels_keep_one_block_per_sm():
    from gemm import matmul

    gen = generate_cuda(matmul(1024, 1024, 1024, 128, 256, 64, num_stages=3, threads=512).func,
                        "sm_90a")
    assert _bounds(gen.source)[1] == 1 and gen.ladder_sources == ()


def _live(blocks: int, threads: int = 1024, n: int = 48, name: str = "many_live") -> str:
    """A kernel holding `n` values live at once (48 on 1024 threads: 32 registers per thread,
    two blocks per SM, must spill them)."""
    return f"""
extern "C" __global__ void __launch_bounds__({threads}, {blocks})
{name}(const float* __restrict__ x, float* __restrict__ y) {{
  float v[{n}];
  #pragma unroll
  for (int i = 0; i < {n}; ++i) v[i] = x[threadIdx.x + i * {threads}];
  float s = 0.0f;
  #pragma unroll
  for (int i = 0; i < {n}; ++i) s += v[i] * v[{n - 1} - i];
  #pragma unroll
  for (int i = 0; i < {n}; ++i) y[threadIdx.x + i * {threads}] = v[i] * s;
}}
"""


def test_a_source_that_spills_with_two_blocks_falls_back_to_one():
    gen = GeneratedKernel("many_live", _live(1), (), None, None,
                          (_live(2),))
    compiled, source = compile_generated(gen, "sm_90a")
    assert source == gen.source
    assert compiled.resources.spill_stores == 0 and compiled.resources.registers > 32


def test_the_one_block_source_is_kept_even_when_it_spills():
    gen = GeneratedKernel("many_live", _live(2), (), None, None, ())
    compiled, source = compile_generated(gen, "sm_90a")
    assert source == gen.source and compiled.resources.spill_stores > 0


# ---- tensor-core kernels: a few registers fewer so that the grid runs in one wave -----------
def _gen(grid, threads=128, smem=26880, source="", name="k"):
    from tilecraft.runtime import LaunchSpec

    return GeneratedKernel(name, source, (), LaunchSpec(grid=grid, block=(threads,), smem=smem),
                           None, ())


@pytest.mark.parametrize("grid, registers, want", [
    ((128, 1, 4), 129, 4),    # 512 blocks: 4 an SM fit in one wave at 128 registers
    ((128, 1, 4), 144, 4),    # (at most 16 registers given up)
    ((128, 1, 4), 145, None),
    ((128, 1, 4), 128, None),  # already one wave
    ((132,), 200, None),      # one block an SM: nothing to ask
    ((64, 1, 4), 129, None),  # 256 blocks: 2 an SM leave 256 registers
])
def test_one_wave_blocks(grid, registers, want):
    from tilecraft.codegen.block_cuda.build import one_wave_blocks

    assert one_wave_blocks(_gen(grid), "sm_90a", registers) == want


def test_no_one_wave_ask_without_a_static_grid_or_room_in_shared_memory():
    from tilecraft.codegen.block_cuda.build import one_wave_blocks

    assert one_wave_blocks(_gen((lambda d: 512,)), "sm_90a", 129) is None
    assert one_wave_blocks(_gen((128, 1, 4), smem=100_000), "sm_90a", 129) is None


def test_a_one_wave_ask_that_spills_keeps_the_one_block_source():
    from tilecraft.codegen.block_cuda.build import one_wave_blocks

    gen = _gen((396,), threads=256, smem=0, source=_live(1, 256, 76, "live"),
               name="live")
    compiled, source = compile_generated(gen, "sm_90a")  # 3 blocks an SM: 80 registers
    regs = compiled.resources.registers
    if one_wave_blocks(gen, "sm_90a", regs) is None:
        pytest.skip(f"this ptxas gives {regs} registers: no ask")
    tight = _live(3, 256, 76, "live")
    from tilecraft.runtime import compile_cuda

    spills = compile_cuda(tight, "sm_90a", name="live").resources.spill_stores
    assert source == (gen.source if spills else tight)
    assert compiled.resources.spill_stores == 0
