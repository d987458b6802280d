// Conversions between the two fp8 types for tc::cast (cuda_fp8.h has none: a static_cast from
// one to the other does not compile). Through float, where every fp8 value is exact, then the
// interpreter's rounding (tilecraft/dtypes): round to nearest even, saturate to +-max
// (__NV_SATFINITE; +-inf too), NaN -> 0x7F, a negative value that rounds to zero keeps its sign.
#pragma once
#include "tilecraft/common.cuh"

#ifndef TC_NO_FP8
namespace tc {

TC_DEVICE __nv_fp8_storage_t fp8_code(float f, __nv_fp8_interpretation_t kind) {
  return f != f ? __nv_fp8_storage_t(0x7F) : __nv_cvt_float_to_fp8(f, __NV_SATFINITE, kind);
}

template <> struct Cast<__nv_fp8_e5m2, __nv_fp8_e4m3> {
  TC_DEVICE static __nv_fp8_e5m2 run(__nv_fp8_e4m3 x) {
    __nv_fp8_e5m2 r;
    r.__x = fp8_code(static_cast<float>(x), __NV_E5M2);
    return r;
  }
};
template <> struct Cast<__nv_fp8_e4m3, __nv_fp8_e5m2> {
  TC_DEVICE static __nv_fp8_e4m3 run(__nv_fp8_e5m2 x) {
    __nv_fp8_e4m3 r;
    r.__x = fp8_code(static_cast<float>(x), __NV_E4M3);
    return r;
  }
};

// fp8 -> f16/bf16/f32/f64: exact, and a NaN code gives the canonical quiet NaN with its sign
// (the interpreter's rule; cuda_fp8's conversions give 0x7FFF..., unsigned).
TC_DEVICE bool fp8_is_nan(__nv_fp8_e4m3 x) { return (x.__x & 0x7F) == 0x7F; }
TC_DEVICE bool fp8_is_nan(__nv_fp8_e5m2 x) { return (x.__x & 0x7F) > 0x7C; }
template <class F> TC_DEVICE bool fp8_sign(F x) { return x.__x & 0x80; }
#define TC_FP8_WIDEN(F)                                                                        \
  template <> struct Cast<float, F> {                                                          \
    TC_DEVICE static float run(F x) {                                                          \
      return fp8_is_nan(x) ? __uint_as_float(fp8_sign(x) ? 0xFFC00000u : 0x7FC00000u)          \
                           : static_cast<float>(x);                                            \
    }                                                                                          \
  };                                                                                           \
  template <> struct Cast<double, F> {                                                         \
    TC_DEVICE static double run(F x) {                                                         \
      return fp8_is_nan(x) ? __longlong_as_double(fp8_sign(x) ? 0xFFF8000000000000ull          \
                                                               : 0x7FF8000000000000ull)        \
                           : static_cast<double>(static_cast<float>(x));                       \
    }                                                                                          \
  };                                                                                           \
  template <> struct Cast<__half, F> {                                                         \
    TC_DEVICE static __half run(F x) {                                                         \
      return fp8_is_nan(x) ? __ushort_as_half(fp8_sign(x) ? 0xFE00 : 0x7E00)                   \
                           : static_cast<__half>(x);                                           \
    }                                                                                          \
  };
TC_FP8_WIDEN(__nv_fp8_e4m3)
TC_FP8_WIDEN(__nv_fp8_e5m2)
#undef TC_FP8_WIDEN
#ifndef TC_NO_BF16
template <class F> TC_DEVICE __nv_bfloat16 fp8_to_bf16(F x) {
  return fp8_is_nan(x) ? __ushort_as_bfloat16(fp8_sign(x) ? 0xFFC0 : 0x7FC0)
                       : __float2bfloat16_rn(static_cast<float>(x));
}
template <> struct Cast<__nv_bfloat16, __nv_fp8_e4m3> {
  TC_DEVICE static __nv_bfloat16 run(__nv_fp8_e4m3 x) { return fp8_to_bf16(x); }
};
template <> struct Cast<__nv_bfloat16, __nv_fp8_e5m2> {
  TC_DEVICE static __nv_bfloat16 run(__nv_fp8_e5m2 x) { return fp8_to_bf16(x); }
};
#endif

}  // namespace tc
#endif
