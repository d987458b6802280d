// Packed low-precision types: sub-byte ints (uint1..uint7, int2..int7) and custom floats
// (float{B}_e{E}m{M}, every float of at most 8 bits but float8_e4m3/e5m2). docs/dtypes.md,
// "On the GPU", is the contract; tilecraft/dtypes (floatcodec.py, convert.py) is the spec.
//
// Storage: element i of a B-bit tensor is bits [i*B, (i+1)*B) of its bit string, least
// significant bit first (it may straddle two bytes / two words). Global and shared tensors are
// `unsigned char*`; a register tensor is `tc::u32 w[ceil(n*B/32)]` (words little-endian).
// Values: `tc::SubInt<B, Signed>` and `tc::SubFloat<E, M>` hold one code; `tc::cast` converts
// them from and to every scalar type with the interpreter's rules:
//   decode: exact (ints sign-extended, floats to float);
//   float/double -> SubFloat: one round to nearest even at the target precision, subnormals
//     included, saturating to +-max (inf too), NaN -> +0 (code 0), -0 kept;
//   float/double -> SubInt: truncate toward zero, saturate, NaN -> 0;  int -> SubInt: wrap.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

template <int B, bool Signed> struct SubInt { u8 code; };
template <int E, int M> struct SubFloat { u8 code; };

template <class T> TC_DEVICE T from_code(u32 c) {
  T r;
  r.code = static_cast<u8>(c);
  return r;
}
template <int B, bool S> TC_DEVICE u32 code(SubInt<B, S> v) { return v.code; }
template <int E, int M> TC_DEVICE u32 code(SubFloat<E, M> v) { return v.code; }

// ---- bit fields of registers (words) and of memory (bytes) --------------------------------------
template <int B> TC_DEVICE constexpr u32 field_mask() { return (1u << B) - 1u; }

// The code of element i of a register tensor (i a constant after unrolling: shifts fold).
template <int B> TC_DEVICE u32 bits_get(const u32* w, int i) {
  const int bit = i * B, k = bit >> 5, off = bit & 31;
  u32 v = w[k] >> off;
  if (off + B > 32) v |= w[k + 1] << (32 - off);
  return v & field_mask<B>();
}

template <int B> TC_DEVICE void bits_set(u32* w, int i, u32 code) {
  const int bit = i * B, k = bit >> 5, off = bit & 31;
  const u32 m = field_mask<B>(), c = code & m;
  w[k] = (w[k] & ~(m << off)) | (c << off);
  if (off + B > 32) {
    const int lo = 32 - off;  // bits of the field in word k
    w[k + 1] = (w[k + 1] & ~(m >> lo)) | (c >> lo);
  }
}

// The code of element i of a global or shared tensor at p (I: int, or long long past 2^31 bits).
template <int B, class I> TC_DEVICE u32 bits_load(const u8* p, I i) {
  const I bit = i * B;
  const u8* q = p + (bit >> 3);
  const int off = static_cast<int>(bit & 7);
  u32 v = static_cast<u32>(q[0]) >> off;
  if (off + B > 8) v |= static_cast<u32>(q[1]) << (8 - off);
  return v & field_mask<B>();
}

// Sets the bits `mask` of the word at w to `bits`, atomically with other threads' updates of the
// word's other bits.
TC_DEVICE void atomic_set_bits(u32* w, u32 mask, u32 bits) {
  u32 old = *w;  // a guess; the compare-and-swap checks it
  while (true) {
    const u32 seen = atomicCAS(w, old, (old & ~mask) | bits);
    if (seen == old) return;
    old = seen;
  }
}

// Element i of the global or shared tensor at p := code, race-free with threads writing other
// bits of the same bytes: a compare-and-swap loop on the aligned 32-bit word(s) holding it.
// The word may reach up to 3 bytes before or after the tensor; the loop writes them back
// unchanged, and they are always mapped: shared tiles take whole 16-byte units of the arena
// (block/smem_plan.py) and device allocations are padded (at least 256-byte granules).
template <int B, class I> TC_DEVICE void bits_store_atomic(u8* p, I i, u32 code) {
  const I bit = i * B;
  const unsigned long long at = reinterpret_cast<unsigned long long>(p + (bit >> 3));
  u32* w = reinterpret_cast<u32*>(at & ~3ull);
  const int sh = static_cast<int>(at & 3) * 8 + static_cast<int>(bit & 7);
  const u64 m = static_cast<u64>(field_mask<B>()) << sh;
  const u64 c = static_cast<u64>(code & field_mask<B>()) << sh;
  atomic_set_bits(w, static_cast<u32>(m), static_cast<u32>(c));
  if (sh + B > 32) atomic_set_bits(w + 1, static_cast<u32>(m >> 32), static_cast<u32>(c >> 32));
}

