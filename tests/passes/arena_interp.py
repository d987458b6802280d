"""The CPU interpreter with the shared-memory plan applied: every shared buffer is a view into one
byte arena at its planned offset, so a buffer that reuses bytes still live clobbers them and the
outputs differ from the plain interpreter's. Reduction scratch and the stages of pipelined
buffers are overwritten with NaN where the GPU kernel would write them (at the reduction, and at
the start of the pipelined loop)."""

from __future__ import annotations

import numpy as np

from tilecraft.interp.machine import Machine
from tilecraft.interp.values import np_type
from tilecraft.ir import Allocate, For, PrimFunc, Reduce, Stmt, Var
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM


class ArenaMachine(Machine):
    def __init__(self, func: PrimFunc, buffers, scalars, state):
        super().__init__(func, buffers, scalars)
        self.state = state
        self.arena = np.full(max(state.smem_bytes, 1), 0xFF, np.uint8)  # NaN in f16 and f32

    def exec(self, s: Stmt) -> None:
        if isinstance(s, Allocate) and s.buffer.scope == "shared":
            b, slot = s.buffer, self.state.shared[s.buffer]
            t = np_type(b.dtype)
            assert t.itemsize * 8 == b.dtype.bits, b.dtype
            n = b.numel() * t.itemsize
            self.buffers[b] = self.arena[slot.offset:slot.offset + n].view(t).reshape(b.shape)
            return
        if isinstance(s, Reduce) and id(s) in self.state.reduce_scratch:
            item = next(it for it in self.state.smem_arena if it.key == id(s))
            self.arena[item.offset:item.end] = 0xFF
        if isinstance(s, For) and id(s) in self.state.pipelines:
            for b in self.state.pipelines[id(s)].buffers:
                slot = self.state.shared[b]
                self.arena[slot.offset:slot.offset + slot.nbytes * slot.stages] = 0xFF
        super().exec(s)


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
    """Every tensor after a run on the plain interpreter, and after one of the lowered kernel
    with the planned arena."""
    state = lower(func, target)
    scalars = {v: np.int32(dim) for p in func.params for v in p.shape if isinstance(v, Var)}
    results = []
    for machine in (Machine, ArenaMachine):
        args = random_inputs(func, seed, dim)
        # the arena run executes the kernel as the passes rewrote it (schedule_loads)
        run, extra = (state.lowered_func(), (state,)) if machine is ArenaMachine else (func, ())
        machine(run, dict(zip(func.params, args)), dict(scalars), *extra).run()
        results.append(args)
    return results
