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
// T.sigmoid: the hardware reciprocal (1 ulp) of 1 + expf(-x), within 4 ulp; below 2^-126 it
// flushes to zero. An IEEE division's slow-path branch kept ptxas from interleaving the
// elements of a row (RMSNorm+SiLU: 27 instructions an element, 67% of copy speed at 16384 wide).
TC_DEVICE float sigmoid(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(1.0f + expf(-x)));
  return y;
}
TC_DEVICE double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
TC_DEVICE float silu(float x) { return x * sigmoid(x); }
TC_DEVICE float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * x * (1.0f + tanh_approx(k0 * fmaf(k1 * x, x * x, x)));
}

template <class T> TC_DEVICE T infinity();
template <> TC_DEVICE float infinity<float>() { return __int_as_float(0x7f800000); }
template <> TC_DEVICE double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000ll);
}
template <> TC_DEVICE __half infinity<__half>() { return __ushort_as_half(0x7c00); }
#ifndef TC_NO_BF16
template <> TC_DEVICE __nv_bfloat16 infinity<__nv_bfloat16>() {
  return __ushort_as_bfloat16(0x7f80);
}
#endif


// ---- Arithmetic with the language's semantics (docs/language.md, "Semantics") ------------------
// Integers wrap modulo 2^bits (two's complement), computed in the unsigned type so that no signed
// overflow (undefined in C++, and exploited by NVRTC: `x + 1 > x` folds to true) is left.

template <bool Signed, int Bytes> struct Promoted;
template <> struct Promoted<true, 4> { typedef int type; };
template <> struct Promoted<false, 4> { typedef unsigned type; };
template <> struct Promoted<true, 8> { typedef long long type; };
template <> struct Promoted<false, 8> { typedef unsigned long long type; };
// U: the unsigned type T computes in after promotion; P: the promoted type, keeping the sign
template <class T> struct IntTraits;
#define TC_INT_TRAITS(T, UT, SIGNED, LO, HI)                                                      \
  template <> struct IntTraits<T> {                                                             \
    typedef UT U;                                                                               \
    typedef typename Promoted<SIGNED, sizeof(UT)>::type P; /* int, unsigned, long long, ... */  \
    static constexpr bool is_signed = SIGNED;                                                   \
    static constexpr int bits = 8 * sizeof(UT);                                                 \
    TC_DEVICE static T lowest() { return LO; }                                                  \
    TC_DEVICE static T highest() { return HI; }                                                 \
  };
TC_INT_TRAITS(signed char, unsigned, true, -128, 127)
TC_INT_TRAITS(short, unsigned, true, -32768, 32767)
TC_INT_TRAITS(int, unsigned, true, -2147483647 - 1, 2147483647)
TC_INT_TRAITS(long long, unsigned long long, true, -9223372036854775807ll - 1,
              9223372036854775807ll)
TC_INT_TRAITS(unsigned char, unsigned, false, 0, 255)
TC_INT_TRAITS(unsigned short, unsigned, false, 0, 65535)
TC_INT_TRAITS(unsigned, unsigned, false, 0u, 4294967295u)
TC_INT_TRAITS(unsigned long long, unsigned long long, false, 0ull, 18446744073709551615ull)
#undef TC_INT_TRAITS

// 8/16-bit operands: the operation runs as 32-bit PTX and the conversion back wraps it. NVVM
// otherwise narrows it to a 16-bit instruction (neg.s16, add.s16, ...), whose result ptxas of
// CUDA 13.0 keeps in a 32-bit register as if it were already sign-extended: -(-32768) reached a
// later `>> 15` and min() as +32768 (fuzz seeds 710958, 713708; as with abs.s16 below).
template <class T> TC_DEVICE constexpr bool narrow_int() { return sizeof(T) < 4; }
#define TC_WRAP_OP(NAME, OP, PTX)                                                                 \
  template <class T> TC_DEVICE T NAME(T a, T b) {                                                 \
    typedef typename IntTraits<T>::U U;                                                           \
    if constexpr (narrow_int<T>()) {                                                              \
      unsigned r;                                                                                 \
      asm(PTX " %0, %1, %2;" : "=r"(r) : "r"(U(a)), "r"(U(b)));                                   \
      return T(r);                                                                                \
    }                                                                                             \
    return T(U(a) OP U(b));                                                                       \
  }
