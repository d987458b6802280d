"""Random tile programs for the differential fuzzer, each with its inputs and a numpy model.

    prog = generate(seed)                  # or generate(seed, features.parse(no="gemm"))
    prog.source                            # a module defining make() -> T.prim_func
    prog.inputs()                          # {param: numpy array or Python scalar}
    prog.expected()                        # {param: values.V}: every tensor's final contents

A program is one kernel (a grid of up to 3 x 2 blocks) made of 1-3 independent segments
(segments.py, segments_red.py, segments_mm.py), each with its own tensors. The model is computed
from the program's structure with the fuzzer's own semantics (dtypes.py, values.py), never by
tilecraft. `python -m tests.fuzz.gen SEED` prints a program.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import dtypes as D
from . import values as M
from .features import Features
from .segments import CopySeg, EwSeg
from .segments_cluster import ClusterSeg
from .segments_gather import GatherSeg
from .segments_lowbit import LowbitSeg
from .segments_mm import AtomicSeg, GemmSeg, ScalarSeg
from .segments_red import CumSeg, RedSeg
from .tiles import Ctx, Namer, Segment

SEGMENTS = {"copy": CopySeg, "ew": EwSeg, "reduce": RedSeg, "cumsum": CumSeg, "gemm": GemmSeg,
            "atomic": AtomicSeg, "scalar": ScalarSeg}
WEIGHTS = {"copy": 2, "ew": 5, "reduce": 3, "cumsum": 1, "gemm": 2, "atomic": 2, "scalar": 3}


@dataclass
class Program:
    seed: int
    feats: Features
    ctx: Ctx
    segments: list[Segment] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"fuzz_{self.seed}"

    def params(self) -> list:
        return [p for s in self.segments for p in s.params()]

    @property
    def source(self) -> str:
        c = self.ctx
        decls = ",\n             ".join(p.decl() for p in self.params())
        cluster = f", cluster_dims={c.cluster}" if c.cluster else ""
        head = [f"# tilecraft fuzz program: seed={self.seed} {self.feats.spec()}",
                f"# segments: {' '.join(type(s).__name__ for s in self.segments)}",
                "import tilecraft.language as T",
                *sorted({i for s in self.segments for i in getattr(s, "imports", ())}),
                "", "", "def make():", "    @T.prim_func",
                f"    def {self.name}({decls}):",
                f"        with T.Kernel({c.grid[0]}, {c.grid[1]}, threads={c.threads}"
                f"{cluster}) as ({c.bx}, {c.by}):"]
        body = []
        for s in self.segments:
            body += ["            " + ln for ln in s.lines(c)]
        return "\n".join(head + body + [f"    return {self.name}", ""])

    def inputs(self) -> dict:
        """Every parameter's initial value (outputs start from random values, not zeros)."""
        out = {}
        for p in self.params():
            rng = np.random.default_rng([self.seed, zlib.crc32(p.name.encode())])
            out[p.name] = p.scalar_value if p.is_scalar else \
                np.zeros(p.shape, D.get(p.dtype).np) if p.zeros else \
                D.uniform_values(rng, p.shape, D.get(p.dtype)) if p.full_range else \
                D.random_values(rng, p.shape, D.get(p.dtype))
        return out

    def expected(self, inputs: dict | None = None) -> dict:
        inputs = self.inputs() if inputs is None else inputs
        state = {}
        for p in self.params():
            t = D.get(p.dtype)
            a = inputs[p.name]
            state[p.name] = M.exact(a if p.is_scalar else D.from_numpy(np.asarray(a), t), t)
        for s in self.segments:
            s.model(state, self.ctx)
        return {p.name: state[p.name] for p in self.params() if not p.is_scalar}


def generate(seed: int, feats: Features | None = None) -> Program:
    feats = feats or Features()
    fams = feats.families()
    if not fams:
        raise ValueError("every program family is turned off")
    rng = random.Random(seed)
    names = Namer(rng, feats.names)
    grid = (rng.randint(1, 3), rng.randint(1, 2))
    ctx = Ctx(rng, feats, names, grid, rng.choice([32, 64, 128, 128, 128, 256]))
    ctx.bx, ctx.by = names.fresh("bx"), names.fresh("by")
    prog = Program(seed, feats, ctx)
    for _ in range(rng.choice([1, 1, 2, 2, 3])):
        fam = rng.choices(fams, [WEIGHTS[f] for f in fams])[0]
        prog.segments.append(SEGMENTS[fam](ctx))
    # a thread-block cluster of the grid's blocks (or a part of them) with its segment, last and
    # decided by a generator of its own: the other segments are those of the seed without it
    crng = random.Random(f"cluster {seed}")
    if feats.cluster and grid != (1, 1) and crng.random() < 0.1:
        cx = crng.choice([d for d in (1, 2, 3) if grid[0] % d == 0])
        cy = crng.choice([d for d in (1, 2) if grid[1] % d == 0 and cx * d > 1] or [grid[1]])
        ctx.cluster = (cx, cy)
        prog.segments.append(ClusterSeg(ctx))
    # a gather (copies at rows read from shared memory), likewise from a generator of its own
    grng = random.Random(f"gather {seed}")
    if feats.gather and grng.random() < 0.1:
        prog.segments.append(GatherSeg(ctx, grng))
    # low-bit codes cast in registers (the Tilus level), likewise
    lrng = random.Random(f"lowbit {seed}")
    if feats.lowbit and lrng.random() < 0.1:
        prog.segments.append(LowbitSeg(ctx, lrng))
    return prog


def load(source: str, path: Path, module_name: str = "tilecraft_fuzz_prog"):
    """Write `source` to `path` and return its `make()` (the front end reads the file)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make


if __name__ == "__main__":
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0).source)
