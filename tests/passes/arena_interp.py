"""Random inputs for a kernel, and a run of it two ways: the plain interpreter on the Tile IR,
and the block VM on the lowered program (the kernel as the passes rewrote, lowered and
pipelined it) with its shared tensors in one byte arena at the offsets the shared-memory plan
gives them (block/smem_plan.py), so a tensor that reuses bytes still live clobbers them and the
outputs differ from the interpreter's."""

from __future__ import annotations

import numpy as np

from tilecraft import interp
from tilecraft.interp.values import np_type
from tilecraft.ir import PrimFunc, Var
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM


def random_inputs(func: PrimFunc, seed: int, dim: int) -> list[np.ndarray]:
    """Random tensors for every parameter (0/1 for integers; every dynamic dim is `dim`)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        t = np_type(p.dtype)
        shape = [dim if isinstance(d, Var) else d for d in p.shape]
        if p.dtype.is_float:
            out.append(rng.standard_normal(shape).astype(t))
        else:
            out.append(rng.integers(0, 2, shape).astype(t))
    return out


def run_both(func: PrimFunc, seed: int = 0, dim: int = 300, target=H100_SXM):
    """Every tensor after a run on the plain interpreter, and after one of the lowered program
    on the block VM with the planned arena."""
    from tilecraft.block.vm import run

    program = lowered_program(lower(func, target))
    plain = random_inputs(func, seed, dim)
    interp.run(func, plain)
    arena = random_inputs(func, seed, dim)
    run(program, arena, arena=True)
    return plain, arena
