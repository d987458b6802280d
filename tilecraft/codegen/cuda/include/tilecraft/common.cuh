// tilecraft device header library: common types, macros and conversions.
// Included by every generated kernel. Needs only NVRTC plus cuda_fp16.h, cuda_bf16.h unless
// TC_NO_BF16 is defined and cuda_fp8.h unless TC_NO_FP8 is defined, from the nvidia-cuda-runtime
// pip package (a kernel that names no bf16 / fp8 type defines them: NVRTC parses each header).
#pragma once

#include <cuda_fp16.h>
#ifndef TC_NO_BF16
#include <cuda_bf16.h>
#endif
#ifndef TC_NO_FP8
#include <cuda_fp8.h>
#endif

#define TC_DEVICE __device__ __forceinline__
#define TC_HOST_DEVICE __host__ __device__ __forceinline__

namespace tc {

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef __half f16;
typedef __half2 f16x2;
#ifndef TC_NO_BF16
typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf16x2;
#endif

static_assert(sizeof(u32) == 4 && sizeof(u64) == 8, "unexpected integer sizes");

template <class T>
TC_HOST_DEVICE constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

// Reinterpret the bits of `x` as type To (same size), without undefined behaviour.
template <class To, class From>
TC_DEVICE To bit_cast(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  union { From f; To t; } u;
  u.f = x;
  return u.t;
}

// 32-bit shared-memory address of a generic pointer into shared memory (for PTX operands).
// A compiler intrinsic, not volatile asm, so address arithmetic folds and hoists out of loops.
TC_DEVICE u32 smem_addr(const void* ptr) {
  return static_cast<u32>(__cvta_generic_to_shared(ptr));
}

// Two floats -> packed f16x2 / bf16x2 in one register (lo in the low 16 bits), round to nearest.
TC_DEVICE u32 pack_half2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

TC_DEVICE u32 pack_bfloat2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

TC_DEVICE float2 unpack_half2(u32 v) { return __half22float2(bit_cast<__half2>(v)); }
#ifndef TC_NO_BF16
TC_DEVICE float2 unpack_bfloat2(u32 v) { return __bfloat1622float2(bit_cast<__nv_bfloat162>(v)); }
#endif

// Scalar conversions used by generated code: tc::cast<To>(x).
template <class T> struct IsInt { static constexpr bool value = false; };
#define TC_IS_INT(T) \
  template <> struct IsInt<T> { static constexpr bool value = true; };
TC_IS_INT(bool)
TC_IS_INT(signed char)
TC_IS_INT(unsigned char)
TC_IS_INT(short)
TC_IS_INT(unsigned short)
TC_IS_INT(int)
TC_IS_INT(unsigned)
TC_IS_INT(long long)
TC_IS_INT(unsigned long long)
#undef TC_IS_INT
template <class T> struct IsBool { static constexpr bool value = false; };
template <> struct IsBool<bool> { static constexpr bool value = true; };
// A 32/64-bit integer cast to an 8/16-bit one passes through an opaque 32-bit move. Otherwise
// NVVM narrows the arithmetic feeding the cast to 16-bit PTX (`(signed char)(0u - l)` became
// shl.b16, neg.s16, shr.s16), and ptxas of CUDA 13.0 keeps that neg.s16 result unextended in
// its 32-bit register: -(-32768) reached the shr as +32768 (fuzz seed 3207775; the same ptxas
// defect as the wrap_* and wrap_abs notes in math.cuh).
template <class To, class From>
struct Cast {
  TC_DEVICE static To run(From x) {
    constexpr bool narrow = IsInt<To>::value && !IsBool<To>::value && sizeof(To) < 4;
    if constexpr (narrow && IsInt<From>::value && sizeof(From) >= 4) {
      unsigned w = static_cast<unsigned>(x);
      asm("mov.b32 %0, %0;" : "+r"(w));
      return static_cast<To>(w);
    }
    return static_cast<To>(x);
  }
};
template <> struct Cast<__half, float> {
  TC_DEVICE static __half run(float x) { return __float2half_rn(x); }
};
template <> struct Cast<float, __half> {
  TC_DEVICE static float run(__half x) { return __half2float(x); }
};
#ifndef TC_NO_BF16
template <> struct Cast<__nv_bfloat16, float> {
  TC_DEVICE static __nv_bfloat16 run(float x) { return __float2bfloat16_rn(x); }
};
template <> struct Cast<float, __nv_bfloat16> {
  TC_DEVICE static float run(__nv_bfloat16 x) { return __bfloat162float(x); }
};
#endif
// Float -> integer: truncate toward zero, saturate to the type's range, NaN -> 0. PTX cvt.rzi
// saturates; its NaN result is 0 only from f32 to a 32-bit type (1 << (bits - 1) from f64 or to a
// 64-bit type: tested explicitly there). A plain C++ cast to an 8/16-bit type wraps instead (and
// out of range it is undefined). 16-bit and fp8 floats convert through float (exactly).
#define TC_F2I(To, F, EXPR)                                                                    \
  template <> struct Cast<To, F> { TC_DEVICE static To run(F x) { return EXPR; } };
#define TC_NAN0(To, EXPR) (x != x ? (To)0 : (To)(EXPR))
TC_F2I(int, float, __float2int_rz(x))
TC_F2I(unsigned, float, __float2uint_rz(x))
TC_F2I(long long, float, TC_NAN0(long long, __float2ll_rz(x)))
TC_F2I(unsigned long long, float, TC_NAN0(unsigned long long, __float2ull_rz(x)))
TC_F2I(signed char, float, (signed char)max(-128, min(127, __float2int_rz(x))))
TC_F2I(short, float, (short)max(-32768, min(32767, __float2int_rz(x))))
TC_F2I(unsigned char, float, (unsigned char)min(255u, __float2uint_rz(x)))
TC_F2I(unsigned short, float, (unsigned short)min(65535u, __float2uint_rz(x)))
TC_F2I(int, double, TC_NAN0(int, __double2int_rz(x)))
TC_F2I(unsigned, double, TC_NAN0(unsigned, __double2uint_rz(x)))
TC_F2I(long long, double, TC_NAN0(long long, __double2ll_rz(x)))
TC_F2I(unsigned long long, double, TC_NAN0(unsigned long long, __double2ull_rz(x)))
TC_F2I(signed char, double, TC_NAN0(signed char, max(-128, min(127, __double2int_rz(x)))))
TC_F2I(short, double, TC_NAN0(short, max(-32768, min(32767, __double2int_rz(x)))))
TC_F2I(unsigned char, double, TC_NAN0(unsigned char, min(255u, __double2uint_rz(x))))
TC_F2I(unsigned short, double, TC_NAN0(unsigned short, min(65535u, __double2uint_rz(x))))
#undef TC_NAN0
template <class To> struct CastViaFloat {
  template <class F> TC_DEVICE static To run(F x) {
    return Cast<To, float>::run(static_cast<float>(x));
  }
};
#define TC_F2I_VIA_FLOAT(F)                                                                    \
  TC_F2I(int, F, CastViaFloat<int>::run(x))                                                    \
  TC_F2I(unsigned, F, CastViaFloat<unsigned>::run(x))                                          \
  TC_F2I(long long, F, CastViaFloat<long long>::run(x))                                        \
  TC_F2I(unsigned long long, F, CastViaFloat<unsigned long long>::run(x))                      \
  TC_F2I(signed char, F, CastViaFloat<signed char>::run(x))                                    \
  TC_F2I(short, F, CastViaFloat<short>::run(x))                                                \
  TC_F2I(unsigned char, F, CastViaFloat<unsigned char>::run(x))                                \
  TC_F2I(unsigned short, F, CastViaFloat<unsigned short>::run(x))
TC_F2I_VIA_FLOAT(__half)
#ifndef TC_NO_BF16
TC_F2I_VIA_FLOAT(__nv_bfloat16)
#endif
#ifndef TC_NO_FP8
TC_F2I_VIA_FLOAT(__nv_fp8_e4m3)
TC_F2I_VIA_FLOAT(__nv_fp8_e5m2)
#endif
#undef TC_F2I_VIA_FLOAT
#undef TC_F2I

template <class To, class From>
TC_DEVICE To cast(From x) { return Cast<To, From>::run(x); }

// Load/store 16 bytes (vectorized global or shared access); pointers must be 16-byte aligned.
TC_DEVICE uint4 load_128(const void* p) { return *reinterpret_cast<const uint4*>(p); }
TC_DEVICE void store_128(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// N elements of T moved as one aligned vector access (N * sizeof(T) in 2, 4, 8 or 16 bytes).
// (1-byte elements travel as 32-bit words: the compiler splits a byte array's copy into bytes)
template <class T, int N, bool WORDS = sizeof(T) == 1 && N % 4 == 0>
struct alignas(sizeof(T) * N) Vec { T v[N]; };
template <class T, int N>
struct alignas(N) Vec<T, N, true> { u32 v[N / 4]; };
template <class T, int N>
TC_DEVICE Vec<T, N> load_vec(const T* p) { return *reinterpret_cast<const Vec<T, N>*>(p); }
template <class T, int N>
TC_DEVICE void store_vec(T* p, const Vec<T, N>& x) { *reinterpret_cast<Vec<T, N>*>(p) = x; }

}  // namespace tc
