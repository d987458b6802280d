"""The fast casts' logic, bit-exact with the interpreter for every code, checked without a GPU:
include/tilecraft/fast_cast.cuh compiled by the host C++ compiler with its six PTX instructions
(prmt, lop3, sub/mul/fma.rn.f16x2, fma.rn.bf16x2) replaced by exact models (round to nearest
even, subnormals kept, as PTX defines them) and cvt.rn.bf16x2.f32 likewise. Every type the fast
path takes, to f16 and bf16, at local sizes with tails and odd counts, every code at every
position; the integer casts also minus zero points (the fused `fast_cast_int<..., Z>`), and 1-,
2- and 4-bit integers also from interleaved words (`ILV`: element j of a word at code position
(j % 2) * 16/b + j // 2, results in natural order).
(test_fast_casts_gpu.py and test_zero_point_casts.py run the real instructions.)"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilecraft import dtypes as dt
from tilecraft.block.select_cast import (
    float_headroom,
    plan_for,
    words_interleave,
    zero_codes_limit,
    zero_point_limit,
)
from tilecraft.interp.evaluate import compute_type
from tilecraft.interp.values import store_cast
from tilecraft.layout.permute import interleave_permutation
from tilecraft.targets import H100_SXM

from .fast_cast_programs import FLOATS, INTS

HEADER = (Path(__file__).resolve().parents[2] / "tilecraft/codegen/cuda/include/tilecraft/"
          "fast_cast.cuh")
EXTRA = ["float7_e4m2", "float8_e3m4", "float2_e1m0", "float8_e6m1", "float8_e7m0", "float4_e1m2",
         "float4_e3m0"]
SIZES = (1, 3, 8, 12, 17, 40)  # (40: a whole word of uint1 and a tail)

MODELS = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#define TC_DEVICE inline
#define TC_HOST_DEVICE inline
namespace tc {
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32;
static u32 round_to(double x, int E, int M) {  // nearest even, subnormals, overflow -> inf
  const u32 sign = std::signbit(x) ? 1u : 0u;
  const int bias = (1 << (E - 1)) - 1;
  const double a = std::fabs(x), inf = double(((1 << E) - 1) << M);
  double code = 0;
  if (a != 0) {
    int q; std::frexp(a, &q); q = std::max(q - 1, 1 - bias);
    code = double(q + bias - 1) * (1 << M) + std::nearbyint(std::ldexp(a, M - q));
  }
  return (sign << (E + M)) | u32(std::min(code, inf));
}
static double value(u32 c, int E, int M) {  // (the operands are never inf or NaN)
  const int bias = (1 << (E - 1)) - 1;
  const u32 e = (c >> M) & ((1u << E) - 1), m = c & ((1u << M) - 1);
  const double v = e ? std::ldexp(double(m | 1u << M), int(e) - bias - M)
                     : std::ldexp(double(m), 1 - bias - M);
  return (c >> (E + M)) & 1 ? -v : v;
}
static u32 x2(u32 a, u32 b, u32 c, int E, int M, char op) {
  u32 r = 0;
  for (int h = 0; h < 32; h += 16) {
    const double x = value(a >> h & 0xFFFF, E, M), y = value(b >> h & 0xFFFF, E, M);
    const double v = op == '-' ? x - y : op == '*' ? x * y : x * y + value(c >> h & 0xFFFF, E, M);
    r |= round_to(v, E, M) << h;
  }
  return r;
}
static u32 ptx(const char* op, u32 a, u32 b = 0, u32 c = 0, u32 lut = 0) {
  if (!strcmp(op, "prmt.b32")) {
    u8 x[8]; u32 r = 0;
    for (int i = 0; i < 4; ++i) { x[i] = u8(a >> 8 * i); x[4 + i] = u8(b >> 8 * i); }
    for (int n = 0; n < 4; ++n) {
      const u32 s = c >> 4 * n & 15; u8 y = x[s & 7];
      if (s & 8) y = y & 0x80 ? 0xFF : 0;
      r |= u32(y) << 8 * n;
    }
    return r;
  }
  if (!strcmp(op, "lop3.b32")) {  // LUT = F(0xF0, 0xCC, 0xAA), bit by bit
    u32 r = 0;
    for (int i = 0; i < 32; ++i)
      r |= (lut >> ((a >> i & 1) * 4 + (b >> i & 1) * 2 + (c >> i & 1)) & 1u) << i;
    return r;
  }
  if (!strcmp(op, "sub.rn.f16x2")) return x2(a, b, 0, 5, 10, '-');
  if (!strcmp(op, "mul.rn.f16x2")) return x2(a, b, 0, 5, 10, '*');
  if (!strcmp(op, "fma.rn.f16x2")) return x2(a, b, c, 5, 10, 'f');
  if (!strcmp(op, "fma.rn.bf16x2")) return x2(a, b, c, 8, 7, 'f');
  if (!strcmp(op, "cvt.rn.f16x2.e4m3x2")) {  // exact but NaN, which becomes 0x7FFF (measured)
    u32 r = 0;
    for (int h = 0; h < 2; ++h) {
      const u32 code = a >> 8 * h & 0xFF;
      r |= ((code & 0x7F) == 0x7F ? 0x7FFFu : round_to(value(code, 4, 3), 5, 10)) << 16 * h;
    }
    return r;
  }
  std::fprintf(stderr, "no model of %s\n", op);
  return 0;
}
static u32 pack_bfloat2(float lo, float hi) {
  return round_to(lo, 8, 7) | round_to(hi, 8, 7) << 16;
}
}  // namespace tc
static unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  return unsigned(((unsigned long long)hi << 32 | lo) >> (s & 31));
}
static float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
"""


