"""The gather segment: tiles whose copies start at a row read from shared memory.

An index tensor I (uint8) is copied whole into shared memory; a loop of `n` steps (serial or
`T.Pipelined`) copies, each step, the tile of X starting at row (I_s[k] % R) * tm of R
row-slabs (into a shared tile, or straight into a fragment) and adds it into an accumulator,
which goes to Y at the block's place. The copies' offsets read shared memory: the arena must
keep I_s alive and apart, and a barrier must order its store before the first copy issues
(benchmarks/NOTES.md, session 21).
"""

from __future__ import annotations

from . import dtypes as D
from . import values as M
from .segments import _alloc
from .tiles import Ctx, Param, Segment, fill, place, read_tile, write_tile


class GatherSeg(Segment):
    def __init__(self, ctx: Ctx, rng):
        nm = ctx.names
        cap = ctx.threads * 4
        while True:
            self.shape = (rng.choice([1, 2, 4, 8, 16]), rng.choice([8, 16, 32, 64]))
            if self.shape[0] * self.shape[1] <= cap:
                break
        tm, tn = self.shape
        self.slabs = rng.randint(1, 4)
        self.steps = rng.randint(1, 4)
        self.xt = D.get(rng.choice(["float16", "float32"]))
        self.at = D.get("float32")
        self.pout = place(ctx, self.shape)
        self.i = Param(nm.fresh("I"), (self.steps,), "uint8")
        self.x = Param(nm.fresh("X"), (self.slabs * tm, ctx.grid[0] * tn), self.xt.name)
        self.y = Param(nm.fresh("Y"), self.pout.tensor, self.at.name)
        self._params = [self.i, self.x, self.y]
        self.i_s, self.acc = nm.fresh("i_s"), nm.fresh("acc")
        self.t, self.k = nm.fresh("t"), nm.fresh("k")
        self.idx = [nm.fresh("i") for _ in self.shape]
        self.via = rng.choice(["shared", "fragment"])
        self.loop = rng.choice(["serial", "pipelined"]) if ctx.feats.pipelined else "serial"
        self.stages = rng.choice([2, 3])

    def lines(self, ctx: Ctx) -> list[str]:
        tm, tn = self.shape
        k, ij = self.k, ", ".join(self.idx)
        row = f'T.cast({self.i_s}[{k}], "int32") % {self.slabs} * {tm}'
        loop = f"T.Pipelined({self.steps}, num_stages={self.stages})" \
            if self.loop == "pipelined" else f"T.serial({self.steps})"
        return [_alloc(self.i_s, "shared", (self.steps,), D.get("uint8")),
                f"T.copy({self.i.name}[0], {self.i_s})",
                _alloc(self.t, self.via, self.shape, self.xt),
                _alloc(self.acc, "fragment", self.shape, self.at),
                f"T.clear({self.acc})",
                f"for {k} in {loop}:",
                f"    T.copy({self.x.name}[{row}, {ctx.bx} * {tn}], {self.t})",
                f"    for {ij} in T.Parallel({tm}, {tn}):",
                f'        {self.acc}[{ij}] += T.cast({self.t}[{ij}], "float32")',
                f"T.copy({self.acc}, {self.pout.at(ctx, self.y.name)})"]

    def model(self, state: dict, ctx: Ctx) -> None:
        tm, tn = self.shape
        x, gx = state[self.x.name], ctx.grid[0]
        rows = [int(v) % self.slabs for v in state[self.i.name].full((self.steps,)).v]
        for bx, by in self.blocks(ctx):
            acc = fill(self.shape, 0.0, self.at)
            for r in rows:
                tile = M.cast(read_tile(x, (r * tm, bx * tn), self.shape), self.at)
                acc = M.cast(M.binop("+", acc, tile), self.at)
            state[self.y.name] = write_tile(state[self.y.name],
                                            self.pout.starts(bx, by, gx), acc)
