"""What every segment shares: parameters, names, tile placement and tile reads/writes on model
values (a tile read outside a tensor is 0, a write there is dropped, stores round/wrap)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import dtypes as D
from . import values as M
from .values import V

# names the generated code (or the emitters) might also use; `--no names` leaves them out
HOSTILE = ["red", "tid", "acc", "li", "lane", "smem", "tc_smem", "warp", "base", "ok", "pre", "kk",
           "im", "it", "stage_r", "k_iter", "val", "int", "auto", "signed", "char", "new", "this",
           "threadIdx", "blockIdx", "half", "tc", "red_1", "x_", "v_1", "long", "double", "short",
           "unsigned", "register", "volatile", "float4", "uint", "dim3", "blockDim", "warpSize",
           "min_", "max_", "n_iters", "ld", "st", "mma", "bar", "i_", "j_"]


@dataclass
class Param:
    name: str
    shape: tuple
    dtype: str
    scalar_value: int | float | None = None  # a scalar parameter when set
    zeros: bool = False  # starts at zeros (an arrival count), not random values
    full_range: bool = False  # uniform over the whole range (packed codes), not small values

    @property
    def is_scalar(self) -> bool:
        return self.scalar_value is not None

    def decl(self) -> str:
        if self.is_scalar:
            return f"{self.name}: T.{self.dtype}"
        return f'{self.name}: T.Tensor({self.shape}, "{self.dtype}")'


class Namer:
    """Unique identifiers; with `hostile`, sometimes a name the compiler might use itself."""

    def __init__(self, rng, hostile: bool):
        self.rng, self.hostile = rng, hostile
        self.used = {"T", "make", "range", "min", "max", "abs"}
        self.n = 0

    def fresh(self, prefix: str) -> str:
        if self.hostile and self.rng.random() < 0.25:
            free = [h for h in HOSTILE if h not in self.used]
            if free:
                name = self.rng.choice(free)
                self.used.add(name)
                return name
        while True:
            self.n += 1
            name = f"{prefix}{self.n}"
            if name not in self.used:
                self.used.add(name)
                return name


@dataclass
class Ctx:
    """Generation context of one program."""
    rng: object
    feats: object
    names: Namer
    grid: tuple  # (gx, gy)
    threads: int
    bx: str = "bx"
    by: str = "by"
    params: list = field(default_factory=list)
    cluster: tuple | None = None  # the kernel's cluster_dims (segments_cluster.py)


@dataclass
class Place:
    """A (tm, tn) tile of a 2-D tensor (R, C): block (bx, by) reads rows by*tm+orow.., cols
    bx*tn+ocol.. A 1-D tile (tn,) of a 1-D tensor (C,) starts at (by*gx+bx)*tn+ocol."""
    shape: tuple
    tensor: tuple
    off: tuple

    def starts(self, bx: int, by: int, gx: int) -> tuple:
        if len(self.shape) == 1:
            return ((by * gx + bx) * self.shape[0] + self.off[0],)
        return (by * self.shape[0] + self.off[0], bx * self.shape[1] + self.off[1])

    def corner(self, ctx: Ctx) -> list[str]:
        def lin(base: str, n: int, o: int) -> str:
            return f"{base} * {n}" + (f" + {o}" if o > 0 else f" - {-o}" if o < 0 else "")
        if len(self.shape) == 1:
            return [lin(f"({ctx.by} * {ctx.grid[0]} + {ctx.bx})", self.shape[0], self.off[0])]
        return [lin(ctx.by, self.shape[0], self.off[0]), lin(ctx.bx, self.shape[1], self.off[1])]

    def at(self, ctx: Ctx, name: str) -> str:
        return f"{name}[{', '.join(self.corner(ctx))}]"


def place(ctx: Ctx, shape: tuple) -> Place:
    """A placement whose last tiles may be partial or lie wholly outside the tensor."""
    r, f = ctx.rng, ctx.feats
    blocks = (ctx.grid[1], ctx.grid[0]) if len(shape) == 2 else (ctx.grid[0] * ctx.grid[1],)
    tensor, off = [], []
    for n, b in zip(shape, blocks):
        o = r.choice([0, 0, 0, 0, 1, 3]) % n if f.partial else 0
        if f.neg_corner and r.random() < 0.1:
            o = -r.randint(1, max(1, n // 2))
        full = b * n + o
        size = full
        if f.partial and r.random() < 0.7:  # a partial last tile; with 2+ blocks now and then none
            size = full - (r.randint(n, n + n // 2) if b > 1 and r.random() < 0.15
                           else r.randint(0, n - 1))
        if f.partial and r.random() < 0.15:
            size = full + r.randint(1, 5)  # elements nobody writes keep their values
        tensor.append(max(1, size))
        off.append(o)
    return Place(tuple(shape), tuple(tensor), tuple(off))


def read_tile(g: V, starts: tuple, shape: tuple) -> V:
    """The tile of g at `starts`; 0 outside g."""
    out = zeros(shape, g.t)
    src, dst = _overlap(starts, shape, g.shape)
    if src is not None:
        out.v[dst], out.e[dst], out.dc[dst] = g.v[src], g.e[src], g.dc[src]
    return out


def write_tile(g: V, starts: tuple, tile: V) -> V:
    """g with `tile` (converted to g's dtype) written at `starts`, clipped to g."""
    t = M.cast(tile, g.t).full(tile.shape)
    g = g.full(g.shape)
    src, dst = _overlap(starts, t.shape, g.shape)
    if src is not None:
        g.v[src], g.e[src], g.dc[src] = t.v[dst], t.e[dst], t.dc[dst]
    return g


def _overlap(starts, shape, gshape):
    src, dst = [], []
    for s, n, size in zip(starts, shape, gshape):
        lo, hi = max(s, 0), min(s + n, size)
        if hi <= lo:
            return None, None
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    return tuple(src), tuple(dst)


def zeros(shape, t: D.DType) -> V:
    return M.exact(np.zeros(shape) if t.is_float else np.full(shape, 0, dtype=object), t)


def unknown(t: D.DType, shape=()) -> V:
    """Uninitialised storage: any value (don't care)."""
    v = zeros(shape, t)
    v.dc = np.ones(shape, bool)
    return v


def fill(shape, value, t: D.DType) -> V:
    return M.exact(np.full(shape, value, dtype=np.float64 if t.is_float else object), t)


class Segment:
    """One independent piece of a kernel: its parameters, its lines, its model."""

    def params(self) -> list[Param]:
        return self._params

    def lines(self) -> list[str]:
        raise NotImplementedError

    def model(self, state: dict, ctx: Ctx) -> None:
        raise NotImplementedError

    def blocks(self, ctx: Ctx):
        gx, gy = ctx.grid
        for by in range(gy):
            for bx in range(gx):
                yield bx, by


def tile_shape(ctx: Ctx, per_thread: int = 16, two_d: float = 0.85) -> tuple:
    """A tile of at most `per_thread` elements per thread (odd sizes with `odd_shapes`)."""
    r, f = ctx.rng, ctx.feats
    cap = ctx.threads * per_thread
    rows = [1, 2, 4, 8, 16, 32] + ([3, 5, 12] if f.odd_shapes else [])
    cols = [8, 16, 32, 64, 128] + ([1, 6, 20, 24, 40] if f.odd_shapes else [])
    if r.random() > two_d:
        return (r.choice([n for n in [32, 64, 128, 256, 512] + ([7, 100] if f.odd_shapes else [])
                          if n <= cap]),)
    while True:
        shape = (r.choice(rows), r.choice(cols))
        if shape[0] * shape[1] <= cap:
            return shape


def pick_dtype(ctx: Ctx, kinds: str = "any") -> D.DType:
    names = [n for n in ctx.feats.dtypes
             if kinds == "any" or (kinds == "float") == D.get(n).is_float]
    if not names:
        names = ["float32"] if kinds == "float" else ["int32"]
    return D.get(ctx.rng.choice(names))
