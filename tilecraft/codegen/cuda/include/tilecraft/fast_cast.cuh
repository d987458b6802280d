// tilecraft device header: fast in-register casts of low-precision codes to f16 / bf16.
//
// A thread's N elements of a b-bit type are one bit string (element i in bits [i*b, (i+1)*b),
// least significant first, 32-bit words little-endian: docs/dtypes.md), held in a u32 word array
// (sub-byte types) or a byte array (8-bit types); the results are N 16-bit values (two per word).
// Every function converts all N elements exactly as the interpreter does (tilecraft.dtypes):
//
//   fast_cast_int<B, SIGNED, BF16, N, Z, ILV, S>(src, dst)  uint1..uint8, int2..int8 (bf16: B <=
//       7 by the 0x4300 magic; 8-bit ints through f32), minus the integer Z (a zero point: it
//       joins the subtrahend the magic needs anyway, so `cast(x) - Z` costs what `cast(x)` does),
//       times 2^S (1-, 2-, 4-bit codes: the trick's HFMA2 scales for free; a bit plane's weight);
//       ILV (B = 1, 2, 4, whole words): each source word holds element j at code position
//       (j % 2) * 16/B + j / 2 (layout/permute.py `interleave_words`), results in natural order
//   fast_cast_int_z<B, N, ILV, BF16>(src, dst, z)  uint1 / uint2 / uint4 / uint8 -> f16 (all but
//       uint8 -> bf16) minus a zero point per element (z[i], a whole number below 128 / 16 for
//       uint1 to f16 / bf16, 16 / 32 for uint2, 64 / 128 for uint4, 1024 for uint8), at about
//       fast_cast_int's cost
//   fast_cast_planes<BA, BB, BC, BF16, N, T>(a, b, c, dst)  a * 2^(BB + BC) + b * 2^BC + c - T
//       from the interleaved words of 1-, 2- or 4-bit planes (the 3-, 5-, 6-bit ints' storage:
//       quant/qmm.py), each pair's fields OR'd under the magic number, one subtraction
//   fast_cast_float_planes<E, M, BF16, N, S>(hi, lo, dst)  6-bit floats (every code finite)
//       stored as interleaved uint2 + uint4 planes (quant/qmm.py), times 2^S (S <= 0)
//   fast_cast_bytes<B, BF16, N, T, P0, P1, P2>(a, b, c, dst)  B-bit codes in bytes (B = 6, 7),
//       minus T: each 32 codes in 4 B bytes (P0 + P1 + P2 of them from a, b, c), 4 B codes in
//       the bytes' low bits, the rest spread over their top bits (the 6- and 7-bit ints'
//       storage: quant/qmm.py, dtypes/packing.py `pack_bytes`)
//   fast_cast_nibbles3<BF16, N, T, P0, P1, P2>(a, b, c, dst)  3-bit codes in nibbles, minus T:
//       each 32 codes in 3 words, 24 in the nibbles' low bits (interleaved as the 4-bit trick
//       reads them), 8 spread over their top bits (the 3-bit ints' storage: quant/qmm.py)
//   fast_cast_bytes_z<B, BF16, N, P0, P1, P2>(a, b, c, zs, dst)  the same minus magic + T per
//       pair from zs (each half its own: zero points per element, whole numbers, T < 128)
//   fast_cast_nibbles3_z<BF16, N, T, P0, P1, P2>(a, b, c, z, dst)  3-bit codes in nibbles minus T
//       + z[i] for result i (zero points per element, whole numbers, T + z[i] < 64 f16 / 128 bf16)
//   fast_cast_bytes_float<B, E, BF16, N, S, P0, P1, P2>(a, b, c, dst)  B-bit floats with 2 or 3
//       mantissa bits (float6_e3m2 / e2m3, float7_e4m2 / e3m3; every code finite) in bytes, each
//       byte's sign at bit 7 (`pack_bytes(..., sign_at_top=True)`), times 2^S (S <= 0)
//   fast_cast_e4m3_cvt<N>(src, dst)  float8_e4m3 -> f16 by cvt.rn.f16x2.e4m3x2 (sm_89+), NaNs as
//       fast_cast_float makes them (a thread with a NaN code casts again by it)
//   fast_cast_float<E, M, SPECIAL, BF16, N, ILV, S>(src, dst) 1 + E + M bit floats (f16: E <= 4,
//       or float8_e5m2; bf16: every E), SPECIAL 0: every code finite (custom floats), 1: only the
//       all-ones magnitude is NaN (float8_e4m3), 2: IEEE (float8_e5m2); times 2^S (S <= 0, down
//       to minus the biases' difference, SPECIAL 0: the trick's multiply scales for free, and
//       is gone at the bottom); ILV: 4-bit floats with SPECIAL 0 in interleaved words (as the
//       ints). ILV to f16: per word two words with each code's sign moved next to where its
//       magnitude goes (SHF, LOP3 each), then per pair SHF, LOP3 (and HMUL2 unless S is the
//       bottom); to bf16 per pair the magnitudes shifted in place and masked, times +-2^(bias
//       difference) with the sign OR'd in (SHF, LOP3 x 2, HMUL2)
//
// The tricks (instructions per 2 or 8 elements, counted in SASS by tests/codegen):
//   u8/i8 -> f16   PRMT each byte under 0x64 (1024 + x), one HSUB2 per two
//   u4/i4 -> f16   LOP3 (w & 0x000F000F) | 0x64006400 and (w & 0x00F000F0) | 0x64006400 on w
//                  and w >> 8: low nibbles 1024 + x (HSUB2), high ones 1024 + 16x (HFMA2 by
//                  1/16 - 64); four PRMTs put the halves in order (none when ILV)
//   u1, u2/i2      codes k and k + 16/b of a word in its halves (SHF + LOP3 under the magic),
//                  one subtraction per pair, PRMTs put them in order
//   other ints     each pair of fields in a word's halves, OR the magic, one subtraction
//   floats         the code at the top of each 16-bit half, shifted right by E_dst - E (sign
//                  kept by a mask), one multiply by 2^(bias_dst - bias): exact (subnormals too)
// Signed ints are offset to unsigned first (x ^ 2^(b-1)) and the offset joins the subtrahend, as
// does Z: T = offset + Z must lie in [0, 64) for 4 bits to f16 (the high nibbles' -(64 + T) keeps
// a 1/16 ulp), [0, 128) for 1..7 bits to bf16 and [0, 1024) otherwise, so (magic + x) - (magic +
// T) is exact (8 bits to bf16: exact in f32, then rounded once, as bf16 arithmetic rounds).
// bf16 arithmetic is fma.rn.bf16x2 (sm_80; sub/mul.bf16x2 are sm_90 only). float8 NaNs become the
// quiet NaN with the sign kept (0x7E00 f16, 0x7FC0 bf16); e5m2 infinities stay infinite.
#pragma once

#include "tilecraft/common.cuh"

