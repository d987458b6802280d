"""lowbit.cuh's codecs, bit fields and cast dispatch compiled for the host (g++), so the CPU
tests can run them on every code and a float sweep and compare with tilecraft.dtypes bit for
bit. The header's CUDA intrinsics get host stand-ins with the device semantics (saturating
float -> int truncation, a sequential atomicCAS); `run(main_body, inputs)` compiles the header's
tc namespace (from its first section to the end) plus `main_body` and returns the uint32 words
the program writes."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tilecraft import dtypes
from tilecraft.runtime.paths import TILECRAFT_INCLUDE_DIR

SHIMS = r"""
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define TC_DEVICE inline
#define TC_NO_BF16
namespace tc {
typedef unsigned char u8; typedef unsigned int u32; typedef unsigned long long u64;
template <class To, class From> struct Cast {
  static To run(From x) { return static_cast<To>(x); }
};
template <class To, class From> To cast(From x) { return Cast<To, From>::run(x); }
template <class T> struct IsInt { static constexpr bool value = false; };  // common.cuh's
#define TC_IS_INT(T) template <> struct IsInt<T> { static constexpr bool value = true; };
TC_IS_INT(bool) TC_IS_INT(signed char) TC_IS_INT(unsigned char) TC_IS_INT(short)
TC_IS_INT(unsigned short) TC_IS_INT(int) TC_IS_INT(unsigned) TC_IS_INT(long long)
TC_IS_INT(unsigned long long)
#undef TC_IS_INT
}
struct __half { float v; };
static inline float __half2float(__half h) { return h.v; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline float __uint2float_rn(unsigned u) { return (float)u; }  // (exact below 2^24)
static inline int __float2int_rz(float x) {  // cvt.rzi.s32.f32: saturates, NaN -> 0
  if (x != x) return 0;
  if (x >= 2147483648.0f) return INT_MAX;
  if (x <= -2147483648.0f) return INT_MIN;
  return (int)x;
}
static inline int __double2int_rz(double x) {  // cvt.rzi.s32.f64: saturates, NaN -> INT_MIN
  if (x != x) return INT_MIN;
  if (x >= 2147483648.0) return INT_MAX;
  if (x <= -2147483648.0) return INT_MIN;
  return (int)x;
}
static inline unsigned atomicCAS(unsigned* w, unsigned expected, unsigned desired) {
  unsigned old = *w;
  if (old == expected) *w = desired;
  return old;
}
namespace tc {
template <> struct Cast<int, float> { static int run(float x) { return __float2int_rz(x); } };
}
"""

FLOATS = [dtypes.resolve(n) for n in dir(dtypes)
          if re.fullmatch(r"float\d_e\dm\d", n) and not dtypes.resolve(n).is_standard]
INTS = [dtypes.int_type(b, signed=s) for s in (True, False) for b in range(1, 8)
        if not (s and b == 1)]


def have_compiler() -> bool:
    return shutil.which("g++") is not None


def header_namespace() -> str:
    """lowbit.cuh's `namespace tc { ... }`, without its includes."""
    text = (Path(TILECRAFT_INCLUDE_DIR) / "tilecraft" / "lowbit.cuh").read_text()
    return text[text.index("namespace tc {"):]


def run(main_body: str, inputs: bytes = b"") -> np.ndarray:
    """Compile and run `int main` with `main_body` (it reads `in`, a FILE* of `inputs`, and
    writes uint32 words to `out`); the words written."""
    source = (SHIMS + header_namespace() + "\nint main(int argc, char** argv) {\n"
              '  FILE* in = fopen(argv[1], "rb"); FILE* out = fopen(argv[2], "wb");\n'
              f"{main_body}\n  fclose(out);\n  return 0;\n}}\n")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "t.cpp").write_text(source)
        subprocess.run(["g++", "-O1", "-std=c++17", "-w", "-o", str(d / "t"), str(d / "t.cpp")],
                       check=True, capture_output=True, text=True)
        (d / "in").write_bytes(inputs)
        subprocess.run([str(d / "t"), str(d / "in"), str(d / "out")], check=True)
        return np.frombuffer((d / "out").read_bytes(), np.uint32).copy()


