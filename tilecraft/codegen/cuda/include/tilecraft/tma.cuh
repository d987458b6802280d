// tilecraft device header library: TMA tile loads and the mbarriers that count their bytes
// (sm_90). The tensor map comes as a kernel parameter by value (`const __grid_constant__
// tc::TensorMap`), made on the host at launch (runtime/tensor_map.py).
#pragma once

#include "common.cuh"
#include "sync.cuh"

namespace tc {

struct alignas(64) TensorMap {
  unsigned long long bytes[16];
};

TC_DEVICE u64 map_addr(const TensorMap& map) { return reinterpret_cast<u64>(&map); }

// Brings the tensor map into the cache ahead of the first load that reads it.
TC_DEVICE void prefetch_tensor_map(const TensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map_addr(map)) : "memory");
}

// An mbarrier completing a phase once `count` threads arrived and the bytes they announced
// (mbarrier_expect_tx) landed. One thread initialises; a barrier must follow before use.
TC_DEVICE void mbarrier_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// Makes the initialisation visible to the async proxy (the TMA unit).
TC_DEVICE void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive on `bar` and announce `bytes` more to land before its phase completes.
TC_DEVICE void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// Arrive on `bar` (one of the arrivals its phase counts).
TC_DEVICE void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Wait until the phase of parity `phase` of `bar` completed.
TC_DEVICE void mbarrier_wait(u64* bar, u32 phase) {
  const u32 addr = smem_addr(bar);
  u32 done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(addr), "r"(phase) : "memory");
  } while (!done);
}

// One box of `map` at coordinates (innermost first) into shared memory at `dst`, counted on
// `bar`. Elements outside the tensor arrive as zeros.
TC_DEVICE void tma_load(void* dst, const TensorMap& map, u64* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_addr(dst)), "l"(map_addr(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

TC_DEVICE void tma_load(void* dst, const TensorMap& map, u64* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(smem_addr(dst)), "l"(map_addr(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

TC_DEVICE void tma_load(void* dst, const TensorMap& map, u64* bar, int c0, int c1, int c2,
                        int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
      ::"r"(smem_addr(dst)), "l"(map_addr(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
        "r"(smem_addr(bar))
      : "memory");
}

TC_DEVICE void tma_load(void* dst, const TensorMap& map, u64* bar, int c0, int c1, int c2,
                        int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
      ::"r"(smem_addr(dst)), "l"(map_addr(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
        "r"(smem_addr(bar))
      : "memory");
}

}  // namespace tc
