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

}  // namespace tc
#endif
