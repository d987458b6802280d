// tilecraft device header library: Hopper warpgroup mma (wgmma.mma_async), sm_90a only.
// The mma instructions themselves (one per shape, with N/2 accumulator operands) are written
// into the kernel source by the code generator (codegen/cuda/emit_wgmma.py); these are the
// fences, group commits and waits around them, and the shared-memory descriptor. Shared-memory
// writes reach wgmma through sync.cuh's fence_proxy_async_shared (then a barrier).
#pragma once

#include "common.cuh"
#include "sync.cuh"

namespace tc {

// Orders this warpgroup's earlier register and shared-memory accesses before the wgmma that
// follow (needed before the first wgmma and after the accumulators were touched).
TC_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

TC_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Wait until at most N committed wgmma groups of this warp are still running.
template <int N>
TC_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accesses of an accumulator register across the asynchronous
// wgmma region (the asm statements do not say when the hardware writes it).
TC_DEVICE void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Descriptor of a shared-memory operand at `smem_addr`: `base` holds LBO, SBO and the swizzle
// mode (tilecraft/layout/wgmma.py); the start address goes in bits 0-13 in 16-byte units.
TC_DEVICE u64 wgmma_desc(u32 smem_addr, u64 base) {
  return base | (u64)((smem_addr >> 4) & 0x3FFF);
}

}  // namespace tc