def float_sweep() -> tuple[np.ndarray, np.ndarray]:
    """float32 and float64 inputs: every value of every custom float, the ties between
    neighbours (and above the maximum), their neighbouring floats, signed zeros, infinities,
    NaNs, f32 subnormals, huge values, random normals and random bit patterns."""
    xs = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-38, 3e38, -3e38, 7.5]
    for t in FLOATS:
        v = t.to_float(np.arange(1 << t.bits)).astype(np.float64)
        pos = np.unique(np.abs(v[np.isfinite(v)]))
        ties = (pos[1:] + pos[:-1]) / 2
        top = pos[-1] + (pos[-1] - pos[-2]) / 2
        for a in (pos, ties, [top, 2 * top, pos[1] / 2, pos[1] / 4, pos[1] * 0.75]):
            xs += list(np.asarray(a)) + list(-np.asarray(a))
    xs = np.asarray(xs, np.float64)
    rng = np.random.default_rng(0)
    f = xs.astype(np.float32)
    f = np.concatenate([f, np.nextafter(f, np.float32(np.inf)),
                        np.nextafter(f, np.float32(-np.inf)),
                        (rng.standard_normal(3000) * 10).astype(np.float32),
                        (rng.standard_normal(1000) * 1e-3).astype(np.float32),
                        rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)])
    d = np.concatenate([xs, np.nextafter(xs, np.inf), np.nextafter(xs, -np.inf),
                        rng.standard_normal(3000) * 100, [1e-310, -1e-310, 1e300, -1e300]])
    return f, d


def codec_program(nf: int, nd: int) -> str:
    """For every type: decode of every code, then the encode (floats) or saturating truncation
    (ints) of the nf floats and nd doubles read from `in`."""
    lines = [f"  static float xf[{nf}]; static double xd[{nd}];",
             f"  static unsigned w[{nf + nd + 256}];",
             f"  fread(xf, 4, {nf}, in); fread(xd, 8, {nd}, in);"]
    for t in FLOATS + INTS:
        if t.is_float:
            targs = f"{t.exponent_bits}, {t.mantissa_bits}"
            dec = f"__float_as_uint(tc::decode_float<{targs}>(i))"
            enc = f"tc::encode_float<{targs}>"
        else:
            targs = f"{t.bits}, {'true' if t.kind == 'int' else 'false'}"
            dec = f"(unsigned)tc::decode_int<{targs}>(i)"
            enc = f"tc::saturate_int<{targs}>"
        lines += [f"  for (int i = 0; i < {1 << t.bits}; ++i) w[i] = {dec};",
                  f"  fwrite(w, 4, {1 << t.bits}, out);",
                  f"  for (int i = 0; i < {nf}; ++i) w[i] = {enc}(xf[i]);",
                  f"  for (int i = 0; i < {nd}; ++i) w[{nf} + i] = {enc}(xd[i]);",
                  f"  fwrite(w, 4, {nf + nd}, out);"]
    return "\n".join(lines)


def bitfield_program(n: int, bits: int) -> str:
    """`n` codes of `bits` bits read from `in` (uint32 each): written into zeroed words with
    bits_set (the words out), read back with bits_get, loaded from those bytes with bits_load,
    and stored with bits_store_atomic into zeroed bytes at base offsets 0..3 (each out)."""
    words = -(-n * bits // 32)
    return f"""
  static unsigned c[{n}], w[{words} + 1], back[{n}], bytes_w[{words} + 2];
  fread(c, 4, {n}, in);
  for (int i = 0; i < {n}; ++i) tc::bits_set<{bits}>(w, i, c[i]);
  fwrite(w, 4, {words}, out);
  for (int i = 0; i < {n}; ++i) back[i] = tc::bits_get<{bits}>(w, i);
  fwrite(back, 4, {n}, out);
  for (int i = 0; i < {n}; ++i) back[i] = tc::bits_load<{bits}>((const tc::u8*)w, i);
  fwrite(back, 4, {n}, out);
  for (int base = 0; base < 4; ++base) {{
    memset(bytes_w, 0, sizeof(bytes_w));
    tc::u8* p = (tc::u8*)bytes_w + base;
    for (int i = {n} - 1; i >= 0; --i) tc::bits_store_atomic<{bits}>(p, (long long)i, c[i]);
    for (int i = 0; i < {words} + 1; ++i) {{
      unsigned x = 0; memcpy(&x, p + 4 * i, 4); fwrite(&x, 4, 1, out);
    }}
  }}"""
