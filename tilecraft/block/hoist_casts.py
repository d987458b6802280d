"""hoist_casts: casts of a register tensor's elements inside a `parallel` loop become one block
`cast` of the whole tensor just before the loop, which instruction selection converts with the
fast register casts (select_cast.py). TileLang's dequantization

    for i, j in parallel(16, 64, layout=spatial(16, 8).local(1, 8)):
        yf[i, j] = T.cast(wf[i, j], 'float16') * S[j]          # wf: uint4, same layout
->
    wf_f16 = allocate_register(float16[16, 64], layout=spatial(16, 8).local(1, 8))
    cast(wf, out=wf_f16)
    for i, j in parallel(16, 64, layout=spatial(16, 8).local(1, 8)):
        yf[i, j] = wf_f16[i, j] * S[j]

Requires: a verified block program. Hoists `T.cast(r[...], d)` (an assignment of r's element to
a wider tensor is one too: the frontend writes the conversion) where r is a register tensor of the
loop that the loop does not write, the pair has a fast plan for r's local size on the target
(`plan_for`) and the temporary takes at most MAX_REGISTERS 32-bit registers per thread. All casts
of r to d in the loop read one temporary.

Guarantees: the same results (the temporary holds cast(r) element by element, computed as the
expression computed each one: the VM's `cast` is the expression's conversion); nothing else moves.
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir import BufferLoad, Cast, SeqStmt
from tilecraft.ir.rewrite import map_exprs, replace_stmt
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .compute import Cast as BlockCast
from .instructions import AllocateRegister
from .parallel import ParallelCompute
from .program import BlockProgram
from .select_cast import plan_for
from .tensors import RegisterTensor

#: the largest temporary (32-bit registers per thread) a hoisted cast may add
MAX_REGISTERS = 64

_SHORT = {"float16": "f16", "bfloat16": "bf16"}


def hoist_casts(program: BlockProgram, target=None) -> BlockProgram:
    """`program` with the casts of register elements in its `parallel` loops hoisted (see the
    module docstring); `target`: a tilecraft.targets.Target, or None (sm_80)."""
    body = program.body
    for loop in [s for s in walk(program.body) if isinstance(s, ParallelCompute)]:
        hoisted = _hoist(loop, target)
        if hoisted is not None:
            body = replace_stmt(body, loop, hoisted)
    return program if body is program.body else dataclasses.replace(program, body=body)


def _hoist(loop: ParallelCompute, target) -> SeqStmt | None:
    regs = {t.buffer: t for t in loop.tensors if isinstance(t, RegisterTensor)}
    written = {t.buffer for t in loop.writes()}  # (its stores and atomics)
    temps: dict = {}  # (buffer, dtype name) -> the temporary
    for s in walk(loop.body):
        for e in stmt_exprs(s):
            for x in walk_expr(e):
                key = _key(x)
                if key is None or key in temps or key[0] not in regs or key[0] in written:
                    continue
                r = regs[key[0]]
                n = r.layout.local_size
                if plan_for(r.dtype, x.dtype, n, target) is None \
                        or -(-n * x.dtype.bits // 32) > MAX_REGISTERS:
                    continue
                temps[key] = RegisterTensor.create(f"{r.name}_{_SHORT[x.dtype.name]}", x.dtype,
                                                   r.layout, span=loop.span)
    if not temps:
        return None

    def use(x):
        t = temps.get(_key(x))
        return None if t is None else BufferLoad.create(t.buffer, x.value.indices)

    body = map_exprs(loop.body, use)
    new = dataclasses.replace(loop, body=body, tensors=loop.tensors + tuple(temps.values()))
    pre = []
    for (buf, _), t in temps.items():
        pre += [AllocateRegister.create(t, span=loop.span),
                BlockCast.create(regs[buf], t, span=loop.span)]
    return SeqStmt.create([*pre, new])


def _key(x):
    """(register buffer, dtype name) of `T.cast(r[...], dtype)`, else None."""
    if isinstance(x, Cast) and isinstance(x.value, BufferLoad) and x.value.dtype != x.dtype:
        return x.value.buffer, x.dtype.name
    return None
