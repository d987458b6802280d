"""The thread-block cluster segment (the program's `cluster_dims`, docs/language.md "Clusters").

Every block copies its tile of X into shared memory; after `T.cluster_sync()` it reads another
block's copy through `T.remote`, either one block's (its rank plus a shift, modulo the cluster
size) or every block's added in rank order, the index as written, flipped or rolled; it stores
the result and meets the others at a last `T.cluster_sync()` (no block ends while another
reads its memory).
"""

from __future__ import annotations

import numpy as np

from . import values as M
from .segments import _alloc
from .tiles import Ctx, Param, Segment, fill, pick_dtype, place, read_tile, tile_shape, write_tile


def rank_of(bx: int, by: int, cluster: tuple) -> int:
    cx, cy = cluster
    return bx % cx + cx * (by % cy)


def block_of(bx: int, by: int, rank: int, cluster: tuple) -> tuple:
    """The block of cluster rank `rank` in (bx, by)'s cluster."""
    cx, cy = cluster
    return bx - bx % cx + rank % cx, by - by % cy + rank // cx


class ClusterSeg(Segment):
    def __init__(self, ctx: Ctx):
        r, nm = ctx.rng, ctx.names
        self.shape = tile_shape(ctx, per_thread=4)
        self.pin, self.pout = place(ctx, self.shape), place(ctx, self.shape)
        self.st, self.ot = pick_dtype(ctx), pick_dtype(ctx)
        self.x = Param(nm.fresh("X"), self.pin.tensor, pick_dtype(ctx).name)
        self.y = Param(nm.fresh("Y"), self.pout.tensor, self.ot.name)
        self._params = [self.x, self.y]
        self.s, self.o = nm.fresh("s"), nm.fresh("o")
        self.idx = [nm.fresh("i") for _ in self.shape]
        self.size = ctx.cluster[0] * ctx.cluster[1]
        self.mode = r.choice(["peer", "peer", "sum"])
        self.shift = r.randint(0, self.size - 1)
        self.form = r.choice(["id", "flip", "roll"])
        self.oscope = r.choice(["fragment", "fragment", "shared"])

    def _index(self) -> str:
        ix, n = list(self.idx), self.shape
        if self.form == "flip":
            ix[0] = f"{n[0] - 1} - {ix[0]}"
        elif self.form == "roll":
            ix[-1] = f"({ix[-1]} + {3 % n[-1]}) % {n[-1]}"
        return ", ".join(ix)

    def _view(self, tile):
        n = self.shape
        if self.form == "flip":
            return tile[::-1]
        if self.form == "roll":
            return tile[(..., (np.arange(n[-1]) + 3 % n[-1]) % n[-1])]
        return tile

    def lines(self, ctx: Ctx) -> list[str]:
        loop = f"for {', '.join(self.idx)} in T.Parallel({', '.join(map(str, self.shape))}):"
        at = f"{self.o}[{', '.join(self.idx)}]"
        out = [_alloc(self.s, "shared", self.shape, self.st),
               f"T.copy({self.pin.at(ctx, self.x.name)}, {self.s})", "T.cluster_sync()",
               _alloc(self.o, self.oscope, self.shape, self.ot)]
        if self.mode == "peer":
            rank = f"(T.cluster_rank() + {self.shift}) % {self.size}"
            out += [loop, f"    {at} = T.remote({self.s}, {rank})[{self._index()}]"]
        else:
            p = ctx.names.fresh("p")
            out += [f"T.clear({self.o})", f"for {p} in T.serial({self.size}):", "    " + loop,
                    f"        {at} += T.cast(T.remote({self.s}, {p})[{self._index()}], "
                    f'"{self.ot.name}")']
        out += [f"T.copy({self.o}, {self.pout.at(ctx, self.y.name)})", "T.cluster_sync()"]
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        x, gx = state[self.x.name], ctx.grid[0]
        tiles = {(bx, by): M.cast(read_tile(x, self.pin.starts(bx, by, gx), self.shape), self.st)
                 for bx, by in self.blocks(ctx)}
        for bx, by in self.blocks(ctx):
            me = rank_of(bx, by, ctx.cluster)
            if self.mode == "peer":
                peer = block_of(bx, by, (me + self.shift) % self.size, ctx.cluster)
                o = M.cast(self._view(tiles[peer]), self.ot)
            else:
                o = M.cast(fill(self.shape, 0, self.ot), self.ot)
                for p in range(self.size):
                    add = M.cast(self._view(tiles[block_of(bx, by, p, ctx.cluster)]), self.ot)
                    o = M.cast(M.binop("+", o, add), self.ot)
            state[self.y.name] = write_tile(state[self.y.name],
                                            self.pout.starts(bx, by, gx), o)
