// Fast math through the special-function unit (approximate, flush-to-zero), plus helpers.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

TC_DEVICE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
TC_DEVICE float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
TC_DEVICE float rsqrt_approx(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
TC_DEVICE float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// Hardware tanh (sm_75+), max relative error about 2^-11.
TC_DEVICE float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// Two half-precision 2^x in one instruction (packed f16x2).
TC_DEVICE u32 exp2_approx_f16x2(u32 x) {
  u32 y;
  asm("ex2.approx.f16x2 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

TC_DEVICE float exp_approx(float x) { return exp2_approx(x * kLog2e); }
TC_DEVICE float log_approx(float x) { return log2_approx(x) * kLn2; }
TC_DEVICE float sigmoid_approx(float x) { return fmaf(0.5f, tanh_approx(0.5f * x), 0.5f); }
TC_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
TC_DEVICE float silu(float x) { return x * sigmoid(x); }
TC_DEVICE float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * x * (1.0f + tanh_approx(k0 * fmaf(k1 * x, x * x, x)));
}

template <class T> TC_DEVICE T infinity();
template <> TC_DEVICE float infinity<float>() { return __int_as_float(0x7f800000); }
template <> TC_DEVICE __half infinity<__half>() { return __ushort_as_half(0x7c00); }
template <> TC_DEVICE __nv_bfloat16 infinity<__nv_bfloat16>() {
  return __ushort_as_bfloat16(0x7f80);
}

}  // namespace tc