def _header() -> str:
    src = HEADER.read_text().replace('#include "tilecraft/common.cuh"', "")

    def model(m: re.Match) -> str:
        args = ", ".join(re.findall(r'"[rhn]"\((\w+)\)', m.group(2)))
        return f'd = ptx("{m.group(1)}", {args});'

    src, n = re.subn(r'asm\("([a-z0-9.]+) [^"]*" : "=r"\(d\) : ([^;]*)\);', model, src)
    assert n == 7 and "asm(" not in src, "every PTX instruction of the header has a model"
    return src


def _run(cxx: str, tmp_path, calls: list[str]) -> dict[int, list]:
    """Compile the header with its models and `calls` (blocks printing "k v0 v1 ..." lines) into
    one host program, run it: k -> the rows it printed."""
    (tmp_path / "t.cpp").write_text(MODELS + _header() + "int main() {\n" + "\n".join(calls)
                                    + "\n}\n")
    subprocess.run([cxx, "-O1", "-std=c++17", "-w", "-o", str(tmp_path / "t"),
                    str(tmp_path / "t.cpp")], check=True)
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True)
    assert run.stderr == ""
    rows: dict[int, list] = {}
    for line in run.stdout.splitlines():
        k, *vals = map(int, line.split())
        rows.setdefault(k, []).append(vals)
    return rows


def _zeros(s: dt.DataType, d: dt.DataType) -> list[int]:
    """0, and for integers 1, the middle code and the largest zero the trick takes."""
    if not s.is_integer:
        return [0]
    top = zero_point_limit(s, d) - 1 - (1 << (s.bits - 1) if s.kind == "int" else 0)
    return sorted({0, 1, min(1 << (s.bits - 1), top), top})