TC_WRAP_OP(wrap_add, +, "add.u32")
TC_WRAP_OP(wrap_sub, -, "sub.u32")
TC_WRAP_OP(wrap_mul, *, "mul.lo.u32")
#undef TC_WRAP_OP
template <class T> TC_DEVICE T wrap_abs(T a) { return a < T(0) ? wrap_sub(T(0), a) : a; }
// 8/16-bit: a 32-bit abs, wrapped back by the conversion. The generic form becomes PTX `abs.s16`,
// which ptxas of CUDA 13.0 turns into a 32-bit IABS whose result it then treats as already
// sign-extended: abs(-32768) reached a later max as +32768 (GPU -32768 where max(3, abs) is 3).
template <> TC_DEVICE short wrap_abs<short>(short a) {
  int r;
  asm("abs.s32 %0, %1;" : "=r"(r) : "r"(int(a)));
  return short(r);
}
template <> TC_DEVICE signed char wrap_abs<signed char>(signed char a) {
  int r;
  asm("abs.s32 %0, %1;" : "=r"(r) : "r"(int(a)));
  return (signed char)r;
}
// Shifts by a count outside [0, bits): << gives 0, >> gives the sign (0 or -1), like numpy and
// like PTX shl/shr, which clamp the count.
template <class T, class S> TC_DEVICE T shl(T a, S n) {
  typedef typename IntTraits<T>::U U;
  return (unsigned long long)(long long)n < IntTraits<T>::bits ? T(U(a) << n) : T(0);
}
template <class T, class S> TC_DEVICE T shr(T a, S n) {
  if ((unsigned long long)(long long)n < IntTraits<T>::bits) return T(a >> n);
  if constexpr (IntTraits<T>::is_signed) return a < T(0) ? T(-1) : T(0);
  return T(0);
}

// `/` of integers truncates toward zero (C); MIN / -1 wraps to MIN instead of trapping.
template <class T> TC_DEVICE T truncdiv(T a, T b) {
  if constexpr (IntTraits<T>::is_signed) {
    if (b == T(-1)) return wrap_sub(T(0), a);
  }
  return T(a / b);
}
// `//` and `%`: floor division and modulo (Python, TVM floordiv/floormod) for integers; for
// floats floor(a / b) and a - floor(a / b) * b, each step rounded (no fma contraction).
template <class T> TC_DEVICE T floordiv(T a, T b) {
  if constexpr (IntTraits<T>::is_signed) {
    if (b == T(-1)) return wrap_sub(T(0), a);
    const T q = T(a / b), r = T(a % b);
    return (r != 0 && ((r ^ b) < 0)) ? T(q - 1) : q;
  }
  return T(a / b);
}
template <class T> TC_DEVICE T floormod(T a, T b) {
  if constexpr (IntTraits<T>::is_signed) {
    if (b == T(-1)) return T(0);
    const T r = T(a % b);
    return (r != 0 && ((r ^ b) < 0)) ? T(r + b) : r;
  }
  return T(a % b);
}
template <> TC_DEVICE float floordiv<float>(float a, float b) { return floorf(__fdiv_rn(a, b)); }
template <> TC_DEVICE float floormod<float>(float a, float b) {
  return __fsub_rn(a, __fmul_rn(floorf(__fdiv_rn(a, b)), b));
}
template <> TC_DEVICE double floordiv<double>(double a, double b) { return floor(__ddiv_rn(a, b)); }
template <> TC_DEVICE double floormod<double>(double a, double b) {
  return __dsub_rn(a, __dmul_rn(floor(__ddiv_rn(a, b)), b));
}
// 16-bit floats: computed in float32 and rounded once (numpy's and torch's rule), so that the
// product floor(a / b) * b cannot overflow where the result is finite (fuzz seed 723518:
// -45248 % 35968 was inf in half steps, 26688 here).
template <> TC_DEVICE __half floordiv<__half>(__half a, __half b) {
  return __float2half_rn(floordiv<float>(__half2float(a), __half2float(b)));
}
template <> TC_DEVICE __half floormod<__half>(__half a, __half b) {
  return __float2half_rn(floormod<float>(__half2float(a), __half2float(b)));
}
#ifndef TC_NO_BF16
template <> TC_DEVICE __nv_bfloat16 floordiv<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(floordiv<float>(__bfloat162float(a), __bfloat162float(b)));
}
template <> TC_DEVICE __nv_bfloat16 floormod<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(floormod<float>(__bfloat162float(a), __bfloat162float(b)));
}
#endif