namespace tc {
namespace fast {

// prmt.b32 in its default mode: selector nibble n picks byte n of the result from the 8 bytes of
// {b, a} (0-3: a); bit 3 of a nibble replicates that byte's top bit instead
TC_DEVICE u32 prmt(u32 a, u32 b, u32 sel) {
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// any function of a, b, c bit by bit in one LOP3: LUT = F(0xF0, 0xCC, 0xAA) (written as PTX:
// from C, two constants or a select make ptxas split it in two)
template <int LUT>
TC_DEVICE u32 lop3(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
  return d;
}

// (a & b) | c
TC_DEVICE u32 and_or(u32 a, u32 b, u32 c) { return lop3<0xEA>(a, b, c); }

// the bits of a where c is set, of b elsewhere
TC_DEVICE u32 bit_select(u32 a, u32 b, u32 c) { return lop3<0xE4>(a, b, c); }

TC_DEVICE u32 sub_f16x2(u32 a, u32 b) {
  u32 d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

TC_DEVICE u32 mul_f16x2(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

TC_DEVICE u32 fma_f16x2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

TC_DEVICE u32 fma_bf16x2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// a - c per half, c given per half in both halves (bf16: a * 1.0 + (-c))
template <bool BF16>
TC_DEVICE u32 sub2(u32 a, u32 c) {
  return BF16 ? fma_bf16x2(a, 0x3F803F80u, c ^ 0x80008000u) : sub_f16x2(a, c);
}

// a * c per half (bf16: a * c + (-0.0), which keeps the sign of a zero product)
template <bool BF16>
TC_DEVICE u32 mul2(u32 a, u32 c) {
  return BF16 ? fma_bf16x2(a, c, 0x80008000u) : mul_f16x2(a, c);
}

// 0xFFFF in each half whose bit 15 is set in x, else 0 (PRMT sign replication)
TC_DEVICE u32 half_mask(u32 x) { return prmt(x, 0u, 0xBB99u); }

// word k of the bit string of N B-bit codes at src (bytes past the codes are not read)
template <int B, int N>
TC_DEVICE u32 word(const void* src, int k) {
  constexpr int nbytes = (N * B + 7) / 8;
  u32 w = 0;
  if (4 * k + 4 <= nbytes) {  // (memcpy: the arrays are of other types; it stays in registers)
    memcpy(&w, static_cast<const u8*>(src) + 4 * k, 4);
    return w;
  }
  const u8* b = static_cast<const u8*>(src);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (4 * k + j < nbytes) w |= u32(b[4 * k + j]) << (8 * j);
  return w;
}

// code i (a compile-time constant once unrolled) of the bit string, in the low B bits
template <int B, int N>
TC_DEVICE u32 field(const void* src, int i) {
  const int p = i * B, k = p >> 5, o = p & 31;
  u32 x = word<B, N>(src, k) >> o;
  if (o + B > 32) x = __funnelshift_r(word<B, N>(src, k), word<B, N>(src, k + 1), o);
  return x & ((1u << B) - 1u);
}

// results j*2 and j*2+1 (one 16-bit value when j*2+1 is past the end)
template <int N>
TC_DEVICE void put2(void* dst, int j, u32 v) {
  memcpy(static_cast<u8*>(dst) + 4 * j, &v, 2 * j + 1 < N ? 4 : 2);  // (little-endian)
}

// ---- integers ---------------------------------------------------------------------------------
// the f16 (bf16) bits of the whole number v, |v| < 2048 (256): exact
template <bool BF16>
TC_HOST_DEVICE constexpr u32 whole_bits(int v) {
  constexpr int M = BF16 ? 7 : 10, bias = BF16 ? 127 : 15;
  const u32 sign = v < 0 ? 1u << 15 : 0u;
  const int a = v < 0 ? -v : v;
  int e = 0;
  while ((2 << e) <= a) ++e;  // 2^e <= a < 2^(e + 1)
  return a == 0 ? sign : sign | (u32(e + bias) << M) | (u32(a - (1 << e)) << (M - e));
}

// a * b + c per half
template <bool BF16>
TC_DEVICE u32 fma2(u32 a, u32 b, u32 c) {
  return BF16 ? fma_bf16x2(a, b, c) : fma_f16x2(a, b, c);
}

// pairs first..: each field biased to unsigned, under the magic (f16 1024, bf16 128: ulp 1),
// times 2^S (S > 0: one HFMA2, (magic + x) 2^S - (magic + T) 2^S, exact as in narrow_word)
template <int B, bool SIGNED, bool BF16, int N, int Z, int S = 0>
TC_DEVICE void int_pairs(const void* src, void* dst, int first) {
  constexpr int MB = BF16 ? 7 : 10, magic_value = BF16 ? 128 : 1024;
  constexpr u32 magic = BF16 ? 0x4300u : 0x6400u, off = SIGNED ? 1u << (B - 1) : 0u;
  constexpr u32 sub = (magic + off + Z) * 0x10001u;
  constexpr u32 up = (u32((BF16 ? 127 : 15) + S) << MB) * 0x10001u;  // 2^S
  constexpr u32 add =  // -(magic + T) 2^S
      S == 0 ? 0u : (whole_bits<BF16>(-magic_value - int(off) - Z) + (S << MB)) * 0x10001u;
#pragma unroll
  for (int j = first; j < (N + 1) / 2; ++j) {
    const u32 x = field<B, N>(src, 2 * j) ^ off;
    const u32 y = 2 * j + 1 < N ? field<B, N>(src, 2 * j + 1) ^ off : 0u;
    const u32 m = x | (y << 16) | (magic * 0x10001u);
    put2<N>(dst, j, S == 0 ? sub2<BF16>(m, sub) : fma2<BF16>(m, up, add));
  }
}

// 4 bytes of w -> f16: PRMT under 0x64, subtract 1024 + T (T = 128 for signed, after
// w ^ 0x80808080, plus Z)
template <bool SIGNED, int T>
TC_DEVICE void u8x4_f16(u32 w, u32* out) {
  constexpr u32 mag = (0x6400u + T) * 0x10001u;
  if (SIGNED) w ^= 0x80808080u;
  out[0] = sub_f16x2(prmt(w, 0x64u, 0x4140u), mag);
  out[1] = sub_f16x2(prmt(w, 0x64u, 0x4342u), mag);
}

// 4 bytes of w -> bf16: each byte in the mantissa of 2^23 (an f32), 2^23 + T subtracted, two
// rounded (exactly) to a bf16x2
template <bool SIGNED, int T>
TC_DEVICE void u8x4_bf16(u32 w, u32* out) {
  constexpr float big = 8388608.0f + T;
  if (SIGNED) w ^= 0x80808080u;
  float f[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) f[k] = __uint_as_float(prmt(w, 0x4B000000u, 0x7650u | k)) - big;
  out[0] = pack_bfloat2(f[0], f[1]);
  out[1] = pack_bfloat2(f[2], f[3]);
}

// 8 nibbles of w -> f16 (the 0x64006400 LOP3 trick, halves reordered by PRMT)
template <bool SIGNED, int T, bool ILV, int S>
TC_DEVICE void u4x8_f16(u32 w, u32* out) {
  constexpr u32 lo = (0x6400u + T) * 0x10001u;       // 1024 + T
  constexpr u32 hi = (0xD400u + 16 * T + (S << 10)) * 0x10001u;  // -(64 + T) 2^S (ulp 1/16 at 64)
  if (SIGNED) w ^= 0x88888888u;
  const u32 v = w >> 8;
  u32 h0 = and_or(w, 0x000F000Fu, 0x64006400u), h1 = and_or(w, 0x00F000F0u, 0x64006400u);
  u32 h2 = and_or(v, 0x000F000Fu, 0x64006400u), h3 = and_or(v, 0x00F000F0u, 0x64006400u);
  if (S == 0) {
    h0 = sub_f16x2(h0, lo);  // (e0, e4)
    h2 = sub_f16x2(h2, lo);  // (e2, e6)
  } else {  // (1024 + x) 2^S - (1024 + T) 2^S
    constexpr u32 up = (0x3C00u + (S << 10)) * 0x10001u, lo_s = (lo + (S << 10) * 0x10001u);
    h0 = fma_f16x2(h0, up, lo_s | 0x80008000u);
    h2 = fma_f16x2(h2, up, lo_s | 0x80008000u);
  }
  constexpr u32 sixteenth = (0x2C00u + (S << 10)) * 0x10001u;  // 2^(S - 4)
  h1 = fma_f16x2(h1, sixteenth, hi);  // (1024 + 16x) / 16 - 64: (e1, e5)
  h3 = fma_f16x2(h3, sixteenth, hi);  // (e3, e7)
  if (ILV) {  // codes k, k + 4 are elements 2k, 2k + 1
    out[0] = h0, out[1] = h1, out[2] = h2, out[3] = h3;
    return;
  }
  out[0] = prmt(h0, h1, 0x5410u);
  out[1] = prmt(h2, h3, 0x5410u);
  out[2] = prmt(h0, h1, 0x7632u);
  out[3] = prmt(h2, h3, 0x7632u);
}

// 8 nibbles of w -> bf16: each nibble shifted down under 0x4300 (128 + x), one HFMA2 per pair
template <bool SIGNED, int T, bool ILV, int S>
TC_DEVICE void u4x8_bf16(u32 w, u32* out) {
  constexpr u32 mag = (0x4300u + T + (S << 7)) * 0x10001u;  // (128 + T) 2^S
  constexpr u32 up = (0x3F80u + (S << 7)) * 0x10001u;       // 2^S
  if (SIGNED) w ^= 0x88888888u;
  u32 h[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    h[k] = fma_bf16x2(and_or(w >> (4 * k), 0x000F000Fu, 0x43004300u), up, mag ^ 0x80008000u);
  if (ILV) {
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = h[k];
    return;
  }
  out[0] = prmt(h[0], h[1], 0x5410u);  // h[k] holds (e_k, e_{k+4})
  out[1] = prmt(h[2], h[3], 0x5410u);
  out[2] = prmt(h[0], h[1], 0x7632u);
  out[3] = prmt(h[2], h[3], 0x7632u);
}


// 32 / B codes of w (B = 1, 2) -> f16 / bf16: codes k and k + 16 / B in the halves of one word.
// A field j places up in a word the magic reaches (B * j + B <= 10 f16 / 7 bf16 mantissa bits)
// is masked under the magic in place (LOP3: magic + x * 2^(B j)) and scaled back by one HFMA2
// (* 2^-(B j), - magic * 2^-(B j) - T): 2 instructions a pair, one SHF per further window;
// PRMTs put the halves in order (none when ILV)
template <int B, bool SIGNED, bool BF16, int Z, bool ILV, int S>
TC_DEVICE void narrow_word(u32 w, u32* out) {
  constexpr int H = 16 / B;  // pairs per word
  constexpr int MB = BF16 ? 7 : 10, W = MB / B;  // codes one shift of w reaches
  constexpr int magic_value = BF16 ? 128 : 1024, T = (SIGNED ? 1 << (B - 1) : 0) + Z;
  constexpr u32 magic = BF16 ? 0x4300u : 0x6400u;
  if (SIGNED) w ^= 0xAAAAAAAAu;  // (int2: the sign bit of every field)
  u32 h[H];
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const int j = k % W, shift = B * j;
    const u32 m = and_or(w >> (B * (k - j)), (((1u << B) - 1u) << shift) * 0x10001u,
                         magic * 0x10001u);
    h[k] = j == 0 && S == 0
               ? sub2<BF16>(m, (magic + T) * 0x10001u)
               : fma2<BF16>(m, (u32((BF16 ? 127 : 15) + S - shift) << MB) * 0x10001u,
                            (whole_bits<BF16>(-(magic_value >> shift) - T) + (S << MB)) *
                                0x10001u);  // (x - T) 2^S: a power of two keeps it exact
  }
#pragma unroll
  for (int j = 0; j < H; ++j)
    out[j] = ILV ? h[j]
                 : 2 * j < H ? prmt(h[2 * j], h[2 * j + 1], 0x5410u)
                             : prmt(h[2 * j - H], h[2 * j + 1 - H], 0x7632u);
}

template <int B, bool SIGNED, bool BF16, int N, int Z = 0, bool ILV = false, int S = 0>
TC_DEVICE void fast_cast_int(const void* src, void* dst) {
  static_assert(S >= 0 && S <= (BF16 ? 7 : 5) && (S == 0 || B == 1 || B == 2 || B == 4),
                "a power-of-two scale 2^S (S <= 5 f16, 7 bf16: (magic + T) 2^S stays finite) "
                "of 1-, 2- or 4-bit codes");
  static_assert(B >= 1 && B <= 8, "1..8-bit integers");
  static_assert(!ILV || ((B == 1 || B == 2 || B == 4) && N % (32 / B) == 0),
                "interleaved words: 1-, 2- or 4-bit codes, whole words");
  constexpr int T = (SIGNED ? 1 << (B - 1) : 0) + Z;  // subtracted with the magic
  static_assert(T >= 0 && T < (B == 4 && !BF16 ? 64 : BF16 && B < 8 ? 128 : 1024),
                "the zero point must keep (magic + x) - (magic + T) exact");
  constexpr int per = B == 8 || B == 4 || B == 2 || B == 1 ? 32 / B : 0;  // per whole word
  constexpr int words = per ? N / per : 0;
#pragma unroll
  for (int k = 0; k < words; ++k) {
    const u32 w = word<B, N>(src, k);
    u32 out[16];  // per / 2 result words
    if (B == 8) BF16 ? u8x4_bf16<SIGNED, T>(w, out) : u8x4_f16<SIGNED, T>(w, out);
    else if (B == 4)
      BF16 ? u4x8_bf16<SIGNED, T, ILV, S>(w, out) : u4x8_f16<SIGNED, T, ILV, S>(w, out);
    else narrow_word<B, SIGNED, BF16, Z, ILV, S>(w, out);
#pragma unroll
    for (int q = 0; q < per / 2; ++q) put2<N>(dst, k * per / 2 + q, out[q]);
  }
  if (B == 8 && BF16) {  // the tail: 128 + x overflows the bf16 magic's binade, so through f32
#pragma unroll
    for (int i = words * per; i < N; ++i) {
      const u32 x = field<B, N>(src, i) ^ (SIGNED ? 0x80u : 0u);
      const float f = __uint_as_float(0x4B000000u | x) - (8388608.0f + T);
      const u16 h = static_cast<u16>(pack_bfloat2(f, 0.0f));
      memcpy(static_cast<u8*>(dst) + 2 * i, &h, 2);
    }
  } else {
    int_pairs<B, SIGNED, BF16, N, Z, S>(src, dst, words * per / 2);
  }
}

// 32 / B codes of w (B = 1, 2) minus a zero point per code (e[i] for result i, whole numbers
// below 2^(m - B (W - 1)), `narrow_z_limit`; m: 10 f16 / 7 bf16 mantissa bits; W fields a
// window): each pair's fields masked in place under a magic whose exponent makes a field j
// places up exactly 2^(m - B j) + x (LOP3), then 2^(m - B j) + z subtracted, whose bits are
// linear in z (0x6400-style: the exponent's, plus z << B j): 2 instructions a pair as in
// narrow_word. The subtrahends are integer work shared between words: one per zero and field
// j; W = 4 (2 to bf16 for uint2) keeps them few where pairs alternate between two zeros (the
// mma A operand's rows in the quantized matmul: 8 a 16-row tile) for 2 more SHF a word;
// PRMTs put the halves in order (none when ILV)
template <int B, bool BF16>
TC_HOST_DEVICE constexpr int narrow_z_window() { return B == 2 && BF16 ? 2 : 4; }

template <int B, bool BF16>
TC_HOST_DEVICE constexpr int narrow_z_limit() {
  return 1 << ((BF16 ? 7 : 10) - B * (narrow_z_window<B, BF16>() - 1));
}

template <int B, bool BF16, bool ILV>
TC_DEVICE void narrow_word_z(u32 w, const u32* e, u32* out) {
  constexpr int H = 16 / B, MB = BF16 ? 7 : 10, W = narrow_z_window<B, BF16>();
  constexpr int bias = BF16 ? 127 : 15;
  u32 h[H];
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const int j = k % W, shift = B * j;
    const u32 top = u32(bias + MB - shift) << MB;  // 2^(MB - shift): x lands in its units
    const u32 m = and_or(w >> (B * (k - j)), (((1u << B) - 1u) << shift) * 0x10001u,
                         top * 0x10001u);
    const int a = ILV ? 2 * k : k, b = ILV ? 2 * k + 1 : k + H;  // (the halves' results)
    const u32 zz = e[a] | (e[b] << 16);  // (one per zero: shared by its fields)
    h[k] = sub2<BF16>(m, top * 0x10001u + (zz << shift));
  }
#pragma unroll
  for (int j = 0; j < H; ++j)
    out[j] = ILV ? h[j]
                 : 2 * j < H ? prmt(h[2 * j], h[2 * j + 1], 0x5410u)
                             : prmt(h[2 * j - H], h[2 * j + 1 - H], 0x7632u);
}

// Unsigned 1-, 2-, 4- and 8-bit codes to f16 (to bf16 all but 8-bit) minus a zero point per
// element, z[i] for result i: a whole number with z[i] < 64 (4 bits: the high nibbles' -(64 +
// n)), < 1024 (8 bits), < 128 (4 bits to bf16, whose magic is 128), 1- and 2-bit codes below
// narrow_z_limit. In the magic's binade the f16 bits of a whole number are linear in it
// (1024 + n: 0x6400 + n; -(64 + n): 0xD400 + 16 n), so each pair's subtrahend is the constant's
// bits plus the zeros' and the pairs keep the instruction counts of fast_cast_int (the
// subtrahends, one per distinct pair of zeros, are integer work the compiler shares between
// words). Whole words only.
template <int B, int N, bool ILV, bool BF16 = false>
TC_DEVICE void fast_cast_int_z(const void* src, void* dst, const u32* z) {
  static_assert(B == 1 || B == 2 || B == 4 || B == 8, "1-, 2-, 4- and 8-bit codes");
  static_assert(!BF16 || B <= 4, "bf16: 1-, 2- and 4-bit codes (magic 128: 0x4300 + n)");
  static_assert(N % (32 / B) == 0 && (!ILV || B <= 4),
                "whole words (interleaved: 1, 2, 4 bits)");
  constexpr int per = 32 / B;
#pragma unroll
  for (int k = 0; k < N / per; ++k) {
    const u32 w = word<B, N>(src, k);
    const u32* e = z + k * per;
    u32 out[16];
    if (B <= 2) {
      narrow_word_z<B, BF16, ILV>(w, e, out);
    } else if (BF16) {  // nibbles j and j + 4 under 0x4300, minus (128 + zero) by one HFMA2 each
      u32 h[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int a = ILV ? 2 * j : j, b = ILV ? 2 * j + 1 : j + 4;  // (the halves' results)
        const u32 sub = ((0x4300u + e[a]) | (0x4300u + e[b]) << 16) ^ 0x80008000u;
        h[j] = fma_bf16x2(and_or(w >> (4 * j), 0x000F000Fu, 0x43004300u), 0x3F803F80u, sub);
      }
      if (ILV) {
        out[0] = h[0], out[1] = h[1], out[2] = h[2], out[3] = h[3];
      } else {
        out[0] = prmt(h[0], h[1], 0x5410u);
        out[1] = prmt(h[2], h[3], 0x5410u);
        out[2] = prmt(h[0], h[1], 0x7632u);
        out[3] = prmt(h[2], h[3], 0x7632u);
      }
    } else if (B == 8) {
      out[0] = sub_f16x2(prmt(w, 0x64u, 0x4140u), (0x6400u + e[0]) | (0x6400u + e[1]) << 16);
      out[1] = sub_f16x2(prmt(w, 0x64u, 0x4342u), (0x6400u + e[2]) | (0x6400u + e[3]) << 16);
    } else {
      // the halves of h0..h3: elements (0, 1), (2, 3), (4, 5), (6, 7) interleaved, else
      // (0, 4), (1, 5), (2, 6), (3, 7)
      constexpr int a0 = 0, b0 = ILV ? 1 : 4, a1 = ILV ? 2 : 1, b1 = ILV ? 3 : 5;
      constexpr int a2 = ILV ? 4 : 2, b2 = ILV ? 5 : 6, a3 = ILV ? 6 : 3, b3 = 7;
      const u32 v = w >> 8;
      u32 h0 = and_or(w, 0x000F000Fu, 0x64006400u), h1 = and_or(w, 0x00F000F0u, 0x64006400u);
      u32 h2 = and_or(v, 0x000F000Fu, 0x64006400u), h3 = and_or(v, 0x00F000F0u, 0x64006400u);
      h0 = sub_f16x2(h0, (0x6400u + e[a0]) | (0x6400u + e[b0]) << 16);
      h2 = sub_f16x2(h2, (0x6400u + e[a2]) | (0x6400u + e[b2]) << 16);
      h1 = fma_f16x2(h1, 0x2C002C00u, (0xD400u + 16 * e[a1]) | (0xD400u + 16 * e[b1]) << 16);
      h3 = fma_f16x2(h3, 0x2C002C00u, (0xD400u + 16 * e[a3]) | (0xD400u + 16 * e[b3]) << 16);
      if (ILV) {
        out[0] = h0, out[1] = h1, out[2] = h2, out[3] = h3;
      } else {
        out[0] = prmt(h0, h1, 0x5410u);
        out[1] = prmt(h2, h3, 0x5410u);
        out[2] = prmt(h0, h1, 0x7632u);
        out[3] = prmt(h2, h3, 0x7632u);
      }
    }
#pragma unroll
    for (int q = 0; q < per / 2; ++q) put2<N>(dst, k * per / 2 + q, out[q]);
  }
}

// ---- bit planes -------------------------------------------------------------------------------
// pair k of interleaved words of N B-bit codes (codes 2k and 2k + 1) is at bit B * (k % (16 / B))
// of each half of word k / (16 / B): that word shifted so the pair's fields start at bit S of
// each half (the other bits: junk)
template <int B, int N, int S>
TC_DEVICE u32 pair_at(const void* src, int k) {
  const u32 w = word<B, N>(src, k / (16 / B));
  const int d = S - B * (k % (16 / B));
  return d >= 0 ? w << d : w >> -d;
}

// f16 bits of the whole number n, 0 <= n < 2048, or an even one below 4096 (exact;
// constant-folded where n is constant)
TC_HOST_DEVICE constexpr u32 f16_whole(int n) {
  int e = 0;
  while ((n >> e) > 1) ++e;
  const u32 m = e <= 10 ? u32(n) << (10 - e) : u32(n) >> (e - 10);
  return n == 0 ? 0u : (u32(e + 15) << 10) | (m & 0x3FFu);
}

// sum of the planes a * 2^(BB + BC) + b * 2^BC + c, minus T, in N results from each plane's
// interleaved words (1-, 2-, 4-bit codes, as fast_cast_int's ILV). Two planes to f16 with T <
// 512: each pair's fields masked in place under the magic (LOP3 each; per word two windows of
// it, w << lb and w >> (8 - lb), hold every pair's field between bit lb and the mantissa's
// top, lb = the plane's weight, at least 1), then hi * 2^(BB - p) - (K) and lo * 2^-q + that
// by two HFMA2: 1024 2^(BB - p) + hi 2^BB - K and 1024 2^-q + lo + (...) are whole numbers
// below 2048 (K = 1024 2^(BB - p) + 1024 2^-q + T), so exact. Otherwise: each field shifted
// to its place and OR'd under the magic (SHF + LOP3 a plane), one subtraction of magic + T:
// (magic + n) - (magic + T) = n - T exactly for n < 128 and T below 1024 (f16) or 128
// (bf16). BC = 0: two planes (c is not read).
template <int BA, int BB, int BC, bool BF16, int N, int T = 0>
TC_DEVICE void fast_cast_planes(const void* a, const void* b, const void* c, void* dst) {
  static_assert(BA + BB + BC <= 7 && (T >= 0 && T < (BF16 ? 128 : 1024)),
                "planes of at most 7 bits, a subtrahend the magic keeps exact");
  static_assert(N % (32 / BA) == 0 && N % (32 / BB) == 0 && (BC == 0 || N % (32 / BC) == 0),
                "whole words of every plane");
  constexpr u32 magic = BF16 ? 0x43004300u : 0x64006400u;
  if (!BF16 && BC == 0 && T < 512 && BB <= 2) {  // two planes in place, two HFMA2 a pair
    constexpr int la = BB, lb = 1;  // the lowest bit each plane's fields may sit at
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      const int ja = k % (16 / BA), jb = k % (16 / BB);  // the pair's field in its word
      const u32 wa = word<BA, N>(a, k / (16 / BA)), wb = word<BB, N>(b, k / (16 / BB));
      const bool fa = ja < 8 / BA, fb = jb < 8 / BB;  // in the first window
      const int p = fa ? BA * ja + la : BA * ja - 8 + la, q = fb ? BB * jb + lb : BB * jb - 8 + lb;
      const u32 hi = and_or(fa ? wa << la : wa >> (8 - la), (((1u << BA) - 1u) << p) * 0x10001u,
                            magic);
      const u32 lo = and_or(fb ? wb << lb : wb >> (8 - lb), (((1u << BB) - 1u) << q) * 0x10001u,
                            magic);
      const u32 up = u32(BB - p + 15) << 10;  // 2^(BB - p)
      const u32 kk = 0x8000u | f16_whole((1024 >> (p - BB)) + (1024 >> q) + T);  // -K
      const u32 mid = fma_f16x2(hi, up * 0x10001u, kk * 0x10001u);
      put2<N>(dst, k, fma_f16x2(lo, (u32(15 - q) << 10) * 0x10001u, mid));
    }
    return;
  }
  if (!BF16 && BC == 1 && BA <= 4 && BB <= 2 && T % 2 == 0 && T < 384) {  // 3 planes in place
    constexpr int la = 2, lb = 1, lc = 1;  // (a 4-bit field at 2 or 6, 2-bit 1..7, 1-bit 1..8)
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      const int ja = k % (16 / BA), jb = k % (16 / BB), jc = k % 16;
      const u32 wa = word<BA, N>(a, k / (16 / BA)), wb = word<BB, N>(b, k / (16 / BB));
      const u32 wc = word<1, N>(c, k / 16);
      const bool fa = ja < 8 / BA, fb = jb < 8 / BB, fc = jc < 8;
      const int p = fa ? BA * ja + la : BA * ja - 8 + la;
      const int q = fb ? BB * jb + lb : BB * jb - 8 + lb, r = fc ? jc + lc : jc - 8 + lc;
      const u32 va = and_or(fa ? wa << la : wa >> (8 - la), (((1u << BA) - 1u) << p) * 0x10001u,
                            magic);
      const u32 vb = and_or(fb ? wb << lb : wb >> (8 - lb), (((1u << BB) - 1u) << q) * 0x10001u,
                            magic);
      const u32 vc = and_or(fc ? wc << lc : wc >> (8 - lc), (1u << r) * 0x10001u, magic);
      // a 2^(BB + 1 - p) - K1, + b 2^(1 - q), + c 2^-r: whole numbers below 2048 in magnitude
      // after each HFMA2, so exact (K1 = 1024 (2^(BB + 1 - p) + 2^(1 - q) + 2^-r) + T: below
      // 4096 and even, so exact too)
      const int ua = BB + 1 - p;
      const u32 k1 = 0x8000u | f16_whole((ua >= 0 ? 1024 << ua : 1024 >> -ua) + (2048 >> q) +
                                         (1024 >> r) + T);
      const u32 m1 = fma_f16x2(va, (u32(ua + 15) << 10) * 0x10001u, k1 * 0x10001u);
      const u32 m2 = fma_f16x2(vb, (u32(16 - q) << 10) * 0x10001u, m1);
      put2<N>(dst, k, fma_f16x2(vc, (u32(15 - r) << 10) * 0x10001u, m2));
    }
    return;
  }
  constexpr u32 sub = magic + u32(T) * 0x10001u;
  constexpr u32 ma = ((1u << BA) - 1u) << (BB + BC), mb = ((1u << BB) - 1u) << BC;
  constexpr u32 mc = (1u << BC) - 1u;
  constexpr int BC1 = BC ? BC : 1;  // (instantiable when there is no third plane)
#pragma unroll
  for (int k = 0; k < N / 2; ++k) {
    u32 r = and_or(pair_at<BA, N, BB + BC>(a, k), ma * 0x10001u, magic);
    r = and_or(pair_at<BB, N, BC>(b, k), mb * 0x10001u, r);
    if (BC) r = and_or(pair_at<BC1, N, 0>(c, k), mc * 0x10001u, r);
    put2<N>(dst, k, sub2<BF16>(r, sub));
  }
}

// ---- floats -----------------------------------------------------------------------------------
// codes 2j, 2j+1 at the top of the halves of one word (B = 8: by PRMT from the source word)
template <int B, int N>
TC_DEVICE u32 top_pair(const void* src, int j) {
  if (B == 8) return prmt(word<8, N>(src, j / 2), 0u, j % 2 ? 0x3424u : 0x1404u);
  const u32 y = 2 * j + 1 < N ? field<B, N>(src, 2 * j + 1) << (32 - B) : 0u;
  return (field<B, N>(src, 2 * j) << (16 - B)) | y;
}

template <int E, int M, int SPECIAL, bool BF16, int N, bool ILV = false, int S = 0>
TC_DEVICE void fast_cast_float(const void* src, void* dst) {
  constexpr int B = 1 + E + M, ED = BF16 ? 8 : 5, MD = BF16 ? 7 : 10;
  constexpr int BIAS = (1 << (E - 1)) - 1, BIASD = BF16 ? 127 : 15, UP = BIASD - BIAS + S;
  static_assert(B <= 8 && E <= ED && M <= MD, "a 1..8-bit float narrower than the result");
  static_assert(BF16 || E <= 4 || (E == 5 && SPECIAL == 2), "f16 holds E <= 4 and e5m2 exactly");
  static_assert(S <= 0 && UP >= 0 && (S == 0 || SPECIAL == 0),
                "times 2^S: down to the code's own bits, for codes without special values");
  constexpr u32 keep = (((1u << (B - 1)) - 1u) << (MD - M)) * 0x10001u;  // exponent + mantissa
  constexpr u32 scale = u32(UP + BIASD) << MD;                            // 2^(BIASD - BIAS + S)
  constexpr u32 mag = (((1u << (B - 1)) - 1u) << (16 - B)) * 0x10001u;   // |code| at the top
  constexpr u32 one = (1u << (16 - B)) * 0x10001u;                         // its last bit
  constexpr u32 expo = (((1u << E) - 1u) << (15 - E)) * 0x10001u;         // its exponent
  constexpr u32 nan = BF16 ? 0x7FC07FC0u : 0x7E007E00u, inf = BF16 ? 0x7F807F80u : 0x7C007C00u;
  // what the trick makes of the largest magnitude (a normal number): its exponent moved up by
  // the biases' difference
  constexpr u32 most = (keep & 0xFFFFu) + (u32(BIASD - BIAS) << MD), most2 = most * 0x10001u;
  static_assert(!ILV || (B == 4 && SPECIAL == 0 && N % 8 == 0),
                "interleaved words: 4-bit floats without special codes, whole words");
  constexpr int low = MD - M;       // where the magnitude's last bit goes
  constexpr int spread = 12 - low;  // how far the sign bit must move up from its nibble's top
  if (ILV && spread <= 4) {  // (f16) pair k of a word: codes k and k + 4, the halves' nibbles k
    // ev: the even nibbles' magnitudes in place, each sign `spread` bits above its own place
    // (inside the odd nibble above it); od: the same of the odd nibbles, moved down one nibble.
    // Pair k is then one shift and one mask of ev (k even) or od, times 2^UP unless UP is 0.
    constexpr u32 mags = 0x07070707u, out = keep | 0x80008000u;
#pragma unroll
    for (int q = 0; q < N / 8; ++q) {
      const u32 w = word<B, N>(src, q);
      const u32 ev = bit_select(w, w << spread, mags);
      const u32 od = bit_select(w >> 4, w >> (4 - spread), mags);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const u32 r = ((k % 2 ? od : ev) << (k < 2 ? low : low - 8)) & out;
        put2<N>(dst, q * 4 + k, UP ? mul2<BF16>(r, scale * 0x10001u) : r);
      }
    }
    return;
  }
  if (ILV) {  // pair k of a word: codes k and k + 4, the halves' nibbles k
#pragma unroll
    for (int q = 0; q < N / 8; ++q) {
      const u32 w = word<B, N>(src, q);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int d = low - 4 * k;
        const u32 m = (d >= 0 ? w << d : w >> -d) & keep;  // exponent + mantissa in place
        const u32 s = and_or(w << (12 - 4 * k), 0x80008000u, scale * 0x10001u);  // +-2^bias
        put2<N>(dst, q * 4 + k, mul2<BF16>(m, s));
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < (N + 1) / 2; ++j) {
    const u32 p = top_pair<B, N>(src, j);
    u32 r = p;  // e5m2 -> f16: the code is the f16's top byte already
    if (ED != E) r = ((p >> (ED - E)) & keep) | (p & 0x80008000u);
    if (ED != E && UP) r = mul2<BF16>(r, scale * 0x10001u);
    if (SPECIAL == 1) {  // the all-ones magnitude is NaN
      const u32 m = half_mask((p & mag) + one);
      r ^= m & (most2 ^ nan);
    } else if (SPECIAL == 2) {  // all-ones exponent: inf (mantissa 0) or NaN
      const u32 special = half_mask((p & mag) + (0x80008000u - expo));
      const u32 isnan = half_mask((p & mag) + (0x80008000u - expo - one));
      r = (r & ~(special & 0x7FFF7FFFu)) | (special & inf) | (isnan & nan);
    }
    put2<N>(dst, j, r);
  }
}

// ---- 6-bit floats from two bit planes ---------------------------------------------------------
// x << d for d >= 0, else x >> -d (d a compile-time constant in the unrolled loops)
TC_DEVICE u32 shift(u32 x, int d) { return d >= 0 ? x << d : x >> -d; }

// 1 + E + M = 6-bit floats without special codes whose codes are stored as two planes in
// interleaved words: hi (the sign and the top magnitude bit: 2-bit fields, pair k of a word at
// slots k and k + 8) and lo (the low 4 bits: nibbles k and k + 4). Each pair's fields go
// straight to their places in the result's halves: the 5 magnitude bits under the exponent
// field (lowest at L = MD - M), the sign on top, which reads as the value times
// 2^-(BIASD - BIAS) (every code finite, subnormals included); then times 2^(BIASD - BIAS + S)
// unless that is 1 (S at the bottom: the caller folded it into its scales). Per pair: lo one
// SHF + LOP3, hi one SHF + LOP3 (f16 e3m2: the sign bits spread once per word, 3 above the top
// magnitude bit, so one window places both) or two (other formats), the OR.
template <int E, int M, bool BF16, int N, int S = 0>
TC_DEVICE void fast_cast_float_planes(const void* hi, const void* lo, void* dst) {
  constexpr int MD = BF16 ? 7 : 10, L = MD - M, TOP = L + 4;  // the magnitude's low, top bits
  constexpr int BIAS = (1 << (E - 1)) - 1, BIASD = BF16 ? 127 : 15, UP = BIASD - BIAS + S;
  static_assert(1 + E + M == 6 && N % 16 == 0, "6-bit floats, whole plane words");
  static_assert(S <= 0 && UP >= 0, "times 2^S, S <= 0: down to the codes' own bits");
  constexpr u32 mlo = (0xFu << L) * 0x10001u, mtop = (1u << TOP) * 0x10001u;
  constexpr u32 sign = 0x80008000u, scale = (u32(UP + BIASD) << MD) * 0x10001u;
  constexpr bool spread = 15 - TOP == 3;  // (f16 e3m2) a slot's sign moves 2 up: odd to odd
#pragma unroll
  for (int q = 0; q < N / 16; ++q) {
    const u32 h = word<2, N>(hi, q);
    // slot k's top bit at 2k, its sign at 2k + 3 (k < 7: slots 7 and 15 take the window of h)
    const u32 hs = spread ? (h & 0x55555555u) | ((h & 0x2AAA2AAAu) << 2) : 0u;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int p = q * 8 + k;  // the pair
      const u32 l = word<4, N>(lo, p / 4);
      const u32 m = shift(l, L - 4 * (p % 4)) & mlo;
      u32 t;
      if (spread && k < 7) {
        t = shift(hs, TOP - 2 * k) & (mtop | sign);
      } else {
        t = (shift(h, TOP - 2 * k) & mtop) | (shift(h, 14 - 2 * k) & sign);
      }
      const u32 r = m | t;
      put2<N>(dst, p, UP ? mul2<BF16>(r, scale) : r);
    }
  }
}

// ---- 6- and 7-bit codes in bytes ---------------------------------------------------------------
// Each group of 32 codes is 4 B bytes, from a, b, c in turn (P0, P1, P2 bytes a group from each,
// whole words). Code e < 4 B is byte e's low B bits; with T = 8 - B top bits a byte, code
// 4 B + 4 j + k (k < 4) has bits [T i, T i + T) in the top bits of byte 4 (j B / T + i) + k.
// Results: code - Z in natural order. Per word: one LOP3 clears the top bits, two PRMTs place
// the four bytes under the magic (f16 1024 + x, bf16 128 + x: x < 128 fits either mantissa),
// two HSUB2 (bf16 HFMA2); the spread codes gather into the bytes of T words by one SHF + LOP3 a
// word, then the same permutes and subtractions: about 1.7 (B = 7) or 1.6 (B = 6) instructions
// a code.
template <int P>
TC_DEVICE u32 part_word(const void* src, int group, int k) {
  u32 w;
  memcpy(&w, static_cast<const u8*>(src) + P * group + 4 * k, 4);
  return w;
}

// (SUB(pair): the pair's subtrahend, magic + T in each half)
template <int B, bool BF16, int N, int P0, int P1, int P2, class SUB>
TC_DEVICE void bytes_minus(const void* a, const void* b, const void* c, void* dst, SUB sub) {
  static_assert(B == 6 || B == 7, "6- or 7-bit codes in bytes");
  static_assert(N % 32 == 0, "whole groups of 32 codes");
  static_assert(P0 + P1 + P2 == 4 * B && P0 % 4 == 0 && P1 % 4 == 0 && P2 % 4 == 0,
                "4 B bytes a group, whole words from each part");
  constexpr int T = 8 - B, R = B / T;  // top bits a byte; words a spread code takes
  constexpr u32 magic = BF16 ? 0x43u : 0x64u, low = ((1u << B) - 1u) * 0x01010101u;
#pragma unroll
  for (int g = 0; g < N / 32; ++g) {
    u32 spread[T] = {};  // word j, byte k: code 4 B + 4 j + k
#pragma unroll
    for (int i = 0; i < B; ++i) {
      const int at = 4 * i;  // the word's first byte in the group
      const u32 w = at < P0 ? part_word<P0>(a, g, i)
                  : at < P0 + P1 ? part_word<P1>(b, g, (at - P0) / 4)
                                 : part_word<P2>(c, g, (at - P0 - P1) / 4);
      const int j = i / R, s = T * (i % R);  // its spread word; where its top bits go
      spread[j] = and_or(w >> (B - s), (((1u << T) - 1u) << s) * 0x01010101u, spread[j]);
      const u32 v = w & low;
      const int p = 16 * g + 2 * i;
      put2<N>(dst, p, sub2<BF16>(prmt(v, magic, 0x4140u), sub(p)));
      put2<N>(dst, p + 1, sub2<BF16>(prmt(v, magic, 0x4342u), sub(p + 1)));
    }
#pragma unroll
    for (int j = 0; j < T; ++j) {
      const int p = 16 * g + 2 * B + 2 * j;
      put2<N>(dst, p, sub2<BF16>(prmt(spread[j], magic, 0x4140u), sub(p)));
      put2<N>(dst, p + 1, sub2<BF16>(prmt(spread[j], magic, 0x4342u), sub(p + 1)));
    }
  }
}

template <int B, bool BF16, int N, int Z = 0, int P0 = 4 * B, int P1 = 0, int P2 = 0>
TC_DEVICE void fast_cast_bytes(const void* a, const void* b, const void* c, void* dst) {
  static_assert(Z >= 0 && Z < 128, "(magic + x) - (magic + Z) exact in f16 and bf16");
  constexpr u32 sub = (((BF16 ? 0x43u : 0x64u) << 8) + Z) * 0x10001u;
  bytes_minus<B, BF16, N, P0, P1, P2>(a, b, c, dst, [](int) { return sub; });
}

// zs[pair]: magic + T of each half (the caller's zero points per element, T < 128)
template <int B, bool BF16, int N, int P0 = 4 * B, int P1 = 0, int P2 = 0>
TC_DEVICE void fast_cast_bytes_z(const void* a, const void* b, const void* c, const u32* zs,
                                 void* dst) {
  bytes_minus<B, BF16, N, P0, P1, P2>(a, b, c, dst, [zs](int p) { return zs[p]; });
}

// 3-bit codes in nibbles (dtypes/packing.py): per group of 32, words 0-2 hold codes 0-23 in their
// nibbles' low 3 bits, each word's 8 in the interleaved order (code j in nibble (j % 2) * 4 +
// j / 2), and the top bits of word i's nibbles bit i of codes 24-31 (the same order). Those
// gather into a fourth word by one SHF + LOP3 a word; then each word goes through the 4-bit
// trick with 3-bit masks (its top bits ignored): f16 2 LOP3 on w and w >> 8, two HSUB2 for the
// low nibbles (1024 + x), two HFMA2 for the high ones (1024 + 16 x, times 1/16, - (64 + T));
// bf16 each nibble shifted down under 0x4300, one HFMA2 a pair. About 1.3 instructions a code.
// (Z(i): result i's zero point plus T; each pair's subtrahends are linear in it)
template <bool BF16, int N, int P0, int P1, int P2, class Z>
TC_DEVICE void nibbles3_minus(const void* a, const void* b, const void* c, void* dst, Z z) {
  static_assert(N % 32 == 0, "whole groups of 32 codes");
  static_assert(P0 + P1 + P2 == 12 && P0 % 4 == 0 && P1 % 4 == 0 && P2 % 4 == 0,
                "12 bytes a group, whole words from each part");
  // pair p's subtrahend: base + step * (z of each half)
  auto sub = [&](int p, u32 base, u32 step) {
    return (base + step * z(2 * p)) | (base + step * z(2 * p + 1)) << 16;
  };
  auto cast8 = [&](u32 w, int pair) {  // 8 codes of w (3 bits a nibble) -> pairs pair..pair+3
    if (BF16) {  // 128 + T
#pragma unroll
      for (int k = 0; k < 4; ++k)
        put2<N>(dst, pair + k, fma_bf16x2(and_or(w >> (4 * k), 0x00070007u, 0x43004300u),
                                          0x3F803F80u, sub(pair + k, 0x4300u, 1u) ^ 0x80008000u));
      return;
    }
    const u32 v = w >> 8;  // low nibbles 1024 + x - (1024 + T); high (1024 + 16 x) / 16 - (64 + T)
    put2<N>(dst, pair, sub_f16x2(and_or(w, 0x00070007u, 0x64006400u), sub(pair, 0x6400u, 1u)));
    put2<N>(dst, pair + 1, fma_f16x2(and_or(w, 0x00700070u, 0x64006400u), 0x2C002C00u,
                                     sub(pair + 1, 0xD400u, 16u)));
    put2<N>(dst, pair + 2, sub_f16x2(and_or(v, 0x00070007u, 0x64006400u),
                                     sub(pair + 2, 0x6400u, 1u)));
    put2<N>(dst, pair + 3, fma_f16x2(and_or(v, 0x00700070u, 0x64006400u), 0x2C002C00u,
                                     sub(pair + 3, 0xD400u, 16u)));
  };
#pragma unroll
  for (int g = 0; g < N / 32; ++g) {
    u32 spread = 0;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const int at = 4 * i;
      const u32 w = at < P0 ? part_word<P0>(a, g, i)
                  : at < P0 + P1 ? part_word<P1>(b, g, (at - P0) / 4)
                                 : part_word<P2>(c, g, (at - P0 - P1) / 4);
      spread = and_or(w >> (3 - i), 0x11111111u << i, spread);
      cast8(w, 16 * g + 4 * i);
    }
    cast8(spread, 16 * g + 12);
  }
}