// ---- scalar codecs ------------------------------------------------------------------------------
template <int B, bool S> TC_DEVICE int decode_int(u32 c) {
  return S ? static_cast<int>(c << (32 - B)) >> (32 - B) : static_cast<int>(c & field_mask<B>());
}

template <int E, int M> TC_DEVICE float decode_float(u32 c) {
  constexpr int bias = (1 << (E - 1)) - 1;
  const u32 sign = (c >> (E + M)) & 1u, exp = (c >> M) & ((1u << E) - 1u);
  const u32 man = c & ((1u << M) - 1u);
  // exp == 0: man * 2^(1 - bias - M), a normal float times an exact power of two
  const float sub = __uint2float_rn(man) * __int_as_float((127 + 1 - bias - M) << 23);
  const u32 mag = exp == 0 ? __float_as_uint(sub) : ((exp - bias + 127) << 23) | (man << (23 - M));
  return __uint_as_float(mag | (sign << 31));
}

// |x| = sig * 2^e2 (sig < 2^P, P the significand bits) -> the magnitude code of E, M rounded to
// nearest even (the identity of floatcodec.py: with q the binade clamped to the subnormal floor,
// the truncated code is (q + bias - 1) * 2^M + floor(|x| / 2^(q - M))), saturated to +-max.
template <int E, int M, class U> TC_DEVICE u32 round_magnitude(U sig, int binade, int e2) {
  constexpr int bias = (1 << (E - 1)) - 1, emin = 1 - bias;
  constexpr u32 max_code = (1u << (E + M)) - 1u;
  const int q = binade > emin ? binade : emin;
  int shift = q - M - e2;  // >= 1: the target has fewer significand bits than float/double
  const int width = static_cast<int>(sizeof(U) * 8) - 1;
  shift = shift < width ? shift : width;
  const U whole = sig >> shift, rest = sig & ((U(1) << shift) - 1), half = U(1) << (shift - 1);
  long long mag = static_cast<long long>(q + bias - 1) * (1 << M) + static_cast<long long>(whole);
  mag += (rest > half || (rest == half && (mag & 1))) ? 1 : 0;
  return mag > static_cast<long long>(max_code) ? max_code : static_cast<u32>(mag);
}

template <int E, int M> TC_DEVICE u32 encode_float(float x) {
  const u32 u = __float_as_uint(x), a = u & 0x7fffffffu, sign = u >> 31;
  if (a > 0x7f800000u) return 0u;  // NaN -> +0 (custom floats have no NaN)
  const int e = static_cast<int>(a >> 23);
  const u32 sig = e == 0 ? (a & 0x7fffffu) : ((a & 0x7fffffu) | 0x800000u);
  const u32 mag = round_magnitude<E, M, u32>(sig, e == 0 ? -126 : e - 127, (e == 0 ? 1 : e) - 150);
  return mag | (sign << (E + M));
}

template <int E, int M> TC_DEVICE u32 encode_float(double x) {
  const u64 u = static_cast<u64>(__double_as_longlong(x)), a = u & 0x7fffffffffffffffull;
  const u32 sign = static_cast<u32>(u >> 63);
  if (a > 0x7ff0000000000000ull) return 0u;
  const int e = static_cast<int>(a >> 52);
  const u64 frac = a & 0xfffffffffffffull;
  const u64 sig = e == 0 ? frac : (frac | 0x10000000000000ull);
  const u32 mag = round_magnitude<E, M, u64>(sig, e == 0 ? -1022 : e - 1023,
                                             (e == 0 ? 1 : e) - 1075);
  return mag | (sign << (E + M));
}

// float/double -> B-bit int: truncate toward zero, saturate, NaN -> 0 (the codes).
template <int B, bool S> TC_DEVICE u32 saturate_int(float x) {
  constexpr int lo = S ? -(1 << (B - 1)) : 0, hi = S ? (1 << (B - 1)) - 1 : (1 << B) - 1;
  const int v = x != x ? 0 : __float2int_rz(x);
  return static_cast<u32>(v < lo ? lo : (v > hi ? hi : v)) & field_mask<B>();
}
template <int B, bool S> TC_DEVICE u32 saturate_int(double x) {
  constexpr int lo = S ? -(1 << (B - 1)) : 0, hi = S ? (1 << (B - 1)) - 1 : (1 << B) - 1;
  const int v = x != x ? 0 : __double2int_rz(x);
  return static_cast<u32>(v < lo ? lo : (v > hi ? hi : v)) & field_mask<B>();
}

