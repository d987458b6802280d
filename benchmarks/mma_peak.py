"""Ceiling of the mma.sync path: tensor-core throughput of m16n8k16 (fp16 in, fp32 accumulate)
with operands already in registers, so no memory is involved. The GEMM and attention kernels
compare against this, not against the wgmma datasheet peak.

Usage: PYTHONPATH=$PWD python3 benchmarks/mma_peak.py
"""

import torch
from triton.testing import do_bench

from tilecraft.runtime import LaunchSpec, RuntimeKernel, TensorParam

SOURCE = r"""
#include "tilecraft/common.cuh"
#include "tilecraft/mma.cuh"
extern "C" __global__ void __launch_bounds__(WARPS * 32) mma_peak(float* __restrict__ out) {
  tc::u32 a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = threadIdx.x * 2654435761u + i;
  for (int i = 0; i < 2; ++i) b[i] = threadIdx.x * 40503u + i;
  float acc[TILES][4] = {};
  for (int it = 0; it < ITERS; ++it) {
    #pragma unroll
    for (int t = 0; t < TILES; ++t) tc::mma_m16n8k16_f16_f32(acc[t], a, b, acc[t]);
  }
  float s = 0.f;
  #pragma unroll
  for (int t = 0; t < TILES; ++t) s += acc[t][0] + acc[t][1] + acc[t][2] + acc[t][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    iters = 4096
    for warps, tiles, blocks_per_sm in ((4, 16, 2), (8, 16, 1), (8, 32, 1), (4, 32, 2), (16, 8, 1)):
        grid = sms * blocks_per_sm * 8
        out = torch.empty(grid * warps * 32, device="cuda")
        k = RuntimeKernel.from_source(
            SOURCE, "mma_peak", (TensorParam("out", "float32", (grid * warps * 32,)),),
            LaunchSpec(grid=(grid,), block=(warps * 32,)), arch="sm_90a",
            options=(f"-DWARPS={warps}", f"-DTILES={tiles}", f"-DITERS={iters}"))
        ms = do_bench(lambda: k(out), return_mode="median")
        flop = 2 * 16 * 8 * 16 * tiles * iters * warps * grid
        print(f"warps {warps:2d} x {blocks_per_sm} blocks/SM, {tiles} independent tiles: "
              f"{flop / ms / 1e9:6.1f} TFLOP/s")


if __name__ == "__main__":
    main()