template <bool BF16, int N, int T = 0, int P0 = 12, int P1 = 0, int P2 = 0>
TC_DEVICE void fast_cast_nibbles3(const void* a, const void* b, const void* c, void* dst) {
  static_assert(T >= 0 && T < 64, "(magic + 16 x) / 16 - (64 + T) exact in f16");
  nibbles3_minus<BF16, N, P0, P1, P2>(a, b, c, dst, [](int) { return u32(T); });
}

// z[i]: result i's zero point (whole numbers, T + z[i] < 64 f16 / 128 bf16)
template <bool BF16, int N, int T = 0, int P0 = 12, int P1 = 0, int P2 = 0>
TC_DEVICE void fast_cast_nibbles3_z(const void* a, const void* b, const void* c, const u32* z,
                                    void* dst) {
  static_assert(T >= 0 && T < (BF16 ? 128 : 64), "T + z below the magic's exact range");
  nibbles3_minus<BF16, N, P0, P1, P2>(a, b, c, dst, [z](int i) { return T + z[i]; });
}

// B-bit floats of E exponent and M = B - 1 - E (2 or 3) mantissa bits in bytes (the layout above,
// each byte's sign at bit 7 and its spare bits at B - 1..6): per word one LOP3 clears the spare
// bits and two PRMTs put the bytes in the halves' high bytes, where with M = 2 sign, exponent and
// mantissa are already an f16 of value code * 2^-(15 - bias) (subnormals too), so at the bottom
// of S nothing else is done (else one multiply); with M = 3, and to bf16, each pair moves its
// magnitude down M - 2 (bf16: M + 1) under the sign (SHF + 2 LOP3) first. The spread codes
// gather in the same byte layout (a SHF and a LOP3 a word; the word holding each code's sign
// bit, one more pair).
template <int B, int E, bool BF16, int N, int S = 0, int P0 = 4 * B, int P1 = 0, int P2 = 0>
TC_DEVICE void fast_cast_bytes_float(const void* a, const void* b, const void* c, void* dst) {
  constexpr int M = B - 1 - E;
  static_assert((B == 6 || B == 7) && (M == 2 || M == 3), "6- or 7-bit, 2 or 3 mantissa bits");
  static_assert(N % 32 == 0, "whole groups of 32 codes");
  static_assert(P0 + P1 + P2 == 4 * B && P0 % 4 == 0 && P1 % 4 == 0 && P2 % 4 == 0,
                "4 B bytes a group, whole words from each part");
  constexpr int T = 8 - B, R = B / T, BIAS = (1 << (E - 1)) - 1, BIASD = BF16 ? 127 : 15;
  constexpr int UP = BIASD - BIAS + S, MD = BF16 ? 7 : 10;
  static_assert(S <= 0 && UP >= 0, "times 2^S, S <= 0: down to the codes' own bits");
  constexpr u32 keep = (((1u << (B - 1)) - 1u) | 0x80u) * 0x01010101u;  // all but the spare
  constexpr u32 scale = (u32(UP + BIASD) << MD) * 0x10001u;
  constexpr int DOWN = BF16 ? M + 1 : M - 2;  // the magnitude's shift from the high byte's
  constexpr u32 mag = ((1u << (B - 1)) - 1u) << (8 - DOWN);
  auto out = [&](int pair, u32 h) {
    if (DOWN) h = and_or(h >> DOWN, mag * 0x10001u, h & 0x80008000u);
    put2<N>(dst, pair, UP ? mul2<BF16>(h, scale) : h);
  };
#pragma unroll
  for (int g = 0; g < N / 32; ++g) {
    u32 spread[T] = {};  // word j, byte k: code 4 B + 4 j + k, in the stored byte layout
#pragma unroll
    for (int i = 0; i < B; ++i) {
      const int at = 4 * i;
      const u32 w = at < P0 ? part_word<P0>(a, g, i)
                  : at < P0 + P1 ? part_word<P1>(b, g, (at - P0) / 4)
                                 : part_word<P2>(c, g, (at - P0 - P1) / 4);
      const int j = i / R, f = i % R, s = T * f;  // field f of code bits [s, s + T)
      const int low = f < R - 1 ? T : T - 1;      // its bits below the code's top bit
      if (low)
        spread[j] = and_or(w >> (B - 1 - s), (((1u << low) - 1u) << s) * 0x01010101u, spread[j]);
      if (f == R - 1)  // (the code's top bit, a float's sign: spare bit 6 to bit 7)
        spread[j] = and_or(w << 1, 0x80808080u, spread[j]);
      const u32 v = w & keep;
      out(16 * g + 2 * i, prmt(v, 0u, 0x1404u));
      out(16 * g + 2 * i + 1, prmt(v, 0u, 0x3424u));
    }
#pragma unroll
    for (int j = 0; j < T; ++j) {
      out(16 * g + 2 * B + 2 * j, prmt(spread[j], 0u, 0x1404u));
      out(16 * g + 2 * B + 2 * j + 1, prmt(spread[j], 0u, 0x3424u));
    }
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
// the two float8_e4m3 codes in the low 16 bits of `a` as an f16 pair (sm_89+)
TC_DEVICE u32 cvt_e4m3x2(u32 a) {
  u32 d;
  const unsigned short h = static_cast<unsigned short>(a);
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(h));
  return d;
}

// float8_e4m3 -> f16 by the hardware (sm_89+): cvt.rn.f16x2.e4m3x2 on each pair of bytes (the
// low byte to the low half), exact for every code but NaN, which it makes 0x7FFF; a thread
// whose N codes hold a NaN (0x7F or 0xFF: (b & 0x7F) + 1 carries into bit 7) casts them all
// again by fast_cast_float, which keeps the interpreter's quiet NaN with its sign.
template <int N>
TC_DEVICE void fast_cast_e4m3_cvt(const void* src, void* dst) {
  u32 nan = 0;
#pragma unroll
  for (int q = 0; q < (N + 3) / 4; ++q) {
    const u32 w = word<8, N>(src, q);
    nan |= ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
#pragma unroll
    for (int h = 0; h < 2 && 4 * q + 2 * h < N; ++h) put2<N>(dst, 2 * q + h, cvt_e4m3x2(w >> (16 * h)));
  }
  if (nan) fast_cast_float<4, 3, 1, false, N>(src, dst);
}
#endif

}  // namespace fast

using fast::fast_cast_bytes;
using fast::fast_cast_bytes_float;
using fast::fast_cast_bytes_z;
using fast::fast_cast_float;
using fast::fast_cast_float_planes;
using fast::fast_cast_int;
using fast::fast_cast_int_z;
using fast::fast_cast_nibbles3;
using fast::fast_cast_nibbles3_z;
using fast::fast_cast_planes;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
using fast::fast_cast_e4m3_cvt;
#endif

}  // namespace tc
