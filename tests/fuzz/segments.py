"""Tile-level segments: copies, element-wise T.Parallel bodies, reductions, cumsum.

A segment is a piece of one kernel with its own tensors; `lines()` prints it, `model()` runs it
on model values for every block (grid blocks in any order: no two blocks write one element).
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import values as M
from .exprs import DATA, INDEX, ExprGen, Ref
from .stmts import BodyGen, Let, Store, Target, render, run, top_lets
from .tiles import (Ctx, Param, Segment, fill, pick_dtype, place, read_tile, tile_shape,
                    unknown, write_tile)


def _scope(ctx: Ctx, shape: tuple, allow_local: bool = True) -> str:
    opts = ["shared", "fragment", "fragment"]
    if allow_local and ctx.feats.local and int(np.prod(shape)) <= 64:
        opts.append("local")
    return ctx.rng.choice(opts)


def _alloc(name: str, scope: str, shape: tuple, t: D.DType) -> str:
    return f'{name} = T.alloc_{scope}({shape}, "{t.name}")'


def _fill_value(ctx: Ctx, t: D.DType):
    if t.is_float:
        return ctx.rng.choice([0.5, -2.0, 3.0])
    return ctx.rng.choice([0, 7, -3 if t.signed else 3])


class CopySeg(Segment):
    """X -> b1 [-> b2 [-> b3]] -> Y with casts; optionally a partial slice into a filled tile,
    or a block-level `if` on a device value choosing between a copy and a fill."""

    def __init__(self, ctx: Ctx):
        r, nm = ctx.rng, ctx.names
        shape = tile_shape(ctx)
        self.pin, self.pout = place(ctx, shape), place(ctx, shape)
        self.x = Param(nm.fresh("X"), self.pin.tensor, pick_dtype(ctx).name)
        self.y = Param(nm.fresh("Y"), self.pout.tensor, pick_dtype(ctx).name)
        self.chain = []
        for k in range(r.choice([1, 1, 2, 3])):
            prev = self.chain[-1][1] if self.chain else "global"
            sc = _scope(ctx, shape, allow_local=prev != "fragment")
            self.chain.append((nm.fresh("b"), sc, pick_dtype(ctx)))
        self._params = [self.x, self.y]
        self.fillv = _fill_value(ctx, self.chain[0][2])
        self.part = None
        if ctx.feats.partial and r.random() < 0.25:
            ext = tuple(r.randint(1, min(n, size)) for n, size in zip(shape, self.pin.tensor))
            self.part = (ext, tuple(r.randint(0, n - e) for n, e in zip(shape, ext)))
        self.cond = None
        if ctx.feats.device_if and r.random() < 0.25:
            self.cond = Param(nm.fresh("C"), (ctx.grid[1], ctx.grid[0]), "int32")
            self._params.append(self.cond)
        self.shape = shape

    def lines(self, ctx: Ctx) -> list[str]:
        out = [_alloc(n, sc, self.shape, t) for n, sc, t in self.chain]
        b1 = self.chain[0][0]
        if self.part is not None:
            (ext, at) = self.part
            corner = self.pin.corner(ctx)
            src = ", ".join(f"{c}:{c} + {e}" for c, e in zip(corner, ext))
            dst = ", ".join(f"{a}:{a + e}" for a, e in zip(at, ext))
            load = [f"T.fill({b1}, {self.fillv})", f"T.copy({self.x.name}[{src}], {b1}[{dst}])"]
        else:
            load = [f"T.copy({self.pin.at(ctx, self.x.name)}, {b1})"]
        if self.cond is not None:
            out += [f"if {self.cond.name}[{ctx.by}, {ctx.bx}] > 0:"] + ["    " + s for s in load]
            out += ["else:", f"    T.fill({b1}, {self.fillv})"]
        else:
            out += load
        for (a, _, _), (b, _, _) in zip(self.chain, self.chain[1:]):
            out.append(f"T.copy({a}, {b})")
        out.append(f"T.copy({self.chain[-1][0]}, {self.pout.at(ctx, self.y.name)})")
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        x, t1 = state[self.x.name], self.chain[0][2]
        for bx, by in self.blocks(ctx):
            s_in = self.pin.starts(bx, by, ctx.grid[0])
            if self.part is not None:
                ext, at = self.part
                tile = M.cast(fill(self.shape, self.fillv, t1), t1)
                sub = M.cast(read_tile(x, s_in, ext), t1)
                sl = tuple(slice(a, a + e) for a, e in zip(at, ext))
                tile.v[sl], tile.e[sl], tile.dc[sl] = sub.v, sub.e, sub.dc
            else:
                tile = M.cast(read_tile(x, s_in, self.shape), t1)
            if self.cond is not None and not state[self.cond.name].v[by, bx] > 0:
                tile = M.cast(fill(self.shape, self.fillv, t1), t1)
            for _, _, t in self.chain[1:]:
                tile = M.cast(tile, t)
            s_out = self.pout.starts(bx, by, ctx.grid[0])
            state[self.y.name] = write_tile(state[self.y.name], s_out, tile)


class EwSeg(Segment):
    """Inputs copied into fragments/shared tiles, a T.Parallel body of lets, ifs, loops and
    stores into an output tile (filled first), copied out."""

    def __init__(self, ctx: Ctx):
        r, nm, f = ctx.rng, ctx.names, ctx.feats
        self.shape = shape = tile_shape(ctx, per_thread=8)
        self.pl = place(ctx, shape)
        self.ins = []
        for _ in range(r.choice([1, 1, 2, 3])):
            p = Param(nm.fresh("X"), self.pl.tensor, pick_dtype(ctx).name)
            self.ins.append((p, nm.fresh("a"), r.choice(["fragment", "fragment", "shared"]),
                             pick_dtype(ctx) if f.casts and r.random() < 0.3 else D.get(p.dtype)))
        self.idx = [nm.fresh("i") for _ in shape]
        self.out_t = pick_dtype(ctx)
        self.o, self.oscope = nm.fresh("o"), r.choice(["fragment", "fragment", "shared"])
        self.y = Param(nm.fresh("Y"), self.pl.tensor, self.out_t.name)
        self.fillv = _fill_value(ctx, self.out_t)
        self.sp = []
        if f.scalars and r.random() < 0.4:
            t = r.choice(["int32", "int32", "float32", "int64", "uint32"])
            val = r.randint(-50, 50) if t != "uint32" else r.randint(0, 2 ** 32 - 1)
            self.sp.append(Param(nm.fresh("s"), (), t, float(val) if t == "float32" else val))
        self._params = [p for p, *_ in self.ins] + [self.y] + self.sp
        eg = ExprGen(r, self.leaves(ctx), f)
        self.target = Target(f"{self.o}[{', '.join(self.idx)}]", "@out", self.out_t)
        rebind = f.rebind and f.rebind_parallel and r.random() < 0.3
        self.body = BodyGen(r, eg, f, nm, rebind=rebind).body([self.target], 0, [],
                                                              r.randint(2, 6))
        if not any(isinstance(s, Store) for s in self.body) or r.random() < 0.5:
            self.body.append(Store(self.target, eg.expr(self.out_t, r.randint(1, 3))))
        # the last values of (up to 3) top-level lets are outputs too, each in its own type
        types = {s.name: s.x.t for s in self.body if isinstance(s, Let)}
        self.traces = []
        for k, name in enumerate(top_lets(self.body)[-4:]):
            t = types[name]
            buf, p = nm.fresh("tr"), Param(nm.fresh("Y"), self.pl.tensor, t.name)
            self.traces.append((buf, p, t))
            self._params.append(p)
            self.body.append(Store(Target(f"{buf}[{', '.join(self.idx)}]", f"@tr{k}", t),
                                   Ref(t, name, name), keep=True))

    def leaves(self, ctx: Ctx) -> list[Ref]:
        out = []
        i32 = D.ALL["int32"]
        for p, b, sc, t in self.ins:
            for form in (["id"] if sc == "fragment" else ["id", "flip", "roll"]):
                out.append(Ref(t, f"{b}[{', '.join(self._index(form))}]", f"{b}@{form}", DATA))
        out += [Ref(i32, v, v, INDEX) for v in self.idx]
        out += [Ref(i32, ctx.bx, "@bx", INDEX), Ref(i32, ctx.by, "@by", INDEX)]
        out += [Ref(D.get(p.dtype), p.name, p.name) for p in self.sp]
        out.append(Ref(self.out_t, f"{self.o}[{', '.join(self.idx)}]", "@out", INDEX))  # own
        return out

    def _index(self, form: str) -> list[str]:
        ix, n = list(self.idx), self.shape
        if form == "flip":
            ix[0] = f"{n[0] - 1} - {ix[0]}"
        elif form == "roll":
            ix[-1] = f"({ix[-1]} + {3 % n[-1]}) % {n[-1]}"
        return ix

    def lines(self, ctx: Ctx) -> list[str]:
        out = [_alloc(b, sc, self.shape, t) for _, b, sc, t in self.ins]
        out.append(_alloc(self.o, self.oscope, self.shape, self.out_t))
        out += [f"T.copy({self.pl.at(ctx, p.name)}, {b})" for p, b, _, _ in self.ins]
        out.append(f"T.fill({self.o}, {self.fillv})")
        out.append(f"for {', '.join(self.idx)} in T.Parallel({', '.join(map(str, self.shape))}):")
        out += render(self.body, 1)
        out.append(f"T.copy({self.o}, {self.pl.at(ctx, self.y.name)})")
        out[len(self.ins) + 1:len(self.ins) + 1] = [_alloc(b, "fragment", self.shape, t)
                                                     for b, _, t in self.traces]
        out += [f"T.copy({b}, {self.pl.at(ctx, p.name)})" for b, p, _ in self.traces]
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        n = self.shape
        grids = np.meshgrid(*[np.arange(k) for k in n], indexing="ij", sparse=True)
        for bx, by in self.blocks(ctx):
            starts = self.pl.starts(bx, by, ctx.grid[0])
            env = {"@bx": M.exact(bx, D.ALL["int32"]), "@by": M.exact(by, D.ALL["int32"])}
            for p in self.sp:
                env[p.name] = state[p.name]
            for v, g in zip(self.idx, grids):
                env[v] = M.exact(g, D.ALL["int32"])
            for p, b, sc, t in self.ins:
                tile = M.cast(read_tile(state[p.name], starts, n), t)
                env[f"{b}@id"] = tile
                env[f"{b}@flip"] = tile[::-1]
                env[f"{b}@roll"] = tile[(..., (np.arange(n[-1]) + 3 % n[-1]) % n[-1])]
            env["@out"] = M.cast(fill(n, self.fillv, self.out_t), self.out_t)
            for k, (_, _, t) in enumerate(self.traces):
                env[f"@tr{k}"] = unknown(t, n)
            run(self.body, env)
            state[self.y.name] = write_tile(state[self.y.name], starts, env["@out"])
            for k, (_, p, _) in enumerate(self.traces):
                state[p.name] = write_tile(state[p.name], starts, env[f"@tr{k}"])
