// Warp-level tensor-core MMA (mma.sync), sm_80+. Not volatile: an MMA is a pure function of
// its registers, so the compiler may schedule it freely around the ldmatrix loads.
// Operands follow the PTX fragment layouts:
// for m16n8k16, A is 4 x u32 (8 halves), B is 2 x u32 (4 halves), C/D are 4 floats per thread.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

// D = A * B + C, fp16 inputs, fp32 accumulate.
TC_DEVICE void mma_m16n8k16_f16_f32(float* d, const u32* a, const u32* b, const float* c) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// D = A * B + C, bf16 inputs, fp32 accumulate.
TC_DEVICE void mma_m16n8k16_bf16_f32(float* d, const u32* a, const u32* b, const float* c) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// D = A * B + C, fp16 inputs, fp16 accumulate: C and D are 2 x u32 (4 halves).
TC_DEVICE void mma_m16n8k16_f16_f16(u32* d, const u32* a, const u32* b, const u32* c) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

// m16n8k8 with fp16 inputs (A 2 x u32, B 1 x u32), fp32 accumulate.
TC_DEVICE void mma_m16n8k8_f16_f32(float* d, const u32* a, const u32* b, const float* c) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// m16n8k8 with tf32 inputs (A 4 x u32, B 2 x u32 holding fp32 bit patterns), fp32 accumulate.
TC_DEVICE void mma_m16n8k8_tf32_f32(float* d, const u32* a, const u32* b, const float* c) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// m16n8k32 with int8 inputs (A 4 x u32, B 2 x u32, 4 int8 each), int32 accumulate.
TC_DEVICE void mma_m16n8k32_s8_s32(int* d, const u32* a, const u32* b, const int* c) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define TC_HAS_MMA_FP8 1
// m16n8k32 with fp8 e4m3 inputs (4 per u32), fp32 accumulate (sm_89+).
TC_DEVICE void mma_m16n8k32_e4m3_f32(float* d, const u32* a, const u32* b, const float* c) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
#endif

}  // namespace tc