def _cases():
    for src in INTS + FLOATS + EXTRA:
        for dst in ("float16", "bfloat16"):
            s, d = dt.resolve(src), dt.resolve(dst)
            for zero in _zeros(s, d):
                plan = plan_for(s, d, 8, zero=zero)
                if plan is not None:
                    for n in SIZES:
                        yield src, dst, n, plan.func.replace(", 8", f", {n}", 1), zero, None, 0
                hw = plan_for(s, d, 8, H100_SXM, zero=zero)  # (float8_e4m3 -> f16: cvt)
                if hw is not None and hw.kind == "cvt":
                    for n in SIZES:
                        yield src, dst, n, hw.func.replace("<8>", f"<{n}>"), zero, None, 0
                if words_interleave(s) and (s.is_integer or zero == 0):
                    for n in (32 // s.bits, 64 // s.bits):
                        plan = plan_for(s, d, n, zero=zero, interleaved=True)
                        yield src, dst, n, plan.func, zero, interleave_permutation(n, s.bits), 0
            if s.is_integer and s.bits in (1, 2, 4):  # times 2^scale (a bit plane's weight)
                for scale in (1, 3, 5 if dst == "float16" else 7):
                    for ilv in (False, True):  # (parts of words too: their pairs' own path)
                        for n in (64 // s.bits,) if ilv else (64 // s.bits, *SIZES):
                            plan = plan_for(s, d, n, interleaved=ilv, scale=scale)
                            perm = interleave_permutation(n, s.bits) if ilv else None
                            yield src, dst, n, plan.func, 0, perm, scale
            top = float_headroom(s, d)  # floats times 2^-s: the trick's multiply folded in
            for scale in sorted({-1, -top // 2, -top}) if top else ():
                for ilv in (False, True) if words_interleave(s) else (False,):
                    for n in (16,) if ilv else (16, *SIZES):
                        plan = plan_for(s, d, n, interleaved=ilv, scale=scale)
                        perm = interleave_permutation(n, s.bits) if ilv else None
                        yield src, dst, n, plan.func, 0, perm, scale


def _expected(src: str, dst: str, zero: int, scale: int = 0) -> np.ndarray:
    """The interpreter's cast of every code, minus `zero` (or times 2^scale) in the
    destination's arithmetic."""
    s, d = dt.resolve(src), dt.resolve(dst)
    values = s.decode(np.arange(1 << s.bits)).astype(compute_type(s), copy=False)
    out = np.asarray(store_cast(d, values))
    if zero:
        out = np.asarray(store_cast(d, out.astype(np.float64) - zero))
    if scale:
        out = np.asarray(store_cast(d, out.astype(np.float64) * 2.0 ** scale))
    return out.view(np.uint16).astype(np.int64)


def test_every_code_of_every_fast_pair_matches_the_interpreter(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    cases = list(_cases())
    calls = []
    for k, (src, _, n, func, _, _, _) in enumerate(cases):
        b = dt.resolve(src).bits
        calls.append(f"""{{
  for (int c = 0; c < {1 << b}; ++c) {{
    unsigned char w[{(n * b + 31) // 32 * 4}] = {{0}};
    for (int i = 0; i < {n}; ++i)
      for (int k = 0, code = (c + 7 * i) % {1 << b}; k < {b}; ++k)
        if (code >> k & 1) w[(i * {b} + k) / 8] |= 1 << (i * {b} + k) % 8;
    unsigned short o[{n + 2}];
    for (int i = 0; i < {n + 2}; ++i) o[i] = 0xABCD;  // (nothing past the end is written)
    {func}(w, o);
    printf("{k}");
    for (int i = 0; i < {n + 2}; ++i) printf(" %u", o[i]);
    printf("\\n");
  }}
}}""")
    rows = _run(cxx, tmp_path, calls)
    for k, (src, dst, n, func, zero, perm, scale) in enumerate(cases):
        nc, table = 1 << dt.resolve(src).bits, _expected(src, dst, zero, scale)
        at = perm or range(n)  # result j is the code at position at[j]
        want = [[table[(c + 7 * at[j]) % nc] for j in range(n)] + [0xABCD] * 2 for c in range(nc)]
        got = np.array(rows[k])
        bad = np.argwhere(got != np.array(want))
        assert bad.size == 0, (func, [(int(c), int(i), hex(got[c, i])) for c, i in bad[:4]])


@pytest.mark.parametrize("bits,ilv,n,dst", [(4, False, 32, "float16"), (4, True, 32, "float16"),
                                            (4, True, 64, "float16"), (8, False, 16, "float16"),
                                            (8, False, 32, "float16"), (4, False, 32, "bfloat16"),
                                            (4, True, 64, "bfloat16"), (1, False, 32, "float16"),
                                            (1, True, 64, "float16"), (2, False, 32, "float16"),
                                            (2, True, 64, "float16"), (1, True, 32, "bfloat16"),
                                            (2, False, 16, "bfloat16"), (2, True, 64, "bfloat16")])
def test_a_zero_point_per_element_joins_the_fast_cast_exactly(tmp_path, bits, ilv, n, dst):
    """`fast_cast_int_z`: uint1 / uint2 / uint4 / uint8 -> f16 (but uint8 -> bf16) minus z[i]
    for result i, every code against zeros over the whole range the trick takes
    (`zero_codes_limit`, f16 / bf16: < 128 / 16 for 1 bit, 16 / 32 for 2 bits, 64 / 128 for
    4, 1024 for 8; every third round the largest, limit - 1, everywhere), exactly `code - z`
    (the interpreter's cast, then subtraction, of whole numbers: exact in either type)."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    limit = zero_codes_limit(dt.resolve(f"uint{bits}"), dt.resolve(dst))
    nc = 1 << bits
    bf16 = dst == "bfloat16"
    func = f"tc::fast_cast_int_z<{bits}, {n}, {'true' if ilv else 'false'}, {str(bf16).lower()}>"
    body = f"""
int main() {{
  for (int c = 0; c < {nc}; ++c) {{
    unsigned char w[{n * bits // 8}] = {{0}};
    unsigned z[{n}];
    for (int i = 0; i < {n}; ++i) {{
      for (int k = 0, code = (c + 7 * i) % {nc}; k < {bits}; ++k)
        if (code >> k & 1) w[(i * {bits} + k) / 8] |= 1 << (i * {bits} + k) % 8;
      z[i] = c % 3 == 2 ? {limit - 1} : (c * 5 + 11 * i) % {limit};
    }}
    unsigned short o[{n}];
    {func}(w, o, z);
    for (int i = 0; i < {n}; ++i) printf("%u ", o[i]);
    printf("\\n");
  }}
}}
"""
    (tmp_path / "z.cpp").write_text(MODELS + _header() + body)
    subprocess.run([cxx, "-O1", "-std=c++17", "-w", "-o", str(tmp_path / "z"),
                    str(tmp_path / "z.cpp")], check=True)
    run = subprocess.run([str(tmp_path / "z")], capture_output=True, text=True, check=True)
    got = np.array([list(map(int, line.split())) for line in run.stdout.splitlines()])
    at = interleave_permutation(n, bits) if ilv else range(n)  # result j: code at position at[j]
    exact = [[(c + 7 * at[j]) % nc - (limit - 1 if c % 3 == 2 else (c * 5 + 11 * j) % limit)
              for j in range(n)] for c in range(nc)]
    want = np.asarray(store_cast(dt.resolve(dst), np.array(exact, np.float64))).view(np.uint16)
    bad = np.argwhere(got != want)
    assert bad.size == 0, [(int(c), int(j), hex(got[c, j]), hex(want[c, j])) for c, j in bad[:4]]


PLANES = [(2, 1, 0), (4, 1, 0), (4, 2, 0), (4, 2, 1), (1, 2, 4)]


def test_a_sum_of_bit_planes_is_one_fast_cast_exactly(tmp_path):
    """`fast_cast_planes<BA, BB, BC, ...>`: a * 2^(BB + BC) + b * 2^BC + c - T from the planes'
    interleaved words, every code of every plane at every position (the codes of the planes
    differ), to f16 and bf16, T from 0 to the largest the magic keeps exact; bit for bit the
    interpreter's cast, scale, subtraction and sum of whole numbers."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    cases = [(bits, n, dst, t) for bits in PLANES for n in (32, 64)
             for dst in ("float16", "bfloat16")
             for t in (0, 5, 64, 127 if dst == "bfloat16" else 1000)
             if sum(bits) <= 7]
    calls = []
    for k, (bits, n, dst, t) in enumerate(cases):
        planes = [b for b in bits if b]
        fill = []
        for p, b in enumerate(planes):
            fill.append(f"""
    unsigned char w{p}[{n * b // 8}] = {{0}};
    for (int i = 0; i < {n}; ++i)
      for (int k = 0, code = (c + 7 * i + 3 * {p}) % {1 << b}; k < {b}; ++k)
        if (code >> k & 1) w{p}[(i * {b} + k) / 8] |= 1 << (i * {b} + k) % 8;""")
        srcs = ", ".join(f"w{p}" for p in range(len(planes))) + ", nullptr" * (3 - len(planes))
        func = (f"tc::fast_cast_planes<{bits[0]}, {bits[1]}, {bits[2]}, "
                f"{'true' if dst == 'bfloat16' else 'false'}, {n}, {t}>")
        calls.append(f"""{{
  for (int c = 0; c < 16; ++c) {{{''.join(fill)}
    unsigned short o[{n}];
    {func}({srcs}, o);
    printf("{k}");
    for (int i = 0; i < {n}; ++i) printf(" %u", o[i]);
    printf("\\n");
  }}
}}""")
    rows = _run(cxx, tmp_path, calls)
    for k, (bits, n, dst, t) in enumerate(cases):
        planes = [b for b in bits if b]
        shifts = [sum(planes[p + 1:]) for p in range(len(planes))]
        want = []
        for c in range(16):
            vals = []
            for j in range(n):
                v = -t
                for p, b in enumerate(planes):
                    at = interleave_permutation(n, b)[j]
                    v += ((c + 7 * at + 3 * p) % (1 << b)) << shifts[p]
                vals.append(v)
            want.append(np.asarray(store_cast(dt.resolve(dst), np.array(vals, np.float64)))
                        .view(np.uint16).astype(np.int64))
        got = np.array(rows[k])
        bad = np.argwhere(got != np.array(want))
        assert bad.size == 0, (bits, n, dst, t, [(int(c), int(i)) for c, i in bad[:4]])


def _plane_bytes(codes: np.ndarray, bits: int) -> list[int]:
    """The bytes of one plane: element j's `bits`-bit code at storage position
    interleave_permutation(n, bits)[j] of the interleaved words."""
    n = len(codes)
    stored = np.zeros(n, np.int64)
    stored[list(interleave_permutation(n, bits))] = codes
    out = [0] * (n * bits // 8)
    for i, c in enumerate(stored):
        for k in range(bits):
            if int(c) >> k & 1:
                out[(i * bits + k) // 8] |= 1 << (i * bits + k) % 8
    return out


def test_six_bit_floats_from_their_two_planes_are_cast_exactly(tmp_path):
    """`fast_cast_float_planes<E, M, BF16, N, S>`: 6-bit floats stored as uint2 (sign, top
    magnitude bit) + uint4 (low bits) planes in interleaved words (quant/qmm.py), every code at
    every position, to f16 and bf16, times 2^S from 0 to the bottom (the caller's fold), bit for
    bit the interpreter's decode, scale and conversion (block/vm_ops.py `_cast_planes`)."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    cases = []
    for src in ("float6_e3m2", "float6_e2m3"):
        s = dt.resolve(src)
        for dst in ("float16", "bfloat16"):
            bottom = (127 if dst == "bfloat16" else 15) - s.bias
            for n in (16, 32):
                for scale in sorted({0, -1, -bottom}):
                    cases.append((s, dst, n, scale))
    calls, wants = [], []
    for k, (s, dst, n, scale) in enumerate(cases):
        hi_rows, lo_rows, want = [], [], []
        for c in range(64):
            codes = (c + 5 * np.arange(n)) % 64  # every code at every position over c
            hi_rows.append(_plane_bytes(codes >> 4, 2))
            lo_rows.append(_plane_bytes(codes & 15, 4))
            values = s.decode(codes).astype(np.float64) * 2.0 ** scale
            want.append(np.asarray(store_cast(dt.resolve(dst), values))
                        .view(np.uint16).astype(np.int64))
        wants.append(want)
        table = lambda rows: ", ".join("{" + ", ".join(map(str, r)) + "}" for r in rows)  # noqa
        func = (f"tc::fast_cast_float_planes<{s.exponent_bits}, {s.mantissa_bits}, "
                f"{'true' if dst == 'bfloat16' else 'false'}, {n}, {scale}>")
        calls.append(f"""{{
  static const unsigned char hi[64][{n // 4}] = {{{table(hi_rows)}}};
  static const unsigned char lo[64][{n // 2}] = {{{table(lo_rows)}}};
  for (int c = 0; c < 64; ++c) {{
    unsigned short o[{n}];
    {func}(hi[c], lo[c], o);
    printf("{k}");
    for (int i = 0; i < {n}; ++i) printf(" %u", o[i]);
    printf("\\n");
  }}
}}""")
    rows = _run(cxx, tmp_path, calls)
    for k, (s, dst, n, scale) in enumerate(cases):
        got = np.array(rows[k])
        bad = np.argwhere(got != np.array(wants[k]))
        assert bad.size == 0, (s.name, dst, n, scale, [(int(c), int(i)) for c, i in bad[:4]])


def _check_grouped_casts(tmp_path, cases) -> None:
    """Run grouped casts of codes in bytes on the host and compare them bit for bit. `cases`:
    (label, func, n, parts, rounds), each round (groups, want, zs): the bytes [n / 32, bytes a
    group] split into up to three parts of `parts` bytes a group, the n results' wanted f16 /
    bf16 bits, and per-pair subtrahends (`fast_cast_bytes_z`), per-result zero points
    (`fast_cast_nibbles3_z`) or None; `func(p0, p1, p2[, zs], out)` casts them."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    table = lambda rs: ", ".join("{" + ", ".join(map(str, r)) + "}" for r in rs)  # noqa
    calls = []
    for k, (_, func, n, parts, rounds) in enumerate(cases):
        rows = [[], [], []]
        for groups, _, _ in rounds:
            at = 0
            for p, size in enumerate(parts):
                rows[p].append(groups[:, at:at + size].ravel().tolist() or [0])
                at += size
        decls = [f"  alignas(4) static const unsigned char p{p}[{len(rounds)}]"
                 f"[{len(rows[p][0])}] = {{{table(rows[p])}}};" for p in range(3)]
        zs = rounds[0][2] is not None
        if zs:
            decls.append(f"  static const unsigned zs[{len(rounds)}][{len(rounds[0][2])}] = "
                         f"{{{table([z for _, _, z in rounds])}}};")
        newline = "\n"
        calls.append(f"""{{
{newline.join(decls)}
  for (int c = 0; c < {len(rounds)}; ++c) {{
    unsigned short o[{n}];
    {func}(p0[c], p1[c], p2[c], {"zs[c], " if zs else ""}o);
    printf("{k}");
    for (int i = 0; i < {n}; ++i) printf(" %u", o[i]);
    printf("\\n");
  }}
}}""")
    got_rows = _run(cxx, tmp_path, calls)
    for k, (label, _, _, _, rounds) in enumerate(cases):
        got, want = np.array(got_rows[k]), np.array([w for _, w, _ in rounds])
        bad = np.argwhere(got != want)
        assert bad.size == 0, (label, [(int(c), int(i)) for c, i in bad[:4]])


def _bits(dst: str, values) -> np.ndarray:
    """The f16 / bf16 bits of `values` as a store converts them (int64)."""
    return np.asarray(store_cast(dt.resolve(dst), np.asarray(values, np.float64))) \
        .view(np.uint16).astype(np.int64)


def _bf16(dst: str) -> str:
    return "true" if dst == "bfloat16" else "false"


def test_six_and_seven_bit_codes_in_bytes_are_cast_exactly(tmp_path):
    """`fast_cast_bytes<B, BF16, N, T, P0, P1, P2>`: 6- and 7-bit codes stored 32 in 4 B bytes
    (dtypes/packing.py `pack_bytes`: 4 B in the bytes' low bits, the rest spread over their top
    bits), the bytes of each group split over up to three parts (as the quantized matmul loads
    them, and otherwise), every code at every position, minus T from 0 to 127, to f16 and bf16:
    bit for bit the interpreter's decode and subtraction of whole numbers (block/vm_ops.py
    `_cast_bytes`)."""
    from tilecraft.dtypes.packing import pack_bytes

    split = {7: ((16, 8, 4), (28, 0, 0), (4, 12, 12)), 6: ((16, 8, 0), (24, 0, 0), (8, 4, 12))}
    cases = []
    for b in (6, 7):
        for n, dst, t, parts in itertools.product((32, 64), ("float16", "bfloat16"),
                                                   (0, 5, 64, 127), split[b]):
            rounds = []
            for c in range(1 << b):
                codes = (c + 5 * np.arange(n)) % (1 << b)  # every code at every position
                groups = pack_bytes(codes.astype(np.uint8), b).reshape(n // 32, 4 * b)
                rounds.append((groups, _bits(dst, codes - t), None))
            func = f"tc::fast_cast_bytes<{b}, {_bf16(dst)}, {n}, {t}, {', '.join(map(str, parts))}>"
            cases.append((func, func, n, parts, rounds))
    _check_grouped_casts(tmp_path, cases)


def test_floats_in_bytes_are_cast_exactly(tmp_path):
    """`fast_cast_bytes_float<B, E, BF16, N, S, P0, P1, P2>`: 6- and 7-bit floats with 2 and 3
    mantissa bits (e3m2, e4m2, e2m3, e3m3) in bytes with each byte's sign at bit 7
    (`pack_bytes(..., sign_at_top=True)`), every code at every position, to f16 and bf16 times
    2^S from 0 to the bottom: bit for bit the interpreter's decode, scale and conversion
    (block/vm_ops.py `_cast_bytes`)."""
    from tilecraft.dtypes.packing import pack_bytes

    cases = []
    for src, parts in (("float6_e3m2", (16, 8, 0)), ("float7_e4m2", (16, 8, 4)),
                       ("float6_e2m3", (16, 8, 0)), ("float7_e3m3", (28, 0, 0))):
        s = dt.resolve(src)
        for dst, n in itertools.product(("float16", "bfloat16"), (32, 64)):
            bottom = (127 if dst == "bfloat16" else 15) - s.bias
            for scale in sorted({0, -1, -bottom}):
                rounds = []
                for c in range(1 << s.bits):
                    codes = (c + 5 * np.arange(n)) % (1 << s.bits)
                    groups = pack_bytes(codes.astype(np.uint8), s.bits, sign_at_top=True)
                    values = s.decode(codes).astype(np.float64) * 2.0 ** scale
                    rounds.append((groups.reshape(n // 32, 4 * s.bits), _bits(dst, values),
                                   None))
                func = (f"tc::fast_cast_bytes_float<{s.bits}, {s.exponent_bits}, {_bf16(dst)}, "
                        f"{n}, {scale}, {', '.join(map(str, parts))}>")
                cases.append((func, func, n, parts, rounds))
    _check_grouped_casts(tmp_path, cases)


def test_codes_in_bytes_minus_zero_points_per_element_are_cast_exactly(tmp_path):
    """`fast_cast_bytes_z<B, BF16, N, P0, P1, P2>`: the same bytes minus each element's own
    whole zero point (the subtrahends magic + T a half, T < 128), every code at every position,
    zero points from 0 to 127 varying by element: bit for bit the interpreter's cast, then the
    subtraction (the fused form of the quantized matmul's per-group zero codes)."""
    from tilecraft.dtypes.packing import pack_bytes

    cases = []
    for b, n, dst in itertools.product((6, 7), (32, 64), ("float16", "bfloat16")):
        parts = (16, 8, 4) if b == 7 else (16, 8, 0)
        magic = 0x4300 if dst == "bfloat16" else 0x6400
        rounds = []
        for c in range(1 << b):
            codes = (c + 5 * np.arange(n)) % (1 << b)
            zeros = (3 * c + 11 * np.arange(n)) % 128  # (T per element: 0..127)
            groups = pack_bytes(codes.astype(np.uint8), b).reshape(n // 32, 4 * b)
            zs = [(magic + int(zeros[2 * q])) | (magic + int(zeros[2 * q + 1])) << 16
                  for q in range(n // 2)]
            rounds.append((groups, _bits(dst, codes - zeros), zs))
        func = f"tc::fast_cast_bytes_z<{b}, {_bf16(dst)}, {n}, {', '.join(map(str, parts))}>"
        cases.append((func, func, n, parts, rounds))
    _check_grouped_casts(tmp_path, cases)


def test_three_bit_codes_in_nibbles_are_cast_exactly(tmp_path):
    """`fast_cast_nibbles3<BF16, N, T, P0, P1, P2>`: 3-bit codes stored 32 in 12 bytes
    (dtypes/packing.py `pack_bytes(codes, 3)`: 24 in the nibbles' low bits, 8 over their top
    bits), every code at every position, minus T from 0 to 63, to f16 and bf16, the bytes of a
    group split as the quantized matmul loads them (8 + 4) and otherwise: bit for bit the
    interpreter's decode and subtraction (block/vm_ops.py `_cast_bytes`)."""
    from tilecraft.dtypes.packing import pack_bytes

    cases = []
    for n, dst, t, parts in itertools.product((32, 64), ("float16", "bfloat16"), (0, 4, 11, 63),
                                              ((8, 4, 0), (12, 0, 0), (4, 4, 4))):
        rounds = []
        for c in range(8):
            codes = (c + 5 * np.arange(n) + np.arange(n) // 8) % 8
            groups = pack_bytes(codes.astype(np.uint8), 3).reshape(n // 32, 12)
            rounds.append((groups, _bits(dst, codes - t), None))
        func = f"tc::fast_cast_nibbles3<{_bf16(dst)}, {n}, {t}, {', '.join(map(str, parts))}>"
        cases.append((func, func, n, parts, rounds))
    _check_grouped_casts(tmp_path, cases)


def test_three_bit_codes_in_nibbles_minus_zero_points_per_element_are_cast_exactly(tmp_path):
    """`fast_cast_nibbles3_z<BF16, N, T, P0, P1, P2>`: 3-bit codes in nibbles minus T plus each
    result's own whole zero point, every code at every position, T + zero over the whole range
    the nibbles' trick keeps exact (below 64 to f16, 128 to bf16), zeros varying by element:
    bit for bit the interpreter's cast, then the subtraction (the quantized matmul's uint3
    zero codes)."""
    from tilecraft.dtypes.packing import pack_bytes

    cases = []
    for n, dst, t, parts in itertools.product((32, 64), ("float16", "bfloat16"), (0, 5),
                                              ((8, 4, 0), (4, 4, 4))):
        limit = (128 if dst == "bfloat16" else 64) - t
        rounds = []
        for c in range(8):
            codes = (c + 5 * np.arange(n) + np.arange(n) // 8) % 8
            zeros = (3 * c + 11 * np.arange(n)) % limit
            groups = pack_bytes(codes.astype(np.uint8), 3).reshape(n // 32, 12)
            rounds.append((groups, _bits(dst, codes - t - zeros), zeros.tolist()))
        func = f"tc::fast_cast_nibbles3_z<{_bf16(dst)}, {n}, {t}, {', '.join(map(str, parts))}>"
        cases.append((func, func, n, parts, rounds))
    _check_grouped_casts(tmp_path, cases)
