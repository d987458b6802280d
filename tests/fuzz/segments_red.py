"""Reduction segments: T.reduce_* (every kind, clear True/False, either dim) and T.cumsum.

Integer reductions are exact modulo 2^bits of the destination (the destination has the
source's type), abs wrapping too (absmax of an int8 row of -128 is -128); float reductions
may sum in any order in at least float32 (error bound (n + 2) * u32 * sum|x|); max/min are
exact.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import values as M
from .segments import _alloc
from .tiles import Ctx, Param, Segment, pick_dtype, place, read_tile, tile_shape, write_tile
from .values import V

U32 = D.ALL["float32"].u
KINDS = ("sum", "max", "min", "abssum", "absmax")


def reduce_model(kind: str, x: V, dim: int, dst: D.DType, old: V | None) -> V:
    """`kind` of x over `dim` into dtype dst (combined with `old` when given)."""
    dc = np.any(x.dc, axis=dim)
    n = x.shape[dim]
    if not dst.is_float:
        vals = x.v
        if kind.startswith("abs"):  # |MIN| wraps to MIN in the accumulator (= the type)
            vals = np.asarray(D.wrap(np.asarray(np.abs(vals), dtype=object), dst), dtype=object)
        if kind in ("sum", "abssum"):
            r = np.sum(vals, axis=dim) if n else np.zeros(dc.shape, dtype=object)
            if old is not None:
                r = r + old.v
        else:
            r = (np.max if kind.endswith("max") else np.min)(vals, axis=dim)
            if old is not None:
                r = (np.maximum if kind.endswith("max") else np.minimum)(r, old.v)
        r = np.asarray(D.wrap(np.asarray(r, dtype=object), dst), dtype=object)
        return V(dst, r, np.zeros(r.shape), dc | (old.dc if old is not None else False))
    vals, e = x.v, x.e
    if kind.startswith("abs"):
        vals = np.abs(vals)
    if kind in ("sum", "abssum"):
        r = np.sum(vals, axis=dim)
        err = np.sum(e, axis=dim) + (n + 2) * U32 * np.sum(np.abs(vals), axis=dim)
        if old is not None:
            r, err = r + old.v, err + old.e + 2 * U32 * (np.abs(r) + np.abs(old.v))
    else:
        fn = np.max if kind.endswith("max") else np.min
        r, err = fn(vals, axis=dim), np.max(e, axis=dim)
        if old is not None:
            r = (np.maximum if kind.endswith("max") else np.minimum)(r, old.v)
            err = np.maximum(err, old.e)
    out = V(D.ALL["float32"], np.asarray(r, np.float64), np.asarray(err, np.float64),
            dc | (old.dc if old is not None else False))
    return M.cast(out, dst)


class RedSeg(Segment):
    """X -> a (fragment or shared) -> T.reduce_<kind>(a, r, dim, clear) -> Y[by, bx * L];
    with clear=False, r starts from Y's old values. Optionally a T.Parallel epilogue that
    broadcasts r against a (softmax-like) into Z."""

    def __init__(self, ctx: Ctx):
        r, nm, f = ctx.rng, ctx.names, ctx.feats
        self.shape = shape = tile_shape(ctx, per_thread=8, two_d=1.0)
        self.pl = place(ctx, shape)
        self.src_t = pick_dtype(ctx)
        self.dst_t = self.src_t
        if self.src_t.is_float and r.random() < 0.6:
            self.dst_t = D.ALL["float32"]
        self.kind = r.choice(KINDS)
        self.dim = r.choice([0, 1, 1, -1])
        self.clear = r.random() < 0.6
        self.L = shape[1 - self.dim % 2]
        self.x = Param(nm.fresh("X"), self.pl.tensor, self.src_t.name)
        self.y = Param(nm.fresh("Y"), (ctx.grid[1], ctx.grid[0] * self.L), self.dst_t.name)
        self.a, self.r = nm.fresh("a"), nm.fresh("r")
        self.ascope = "shared" if f.reduce_shared and r.random() < 0.1 else "fragment"
        self.form = r.choice(["named", "named", "generic", "positional"])
        self.quiet = r.random() < 0.5  # leave out default keywords
        self.epi = None
        if r.random() < 0.35:
            self.epi = (nm.fresh("o"), [nm.fresh("i"), nm.fresh("j")],
                        Param(nm.fresh("Z"), self.pl.tensor, self.dst_t.name))
        self._params = [self.x, self.y] + ([self.epi[2]] if self.epi else [])

    def lines(self, ctx: Ctx) -> list[str]:
        a, rr, L = self.a, self.r, self.L
        out = [_alloc(a, self.ascope, self.shape, self.src_t),
               _alloc(rr, "fragment", (L,), self.dst_t),
               f"T.copy({self.pl.at(ctx, self.x.name)}, {a})"]
        ycorner = f"{self.y.name}[{ctx.by}, {ctx.bx} * {L}]"
        if not self.clear:
            out.append(f"T.copy({ycorner}, {rr})")
        clear = "" if self.clear and self.quiet else f", clear={self.clear}"
        if self.form == "generic":
            out.append(f'T.reduce({a}, {rr}, "{self.kind}", dim={self.dim}{clear})')
        elif self.form == "positional":
            out.append(f"T.reduce_{self.kind}({a}, {rr}, {self.dim}, {self.clear})")
        else:
            out.append(f"T.reduce_{self.kind}({a}, {rr}, dim={self.dim}{clear})")
        out.append(f"T.copy({rr}, {ycorner})")
        if self.epi:
            o, (i, j), z = self.epi
            ri = i if self.dim % 2 == 1 else j
            out += [_alloc(o, "fragment", self.shape, self.dst_t),
                    f"for {i}, {j} in T.Parallel({self.shape[0]}, {self.shape[1]}):",
                    f'    {o}[{i}, {j}] = T.cast({a}[{i}, {j}], "{self.dst_t.name}") - {rr}[{ri}]',
                    f"T.copy({o}, {self.pl.at(ctx, z.name)})"]
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        dim = self.dim % 2
        for bx, by in self.blocks(ctx):
            starts = self.pl.starts(bx, by, ctx.grid[0])
            a = read_tile(state[self.x.name], starts, self.shape)
            y = state[self.y.name]
            old = None if self.clear else read_tile(y, (by, bx * self.L), (1, self.L))[0]
            red = reduce_model(self.kind, a, dim, self.dst_t, old)
            state[self.y.name] = write_tile(y, (by, bx * self.L), red[None, :])
            if self.epi:
                z = self.epi[2].name
                ac = M.cast(a, self.dst_t)
                rb = red[:, None] if dim == 1 else red[None, :]
                diff = M.binop("-", ac, rb)
                state[z] = write_tile(state[z], starts, diff.full(self.shape))


def cumsum_model(x: V, dim: int, reverse: bool, dst: D.DType) -> V:
    vals, e = x.v, x.e
    if reverse:
        vals, e = np.flip(vals, dim), np.flip(e, dim)
    dc = np.logical_or.accumulate(np.flip(x.dc, dim) if reverse else x.dc, axis=dim)
    dc = np.flip(dc, dim) if reverse else dc
    if not x.t.is_float:  # sums in 64 bits, stored modulo 2^bits of dst
        r = np.cumsum(vals, axis=dim)
        r = np.asarray(D.wrap(np.asarray(np.flip(r, dim) if reverse else r, dtype=object), dst),
                       dtype=object)
        return V(dst, r, np.zeros(r.shape), dc)
    n = np.arange(1, vals.shape[dim] + 1).reshape([-1 if k == dim % vals.ndim else 1
                                                   for k in range(vals.ndim)])
    r = np.cumsum(vals, axis=dim)
    err = np.cumsum(e, axis=dim) + (n + 2) * U32 * np.cumsum(np.abs(vals), axis=dim)
    if reverse:
        r, err = np.flip(r, dim), np.flip(err, dim)
    return M.cast(V(D.ALL["float32"], r, err, dc), dst)


class CumSeg(Segment):
    """X -> s (shared or fragment) -> T.cumsum(s[, d], dim, reverse) -> Y."""

    def __init__(self, ctx: Ctx):
        r, nm = ctx.rng, ctx.names
        self.shape = tile_shape(ctx, per_thread=8)
        self.pl = place(ctx, self.shape)
        self.t = pick_dtype(ctx)
        self.dst_t = self.t if r.random() < 0.8 else pick_dtype(ctx, "float" if self.t.is_float
                                                               else "int")
        self.dim = r.randrange(len(self.shape))
        self.reverse = r.random() < 0.4
        self.loud = r.random() < 0.3  # spell out reverse=False
        self.s, self.scope = nm.fresh("s"), r.choice(["shared", "shared", "fragment"])
        self.d = nm.fresh("d") if (r.random() < 0.4 or self.dst_t is not self.t) else None
        self.x = Param(nm.fresh("X"), self.pl.tensor, self.t.name)
        self.y = Param(nm.fresh("Y"), self.pl.tensor, self.dst_t.name)
        self._params = [self.x, self.y]

    def lines(self, ctx: Ctx) -> list[str]:
        out = [_alloc(self.s, self.scope, self.shape, self.t)]
        if self.d:
            out.append(_alloc(self.d, self.scope, self.shape, self.dst_t))
        out.append(f"T.copy({self.pl.at(ctx, self.x.name)}, {self.s})")
        rev = f", reverse={self.reverse}" if self.reverse or self.loud else ""
        dst = f", {self.d}" if self.d else ""
        out.append(f"T.cumsum({self.s}{dst}, dim={self.dim}{rev})")
        out.append(f"T.copy({self.d or self.s}, {self.pl.at(ctx, self.y.name)})")
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        for bx, by in self.blocks(ctx):
            starts = self.pl.starts(bx, by, ctx.grid[0])
            x = read_tile(state[self.x.name], starts, self.shape)
            out = cumsum_model(x, self.dim, self.reverse, self.dst_t)
            state[self.y.name] = write_tile(state[self.y.name], starts, out)
