"""Blocks of 512+ threads without tensor-core work ask for two resident blocks per SM
(`__launch_bounds__(threads, 2)`), and fall back to one block per SM when that would spill."""

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


def _row_max(threads: int):
    @T.prim_func
    def row_max(X: T.Tensor((64, 8192), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=threads) as bx:
            x = T.alloc_fragment((1, 8192), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y[bx])

    return row_max


@pytest.mark.parametrize("threads, blocks", [(1024, 2), (512, 2), (256, 1), (128, 1)])
def test_wide_blocks_without_tensor_cores_ask_for_two_blocks_per_sm(threads, blocks):
    gen = generate_cuda(_row_max(threads), "sm_90a")
    assert _bounds(gen.source) == (threads, blocks)
    assert (gen.fallback_source is None) == (blocks == 1)
    if gen.fallback_source is not None:
        assert _bounds(gen.fallback_source) == (threads, 1)


def test_a_1024_thread_softmax_fits_two_blocks_per_sm_without_spills():
    from softmax import softmax

    gen = generate_cuda(softmax(4096, 16384, BLOCK_M=1, BLOCK_N=16384, threads=1024).func,
                        "sm_90a")
    compiled, source = compile_generated(gen, "sm_90a")
    res = compiled.resources
    assert source == gen.source and res.registers <= 32  # 40 with one block per SM
    assert res.spill_stores == 0 and res.spill_loads == 0


def test_tensor_core_kernels_keep_one_block_per_sm():
    from gemm import matmul

    gen = generate_cuda(matmul(1024, 1024, 1024, 128, 256, 64, num_stages=3, threads=512).func,
                        "sm_90a")
    assert _bounds(gen.source)[1] == 1 and gen.fallback_source is None


# 48 values live at once: 32 registers per thread (two 1024-thread blocks) must spill them
_MANY_LIVE = """
extern "C" __global__ void __launch_bounds__(1024, {blocks})
many_live(const float* __restrict__ x, float* __restrict__ y) {{
  float v[48];
  #pragma unroll
  for (int i = 0; i < 48; ++i) v[i] = x[threadIdx.x + i * 1024];
  float s = 0.0f;
  #pragma unroll
  for (int i = 0; i < 48; ++i) s += v[i] * v[47 - i];
  #pragma unroll
  for (int i = 0; i < 48; ++i) y[threadIdx.x + i * 1024] = v[i] * s;
}}
"""


def test_a_source_that_spills_with_two_blocks_falls_back_to_one():
    gen = GeneratedKernel("many_live", _MANY_LIVE.format(blocks=2), (), None, None,
                          _MANY_LIVE.format(blocks=1))
    compiled, source = compile_generated(gen, "sm_90a")
    assert source == gen.fallback_source
    assert compiled.resources.spill_stores == 0 and compiled.resources.registers > 32
