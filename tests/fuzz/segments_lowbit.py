"""The low-bit segment: codes of 1- to 8-bit types cast in registers (the Tilus level).

Each thread loads the bytes of its n codes (`T.load_global` in a uint8 layout), views them as a
1- to 8-bit integer or a 4- or 6-bit float (in natural order, or 1-, 2- and 4-bit integers in
interleaved words: `interleave_words`), casts them to float16, bfloat16 or float32 in a (rows,
n / rows) layout, then maybe subtracts a whole constant, multiplies by a power of two, or
subtracts per-row zero codes `cast(z & mask)`, and stores the result. It runs the fast register
casts and their fused forms (block/select_cast.py) against a decode written here from the packed
bit strings as docs/dtypes.md defines them: a thread's codes one little-endian bit string,
element i at bit i * b (interleaved: element j of each 32-bit word at code position (j % 2) *
16/b + j // 2). Every value is a whole number or a short binary fraction: exact in every output
type, so the model has no error bound.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import values as M
from .tiles import Ctx, Param, Segment

INTS = [f"uint{b}" for b in range(1, 9)] + [f"int{b}" for b in range(2, 9)]
FLOATS = {"float4_e2m1": (2, 1), "float6_e3m2": (3, 2), "float6_e2m3": (2, 3)}  # (E, M)


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
        self.dtype = rng.choice(INTS + INTS + list(FLOATS))
        self.b = b = bits_of(self.dtype)
        # (whole 32-bit words, and zero masks of the codes' width, half the time: the fused
        # zero-code casts take whole words and zeros the mask keeps in range)
        sizes = [8, 16, 32, 64] if ctx.threads <= 128 else [8, 16, 32]
        words = [k for k in sizes if k * b % 32 == 0]
        self.n = n = rng.choice(words if words and rng.random() < 0.5 else sizes)
        self.rows = rng.choice([r for r in (1, 2, 4) if n // r >= 8])
        self.interleaved = b in (1, 2, 4) and self.dtype not in FLOATS \
            and n % (32 // b) == 0 and rng.random() < 0.5
        self.out = D.get(rng.choice(["float16", "float16", "bfloat16", "float32"]))
        ops = ["none", "pow2"] + (["const"] if self.dtype not in FLOATS else [])
        ops += ["zeros", "zeros"] if self.dtype.startswith("uint") else []
        self.op = rng.choice(ops)
        self.const = rng.randint(1, 63)
        self.shift = rng.choice([-2, -1]) if self.dtype in FLOATS else rng.randint(1, 3)
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
               f"offset=[{blk} * {t * self.nbytes}])",
               f'{wc} = T.view({wb}, dtype="{self.dtype}", layout={codes})',
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
