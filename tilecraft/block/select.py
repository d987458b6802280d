"""Instruction selection for block programs by layout division (Tilus section 7).

`select_instructions(program)` returns a typed plan per instruction it can map onto a hardware
instruction; the printer prints the plan and falls back to its SIMT form where there is none.

`dot` on mma.sync m16n8k16 (f16 x f16 or bf16 x bf16 -> f32): the operand layouts must be the
atom's layouts times an outer layout over the warps (`A = qa * atom.a`, `B = qb * atom.b`,
`C = qc * atom.c`, found by division), and for every register block `lc` of C and every k block,
each warp must hold the A and B blocks that C block needs at one register block index, the same
on every warp (replicas allowed). The plan lists, per C block in order, its k steps: (C block,
A block, B block) register-block indices.

    ACC = spatial(4, 1) * atom.c     A = spatial(4, 1) * atom.a     B = replicate(4) * atom.b
    -> qc = spatial(4, 1), one C block per warp, one k step: [(0, 0, 0)]
"""

from __future__ import annotations

from dataclasses import dataclass

from tilecraft.layout.algebra import quotient
from tilecraft.layout.atoms import MMA_M16N8K16_F16, MmaAtom

from .compute import Dot
from .program import BlockProgram

_MMA_FUNCS = {("float16", "float32"): "tc::mma_m16n8k16_f16_f32",
              ("bfloat16", "float32"): "tc::mma_m16n8k16_bf16_f32"}


@dataclass(frozen=True)
class MmaPlan:
    """`dot` as mma.sync: `func` on the register blocks `steps` (C block, A block, B block)."""

    atom: MmaAtom
    func: str
    steps: tuple[tuple[int, int, int], ...]


def select_instructions(program: BlockProgram) -> dict[int, MmaPlan]:
    """id(instruction) -> its plan, for the instructions a hardware instruction computes."""
    from tilecraft.ir.visitor import walk

    plans = {}
    for s in walk(program.body):
        if isinstance(s, Dot):
            plan = select_dot(s, program.num_threads)
            if plan is not None:
                plans[id(s)] = plan
    return plans


def select_dot(s: Dot, num_threads: int) -> MmaPlan | None:
    a, b, c, out = s.a, s.b, s.c, s.out
    func = _MMA_FUNCS.get((a.dtype.name, c.dtype.name))
    if func is None or b.dtype != a.dtype or out.dtype != c.dtype or out.layout != c.layout:
        return None
    atom = MMA_M16N8K16_F16
    qa, qb, qc = (quotient(t.layout, f) for t, f in ((a, atom.a), (b, atom.b), (c, atom.c)))
    warps = num_threads // 32
    if None in (qa, qb, qc) or any(q.num_threads != warps for q in (qa, qb, qc)):
        return None
    (mq, kq), (kq_b, nq) = qa.shape, qb.shape
    if kq_b != kq or tuple(qc.shape) != (mq, nq):
        return None
    steps = []
    for lc in range(qc.local_size):
        for k in range(kq):
            blocks = set()
            for w in range(warps):
                i, j = qc.map(w, lc)
                la = next((x for x in range(qa.local_size) if qa.map(w, x) == (i, k)), None)
                lb = next((x for x in range(qb.local_size) if qb.map(w, x) == (k, j)), None)
                if la is None or lb is None:
                    return None
                blocks.add((la, lb))
            if len(blocks) != 1:  # the register block would depend on the warp
                return None
            steps.append((lc, *blocks.pop()))
    return MmaPlan(atom, func, tuple(steps))
