"""Launching compiled kernels on a real GPU (marked `gpu`; skipped without one)."""

import time

import pytest
import torch
from cuda_sources import MMA_KERNEL, VECTOR_ADD_KERNEL

from tilecraft.profiler import do_bench, get_profiler
from tilecraft.runtime import LaunchSpec, RuntimeKernel, ScalarParam, TensorParam
from tilecraft.targets import arch_for_capability

pytestmark = pytest.mark.gpu

SMEM_KERNEL = r"""
extern "C" __global__ void smem_roundtrip(const float* __restrict__ in, float* __restrict__ out, int n) {
  extern __shared__ __align__(16) float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i] * 2.0f;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
"""

CLUSTER_KERNEL = r"""
#include "tilecraft/sync.cuh"
extern "C" __global__ void cluster_rank(int* out) {
  tc::cluster_sync();
  if (threadIdx.x == 0) out[blockIdx.x] = int(tc::cluster_ctarank());
}
"""


@pytest.fixture(scope="module")
def arch():
    return arch_for_capability(*torch.cuda.get_device_capability())


def vector_add(arch):
    params = (
        TensorParam("a", "float32", ("n",)),
        TensorParam("b", "float32", ("n",)),
        TensorParam("out", "float32", ("n",)),
        ScalarParam("n", "int32", dim="n"),
    )
    launch = LaunchSpec(grid=(lambda d: (d["n"] + 255) // 256,), block=(256,))
    return RuntimeKernel.from_source(VECTOR_ADD_KERNEL, "vector_add", params, launch, arch=arch)


def test_vector_add_matches_torch(arch):
    kernel = vector_add(arch)
    for n in (1, 1000, 1 << 20):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        kernel(a, b, out)
        torch.testing.assert_close(out, a + b)


def test_empty_grid_launches_nothing(arch):
    kernel = vector_add(arch)
    e = torch.empty(0, device="cuda")
    kernel(e, e, e)
    torch.cuda.synchronize()


def test_mma_kernel_matches_torch(arch):
    params = (
        TensorParam("A", "float16", (16, 16)),
        TensorParam("B", "float16", (8, 16)),
        TensorParam("C", "float32", (16, 8)),
        TensorParam("row_sum", "float32", (16,)),
        TensorParam("total", "float32", (1,)),
        TensorParam("row_max", "float32", (16,)),
    )
    kernel = RuntimeKernel.from_source(
        MMA_KERNEL, "mma_16x8x16", params, LaunchSpec(grid=(1,), block=(32,)), arch=arch
    )
    A = torch.randn(16, 16, device="cuda", dtype=torch.float16)
    B = torch.randn(8, 16, device="cuda", dtype=torch.float16)
    C = torch.full((16, 8), float("nan"), device="cuda")
    row_sum = torch.full((16,), float("nan"), device="cuda")
    total = torch.zeros(1, device="cuda")
    row_max = torch.full((16,), float("-inf"), device="cuda")
    kernel(A, B, C, row_sum, total, row_max)
    ref = A.double() @ B.double().T
    torch.testing.assert_close(C.double(), ref, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(row_sum.double(), ref.sum(1), atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(row_max.double(), ref.max(1).values, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(total.double(), ref.sum().reshape(1), atol=5e-2, rtol=1e-3)
    assert kernel.loaded.attribute(A.device.index or 0, "NUM_REGS") == kernel.resources.registers


def test_launch_on_a_non_default_stream(arch):
    kernel = vector_add(arch)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a = torch.randn(1 << 22, device="cuda")
        b = torch.randn(1 << 22, device="cuda")
        out = torch.empty_like(a)
        kernel(a, b, out)  # torch's current stream is `stream`
        doubled = out * 2
    out2 = torch.empty_like(a)
    kernel(a, b, out2, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(doubled, (a + b) * 2)
    torch.testing.assert_close(out2, a + b)


def test_dynamic_shared_memory_above_48kb(arch):
    n = 100 * 1024 // 4
    params = (
        TensorParam("inp", "float32", (n,)),
        TensorParam("out", "float32", (n,)),
        ScalarParam("n", "int32"),
    )
    kernel = RuntimeKernel.from_source(
        SMEM_KERNEL,
        "smem_roundtrip",
        params,
        LaunchSpec(grid=(1,), block=(512,), smem=n * 4),
        arch=arch,
    )
    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    kernel(x, out, n)
    torch.testing.assert_close(out, (x * 2).flip(0))


@pytest.mark.skipif(
    torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9,
    reason="thread block clusters need sm_90",
)
def test_cluster_launch(arch):
    params = (TensorParam("out", "int32", (8,)),)
    kernel = RuntimeKernel.from_source(
        CLUSTER_KERNEL,
        "cluster_rank",
        params,
        LaunchSpec(grid=(8,), block=(32,), cluster=(2,)),
        arch=arch,
    )
    out = torch.full((8,), -1, device="cuda", dtype=torch.int32)
    kernel(out)
    assert out.tolist() == [0, 1] * 4


def test_do_bench_and_profiler_time_a_kernel(arch):
    kernel = vector_add(arch)
    a = torch.randn(1 << 24, device="cuda")
    out = torch.empty_like(a)
    ms = do_bench(lambda: kernel(a, a, out), warmup=5, rep=20)
    assert 0 < ms < 100
    assert get_profiler(kernel, dynamic_sizes={"n": 1 << 20}).do_bench(warmup=5, rep=20) > 0


def test_host_overhead_per_launch_is_small(arch):
    kernel = vector_add(arch)
    a = torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    kernel(a, a, out)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        kernel(a, a, out)
    per_launch_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    print(f"host time per launch: {per_launch_us:.1f} us")
    assert per_launch_us < 200