// ---- tc::cast -----------------------------------------------------------------------------------
// A source's value as a real number, exactly: float for <= 16-bit types, double for 32/64-bit
// ints and double (so an int32 rounds once, as the interpreter's float64 conversion does).
template <class T> struct Real {
  typedef float type;
  TC_DEVICE static float get(T x) { return static_cast<float>(x); }
};
#define TC_REAL(T, R)                                                                          \
  template <> struct Real<T> {                                                                 \
    typedef R type;                                                                            \
    TC_DEVICE static R get(T x) { return static_cast<R>(x); }                                  \
  };
TC_REAL(double, double)
TC_REAL(int, double)
TC_REAL(unsigned, double)
TC_REAL(long long, double)
TC_REAL(unsigned long long, double)
#undef TC_REAL
template <> struct Real<__half> {
  typedef float type;
  TC_DEVICE static float get(__half x) { return __half2float(x); }
};
#ifndef TC_NO_BF16
template <> struct Real<__nv_bfloat16> {
  typedef float type;
  TC_DEVICE static float get(__nv_bfloat16 x) { return __bfloat162float(x); }
};
#endif

// From a standard type: ints wrap, floats truncate and saturate.
template <int B, bool S, bool FromInt> struct ToSubInt;
template <int B, bool S> struct ToSubInt<B, S, true> {
  template <class F> TC_DEVICE static SubInt<B, S> run(F x) {
    return from_code<SubInt<B, S> >(static_cast<u32>(x) & field_mask<B>());
  }
};
template <int B, bool S> struct ToSubInt<B, S, false> {
  template <class F> TC_DEVICE static SubInt<B, S> run(F x) {
    return from_code<SubInt<B, S> >(saturate_int<B, S>(Real<F>::get(x)));
  }
};

template <int B, bool S, class From> struct Cast<SubInt<B, S>, From> {
  TC_DEVICE static SubInt<B, S> run(From x) { return ToSubInt<B, S, IsInt<From>::value>::run(x); }
};
template <int E, int M, class From> struct Cast<SubFloat<E, M>, From> {
  TC_DEVICE static SubFloat<E, M> run(From x) {
    return from_code<SubFloat<E, M> >(encode_float<E, M>(Real<From>::get(x)));
  }
};
template <class To, int B, bool S> struct Cast<To, SubInt<B, S> > {
  TC_DEVICE static To run(SubInt<B, S> x) { return Cast<To, int>::run(decode_int<B, S>(x.code)); }
};
template <class To, int E, int M> struct Cast<To, SubFloat<E, M> > {
  TC_DEVICE static To run(SubFloat<E, M> x) {
    return Cast<To, float>::run(decode_float<E, M>(x.code));
  }
};
// between packed types (these would match two of the above)
template <int B, bool S, int B2, bool S2> struct Cast<SubInt<B, S>, SubInt<B2, S2> > {
  TC_DEVICE static SubInt<B, S> run(SubInt<B2, S2> x) {
    return from_code<SubInt<B, S> >(static_cast<u32>(decode_int<B2, S2>(x.code)) &
                                    field_mask<B>());
  }
};
template <int B, bool S, int E, int M> struct Cast<SubInt<B, S>, SubFloat<E, M> > {
  TC_DEVICE static SubInt<B, S> run(SubFloat<E, M> x) {
    return from_code<SubInt<B, S> >(saturate_int<B, S>(decode_float<E, M>(x.code)));
  }
};
template <int E, int M, int B, bool S> struct Cast<SubFloat<E, M>, SubInt<B, S> > {
  TC_DEVICE static SubFloat<E, M> run(SubInt<B, S> x) {
    return from_code<SubFloat<E, M> >(encode_float<E, M>(static_cast<float>(
        decode_int<B, S>(x.code))));
  }
};
template <int E, int M, int E2, int M2> struct Cast<SubFloat<E, M>, SubFloat<E2, M2> > {
  TC_DEVICE static SubFloat<E, M> run(SubFloat<E2, M2> x) {
    return from_code<SubFloat<E, M> >(encode_float<E, M>(decode_float<E2, M2>(x.code)));
  }
};

}  // namespace tc
