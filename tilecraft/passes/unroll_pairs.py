"""unroll_pairs: a loop of the block program as a loop over pairs of iterations (a helper of
pipeline_copies, not a pass).

wgmma with A from registers reads its A registers while it runs, until the `dot_wait_group`
that completes it (PTX: touching them earlier is undefined). With one wgmma left in flight
across iterations, iteration k + 1 must build its A operand in other registers than iteration
k. ptxas does not rename registers a loop redefines (NVRTC 13, sm_90a: the same registers every
iteration, no warning), so the loop runs two iterations per trip, the second on its own tensors
and variables (every tensor and let the body defines, renamed `<name>_odd`); an odd count runs
the last iteration after the loop (renamed `<name>_last`). (`#pragma unroll 2` would leave it
to NVVM; the printer keeps loops with asynchronous dots rolled, printer.py says why.)

    for k in range(start, start + n):        for k2 in range(n // 2):
        kk = k * 64                               kk = (start + 2 * k2) * 64
        w = allocate_register(...)                w = allocate_register(...); ...; dot(w, ...)
        ...; dot_shared(w, ...)                   kk_odd = (start + 2 * k2 + 1) * 64
                                                  w_odd = allocate_register(...); ...; dot(w_odd)
                                              <the body at start + n - 1, on `_last` names>

The VM checks the result: writing the A operand of a pending dot_shared is TC611.
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import AllocateRegister, AllocateShared, BlockTensor, SharedSlice, ViewGlobal
from tilecraft.ir import Buffer, Const, For, If, LetStmt, SeqStmt, Stmt, Var, While
from tilecraft.ir.expr import BinOp, Compare, const_int
from tilecraft.ir.rewrite import map_exprs, substitute
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import walk

_DEFINES = (AllocateRegister, AllocateShared, SharedSlice, ViewGlobal)  # what makes a tensor


def unroll_pairs(loop: For) -> Stmt:
    """`loop` (kind serial, any start and extent) unrolled by two as the module says."""
    v, start, n = loop.var, loop.start, loop.extent
    pair = Var.create(f"{v.name}2", v.dtype, span=v.span)
    out: list[Stmt] = []
    half = simplify(n // 2)
    if const_int(half) != 0:
        first = _copy(loop.body, {v: simplify(start + pair * 2)}, "")
        second = _copy(loop.body, {v: simplify(start + pair * 2 + 1)}, "_odd")
        out.append(dataclasses.replace(loop, var=pair, start=Const.create(0), extent=half,
                                       body=SeqStmt.create([first, second])))
    odd = simplify(n % 2)
    if const_int(odd) != 0:
        last = _copy(loop.body, {v: simplify(start + n - 1)}, "_last")
        out.append(last if const_int(odd) == 1 else If(simplify(odd > 0), last, None, loop.span))
    return SeqStmt.create(out)


def _copy(body: Stmt, at: dict, suffix: str) -> Stmt:
    """`body` for one iteration (`at` binds the loop variable): with `suffix`, on fresh tensors
    and variables named `<name><suffix>`; ifs whose condition became a constant are resolved."""
    tensors: dict = {}
    names: dict = {}
    if suffix:
        for x in walk(body):
            if isinstance(x, _DEFINES):
                for t in x.writes():
                    buf = t.buffer
                    fresh = Buffer.create(f"{buf.name}{suffix}", buf.shape, buf.dtype, buf.scope,
                                          buf.span)
                    tensors[t] = dataclasses.replace(t, buffer=fresh)
            elif isinstance(x, LetStmt):
                names[x.var] = Var.create(f"{x.var.name}{suffix}", x.var.dtype, span=x.var.span)
    body = map_exprs(substitute(body, {**at, **names}), _folded)
    return _rebuild(body, tensors)


def _folded(e):
    """`e` rebuilt bottom-up by the constructors, which fold constants (substitute leaves
    `2 % 3` and `3 < 3` in the last iteration's copy); None for other expressions."""
    if not isinstance(e, (BinOp, Compare)):
        return None
    a, b = _folded(e.a), _folded(e.b)
    return type(e).create(e.op, e.a if a is None else a, e.b if b is None else b)


def _rebuild(s: Stmt, tensors: dict) -> Stmt | None:
    """A new statement object for every statement of `s` (copies share none), tensors renamed;
    an `If` on a constant keeps its taken branch (None when nothing remains)."""
    if isinstance(s, SeqStmt):
        kept = [c for c in (_rebuild(x, tensors) for x in s.stmts) if c is not None]
        return SeqStmt.create(kept) if kept else None
    if isinstance(s, If):
        known = const_int(s.cond)
        if known is not None:
            branch = s.then_body if known else s.else_body
            return None if branch is None else _rebuild(branch, tensors)
        other = None if s.else_body is None else _rebuild(s.else_body, tensors)
        then = _rebuild(s.then_body, tensors)
        if then is None:
            then = SeqStmt.create([])
        return dataclasses.replace(s, then_body=then, else_body=other)
    if isinstance(s, (For, While)):
        body = _rebuild(s.body, tensors)
        return dataclasses.replace(s, body=SeqStmt.create([]) if body is None else body)
    changes = {}
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        if isinstance(value, BlockTensor) and value in tensors:
            changes[f.name] = tensors[value]
        elif isinstance(value, tuple) and any(isinstance(x, BlockTensor) for x in value):
            changes[f.name] = tuple(tensors.get(x, x) if isinstance(x, BlockTensor) else x
                                    for x in value)
    return dataclasses.replace(s, **changes)
