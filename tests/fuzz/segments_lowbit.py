"""The low-bit segment: codes of 1- to 8-bit types cast in registers (the Tilus level).

Each thread loads the bytes of its n codes (`T.load_global` in a uint8 layout) and either views
them as a 1- to 8-bit integer or a 4- or 6-bit float (in natural order, or 1-, 2- and 4-bit
integers in interleaved words: `interleave_words`) and casts them to float16, bfloat16 or
float32 in a (rows, n / rows) layout, or (a quarter of the time) casts 3-, 6-, 7-bit integer or
6-, 7-bit float codes stored in bytes by `T.cast_bytes` (minus its offset, times its scale);
then maybe subtracts a whole constant, multiplies by a power of two, or subtracts per-row zero
codes `cast(z & mask)`, and stores the result. It runs the fast register casts and their fused
forms (block/select_cast.py) against a decode written here from the packed bit strings as
docs/dtypes.md defines them: a thread's codes one little-endian bit string, element i at bit
i * b (interleaved: element j of each 32-bit word at code position (j % 2) * 16/b + j // 2), or
the groups of "Codes in bytes" (`bytes_codes`). Every value is a whole number or a short binary
fraction, exact in its output type, or rounded once where the model rounds it too: the model
has no error bound.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import values as M
from .tiles import Ctx, Param, Segment

INTS = [f"uint{b}" for b in range(1, 9)] + [f"int{b}" for b in range(2, 9)]
FLOATS = {"float4_e2m1": (2, 1), "float6_e3m2": (3, 2), "float6_e2m3": (2, 3),  # (E, M)
          "float7_e4m2": (4, 2), "float7_e3m3": (3, 3)}
VIEWED = INTS + INTS + ["float4_e2m1", "float6_e3m2", "float6_e2m3"]
IN_BYTES = ["uint3", "uint6", "uint7", "float6_e3m2", "float6_e2m3", "float7_e4m2",
            "float7_e3m3"]  # (T.cast_bytes)


def bits_of(name: str) -> int:
    return int(name.split("_")[0].lstrip("uintfloat"))


def decode(codes: np.ndarray, name: str) -> np.ndarray:
    """The values of `codes` (whole numbers below 2^bits) of type `name`, as float64."""
    c = codes.astype(np.int64)
    if name in FLOATS:
        e_bits, m_bits = FLOATS[name]
        bias = (1 << (e_bits - 1)) - 1
        sign = np.where((c >> (e_bits + m_bits)) & 1, -1.0, 1.0)
        e, m = (c >> m_bits) & ((1 << e_bits) - 1), c & ((1 << m_bits) - 1)
        mag = np.where(e == 0, np.ldexp(m / (1 << m_bits), 1 - bias),
                       np.ldexp(1 + m / (1 << m_bits), e - bias))
        return sign * mag
    b = bits_of(name)
    if name.startswith("int"):
        c = np.where(c >= 1 << (b - 1), c - (1 << b), c)
    return c.astype(np.float64)


def bytes_codes(data: list[int], b: int, sign_at_top: bool) -> list[int]:
    """The 32 codes of one group of 4 b bytes as docs/dtypes.md "Codes in bytes" stores them:
    3 bits in nibbles (word w's nibble (j % 2) * 4 + j // 2 holds code 8 w + j in its low 3
    bits, and bit w of code 24 + j in its top bit); 6 and 7 bits: code e < 4 b in byte e's low b
    bits, code 4 b + 4 j + k's bits [t i, t i + t) (t = 8 - b spare bits) in the top bits of
    byte 4 (j b / t + i) + k; with `sign_at_top` each byte's bit 7 is the code's top bit and
    the spare bits sit below it."""
    if b == 3:
        def nib(w, p):
            return (data[4 * w + p // 2] >> (4 * (p % 2))) & 15
        place = [(j % 2) * 4 + j // 2 for j in range(8)]
        low = [nib(w, place[j]) & 7 for w in range(3) for j in range(8)]
        return low + [sum(((nib(w, place[j]) >> 3) & 1) << w for w in range(3))
                      for j in range(8)]
    t, per = 8 - b, b // (8 - b)
    if sign_at_top:  # back to the plain form: the code's b bits low, the spare bits above
        data = [(x & ((1 << (b - 1)) - 1)) | ((x >> 7) << (b - 1))
                | (((x >> (b - 1)) & ((1 << t) - 1)) << b) for x in data]
    low = [x & ((1 << b) - 1) for x in data]
    spread = [sum(((data[4 * (j * per + i) + k] >> b) & ((1 << t) - 1)) << (t * i)
                  for i in range(per)) for j in range(t) for k in range(4)]
    return low + spread


def positions(n: int, b: int, interleaved: bool) -> list[int]:
    """The code position (in units of b bits) of each of a thread's n elements."""
    if not interleaved:
        return list(range(n))
    per = 32 // b
    return [i - i % per + (i % per % 2) * (per // 2) + i % per // 2 for i in range(n)]


class LowbitSeg(Segment):
    tilus = True  # (run on the block VM: the tile interpreter refuses Tilus instructions)
    imports = ("from tilecraft.layout import spatial",
               "from tilecraft.layout.permute import interleave_words")

    def __init__(self, ctx: Ctx, rng):
        nm = ctx.names
        # codes in bytes (T.cast_bytes, groups of 32 codes a thread) a quarter of the time
        self.in_bytes = rng.random() < 0.25
        self.dtype = rng.choice(IN_BYTES if self.in_bytes else VIEWED)
        self.b = b = bits_of(self.dtype)
        # (whole 32-bit words, and zero masks of the codes' width, half the time: the fused
        # zero-code casts take whole words and zeros the mask keeps in range)
        sizes = [8, 16, 32, 64] if ctx.threads <= 128 else [8, 16, 32]
        words = [k for k in sizes if k * b % 32 == 0]
        if self.in_bytes:
            sizes = words = [32, 64] if ctx.threads <= 128 else [32]
        self.n = n = rng.choice(words if words and rng.random() < 0.5 else sizes)
        self.rows = rng.choice([r for r in (1, 2, 4) if n // r >= 8])
        self.interleaved = b in (1, 2, 4) and self.dtype not in FLOATS \
            and n % (32 // b) == 0 and rng.random() < 0.5
        self.out = D.get(rng.choice(["float16", "float16", "bfloat16"] +
                                    ([] if self.in_bytes else ["float32"])))
        ops = ["none", "pow2"] + (["const"] if self.dtype not in FLOATS else [])
        ops += ["zeros", "zeros"] if self.dtype.startswith("uint") else []
        self.op = rng.choice(ops)
        self.const = rng.randint(1, 63)
        self.shift = rng.choice([-2, -1]) if self.dtype in FLOATS else rng.randint(1, 3)
        # cast_bytes' own offset (ints: below 128, 64 for 3 bits) and scale (floats: 2^s down
        # to the biases' difference; no further multiply then, whose rounding could differ)
        self.offset = rng.choice([0, 0, rng.randint(1, 63 if b == 3 else 127)])
        bottom = 0
        if self.dtype in FLOATS:
            e_bits = FLOATS[self.dtype][0]
            bottom = -((127 if self.out.name == "bfloat16" else 15) - ((1 << (e_bits - 1)) - 1))
        self.scale = rng.choice([0, 0, -1, bottom]) if self.in_bytes and bottom else 0
        if self.scale:
            self.op = "none"
        self.mask = (1 << b) - 1 if rng.random() < 0.5 else \
            rng.choice([1, 3, 7, 15, 31, 63, 127, 255])
        self.nbytes = n * b // 8
        blocks = ctx.grid[0] * ctx.grid[1]
        self.w = Param(nm.fresh("W"), (blocks * ctx.threads * self.nbytes,), "uint8",
                       full_range=True)
        self.z = Param(nm.fresh("Z"), (blocks * ctx.threads, self.rows, 1), "uint8",
                       full_range=True)
        self.y = Param(nm.fresh("Y"), (blocks * ctx.threads, self.rows, n // self.rows),
                       self.out.name)
        self._params = [self.w] + ([self.z] if self.op == "zeros" else []) + [self.y]
        self.names = [nm.fresh(p) for p in ("wb", "wc", "wf", "zc", "wo")]

    def lines(self, ctx: Ctx) -> list[str]:
        wb, wc, wf, zc, wo = self.names
        t, n, rows = ctx.threads, self.n, self.rows
        blk = f"({ctx.by} * {ctx.grid[0]} + {ctx.bx})"
        grid = f"spatial({t}, 1, 1).local(1, {rows}, {n // rows})"
        codes = f"interleave_words({grid}, {self.b})" if self.interleaved else grid
        out = [f"{wb} = T.load_global({self.w.name}, layout=spatial({t}).local({self.nbytes}), "
               f"offset=[{blk} * {t * self.nbytes}])"]
        if self.in_bytes:
            extra = f", scale={self.scale}" if self.dtype in FLOATS else \
                f", offset={self.offset}"
            out.append(f'{wf} = T.cast_bytes([{wb}], "{self.dtype}", "{self.out.name}", '
                       f"layout={grid}{extra})")
        else:
            out += [f'{wc} = T.view({wb}, dtype="{self.dtype}", layout={codes})',
                    f'{wf} = T.cast({wc}, "{self.out.name}", layout={grid})']
        res = wf
        if self.op == "const":
            out.append(f"{wo} = {wf} - {self.const}")
            res = wo
        elif self.op == "pow2":
            out.append(f"{wo} = {wf} * {2.0 ** self.shift}")
            res = wo
        elif self.op == "zeros":
            out += [f"{zc} = T.load_global({self.z.name}, layout=spatial({t}, 1, 1)"
                    f".local(1, {rows}, 1), offset=[{blk} * {t}, 0, 0])",
                    f'{wo} = {wf} - T.cast({zc} & {self.mask}, "{self.out.name}")']
            res = wo
        out.append(f"T.store_global({res}, {self.y.name}, offset=[{blk} * {t}, 0, 0])")
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        t, n, b = ctx.threads, self.n, self.b
        raw = np.array(state[self.w.name].full(self.w.shape).v, dtype=np.int64)
        raw = raw.reshape(-1, self.nbytes)  # one row a thread of every block
        weights = 1 << (8 * np.arange(self.nbytes, dtype=object))
        strings = [sum(int(v) * int(w) for v, w in zip(row, weights)) for row in raw]
        if self.in_bytes:
            g = 4 * b  # bytes a group of 32 codes
            codes = np.array([[c for k in range(0, self.nbytes, g)
                               for c in bytes_codes([int(x) for x in row[k:k + g]], b,
                                                    self.dtype in FLOATS)] for row in raw])
            v = decode(codes, self.dtype) * 2.0 ** self.scale
            if self.dtype not in FLOATS:
                v = v - self.offset
        else:
            at = positions(n, b, self.interleaved)
            codes = np.array([[(s >> (b * p)) & ((1 << b) - 1) for p in at] for s in strings])
            v = decode(codes, self.dtype)
        if self.op == "const":
            v = v - self.const
        elif self.op == "pow2":
            v = v * 2.0 ** self.shift
        elif self.op == "zeros":
            z = np.array(state[self.z.name].full(self.z.shape).v, dtype=np.int64)[..., 0]
            v = v - np.repeat(z & self.mask, n // self.rows, axis=1)
        v = D.round_float(v, self.out).reshape(len(strings), self.rows, n // self.rows)
        assert len(strings) == ctx.grid[0] * ctx.grid[1] * t
        state[self.y.name] = M.exact(v, self.out)
