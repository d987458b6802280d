// ldmatrix (sm_75+) and stmatrix (sm_90+): warp-cooperative 8x8 b16 matrix moves between shared
// memory and registers. For .xN, lanes 8*i .. 8*i+7 give the row addresses of matrix i; each
// thread receives one u32 (two b16) per matrix. `.trans` transposes each 8x8 matrix.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

TC_DEVICE void ldmatrix_x1(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(smem_row)));
}
TC_DEVICE void ldmatrix_x2(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem_row)));
}
TC_DEVICE void ldmatrix_x4(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem_row)));
}
TC_DEVICE void ldmatrix_x1_trans(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(smem_row)));
}
TC_DEVICE void ldmatrix_x2_trans(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem_row)));
}
TC_DEVICE void ldmatrix_x4_trans(u32* r, const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem_row)));
}

// The same with a 32-bit shared-memory address (tc::smem_addr of the tile plus a byte offset).
TC_DEVICE void ldmatrix_x4(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
TC_DEVICE void ldmatrix_x4_trans(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TC_HAS_STMATRIX 1
TC_DEVICE void stmatrix_x1(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]) : "memory");
}
TC_DEVICE void stmatrix_x2(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1,%2};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]) : "memory");
}
TC_DEVICE void stmatrix_x4(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
TC_DEVICE void stmatrix_x1_trans(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]) : "memory");
}
TC_DEVICE void stmatrix_x2_trans(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]) : "memory");
}
TC_DEVICE void stmatrix_x4_trans(void* smem_row, const u32* r) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :: "r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
#endif

}  // namespace tc
