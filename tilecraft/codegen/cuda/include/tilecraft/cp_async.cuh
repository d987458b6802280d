// Asynchronous global -> shared copies (cp.async, sm_80+). When `pred` is false the source size
// is 0 and the destination is zero-filled, which is how partial tiles are padded.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

// 16 bytes, bypassing L1 (.cg). Both addresses must be 16-byte aligned.
TC_DEVICE void cp_async_16(void* smem, const void* gmem, bool pred = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem_addr(smem)), "l"(gmem), "r"(pred ? 16 : 0) : "memory");
}

// The same with a 32-bit shared-memory address (tc::smem_addr of the tile plus a byte offset).
TC_DEVICE void cp_async_16(u32 smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem), "l"(gmem) : "memory");
}

// The same, zero-filling the 16 bytes when `pred` is false.
TC_DEVICE void cp_async_16(u32 smem, const void* gmem, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem), "l"(gmem), "r"(pred ? 16 : 0) : "memory");
}

// 4, 8 or 16 bytes through L1 (.ca); addresses aligned to Bytes.
template <int Bytes>
TC_DEVICE void cp_async_ca(void* smem, const void* gmem, bool pred = true) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
               :: "r"(smem_addr(smem)), "l"(gmem), "n"(Bytes), "r"(pred ? Bytes : 0) : "memory");
}

// Close the group of cp.async issued since the last commit.
TC_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N committed groups are still in flight.
template <int N>
TC_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

TC_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace tc