// T.max / T.min and reduce_max/min: NaN-propagating (numpy.maximum, torch.maximum): if either
// operand is NaN the result is NaN; -0.0 < +0.0 (interp/minmax.py). One instruction on sm_80+
// (max.NaN / min.NaN).
// Integers: CUDA's max/min (IMNMX) on the promoted type; a ternary on 8/16-bit values made ptxas
// spill where the intrinsic did not.
// 32-bit and narrower integers print as PTX max/min whose result passes through an identity
// PRMT on sm_90+. ptxas fuses two dependent min/max into one three-input VIMNMX3 and, where an
// operand is a negation, drops the minus: `min(min(a >> 17, -blockIdx.y), c)` computed
// min(a >> 17, blockIdx.y, c) and `max(max(v, -4 * x), w)` lost its sign (fuzz seeds 700523,
// 2700455, 2702372; ptxas 12.8-13.3, also pytorch/pytorch#190973). The PRMT keeps each min/max
// a two-input VIMNMX (one more instruction; the negation stays an explicit IADD3).
template <class P> TC_DEVICE P unfused_minmax(P r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned u;
  asm("prmt.b32 %0, %1, 0, 0x3210;" : "=r"(u) : "r"(unsigned(r)));
  return P(u);
#else
  return r;
#endif
}
template <class T> TC_DEVICE T maximum(T a, T b) {
  typedef typename IntTraits<T>::P P;
  if constexpr (sizeof(P) == 4 && IntTraits<T>::is_signed) {
    int r;
    asm("max.s32 %0, %1, %2;" : "=r"(r) : "r"(int(a)), "r"(int(b)));
    return T(unfused_minmax<int>(r));
  } else if constexpr (sizeof(P) == 4) {
    return T(unfused_minmax<P>(max(P(a), P(b))));
  }
  return T(max(P(a), P(b)));
}
template <class T> TC_DEVICE T minimum(T a, T b) {
  typedef typename IntTraits<T>::P P;
  if constexpr (sizeof(P) == 4 && IntTraits<T>::is_signed) {
    int r;
    asm("min.s32 %0, %1, %2;" : "=r"(r) : "r"(int(a)), "r"(int(b)));
    return T(unfused_minmax<int>(r));
  } else if constexpr (sizeof(P) == 4) {
    return T(unfused_minmax<P>(min(P(a), P(b))));
  }
  return T(min(P(a), P(b)));
}
template <> TC_DEVICE float maximum<float>(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
template <> TC_DEVICE float minimum<float>(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// (b NaN: the comparisons fail and b is the result; zeros of both signs: -0.0 < +0.0, as the
// f32/f16 instructions order them)
template <> TC_DEVICE double maximum<double>(double a, double b) {
  return (a > b || a != a || (a == b && signbit(b))) ? a : b;
}
template <> TC_DEVICE double minimum<double>(double a, double b) {
  return (a < b || a != a || (a == b && signbit(a))) ? a : b;
}
template <> TC_DEVICE __half maximum<__half>(__half a, __half b) { return __hmax_nan(a, b); }
template <> TC_DEVICE __half minimum<__half>(__half a, __half b) { return __hmin_nan(a, b); }
#ifndef TC_NO_BF16
template <> TC_DEVICE __nv_bfloat16 maximum<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hmax_nan(a, b);
}
template <> TC_DEVICE __nv_bfloat16 minimum<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hmin_nan(a, b);
}
#endif

// The identities of reduce_max / reduce_min: the type's lowest / highest value (-inf / +inf).
template <class T> TC_DEVICE T lowest() { return IntTraits<T>::lowest(); }
template <class T> TC_DEVICE T highest() { return IntTraits<T>::highest(); }
template <> TC_DEVICE float lowest<float>() { return -infinity<float>(); }
template <> TC_DEVICE float highest<float>() { return infinity<float>(); }
template <> TC_DEVICE double lowest<double>() { return -infinity<double>(); }
template <> TC_DEVICE double highest<double>() { return infinity<double>(); }

}  // namespace tc
