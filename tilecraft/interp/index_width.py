"""64-bit index arithmetic on the interpreter, by the rule the CUDA backend follows
(tilecraft/ir/indices.py): the kernel is rewritten once before it runs so that every index into
a tensor that may hold 2^31 elements or more, and every integer let such an index reads, is an
int64 expression. numpy then computes them without wrapping at 2^31.

    base = bx * 1024; A[base + i]    ->   base = int64(bx) * 1024; A[base + int64(i)]
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from tilecraft.ir import (BinOp, BufferLoad, BufferRegion, BufferStore, Call, Cast, Compare, Expr,
                          LetStmt, Not, Select, Stmt)
from tilecraft.ir.indices import needs_64bit_index, wide_index_roots, wide_let_vars, widen


def widen_indices(body: Stmt) -> Stmt:
    """`body` with the index arithmetic of 64-bit-indexed tensors in int64 (itself when none)."""
    if not wide_index_roots(body):
        return body
    return _Widen(wide_let_vars(body)).stmt(body)


class _Widen:
    def __init__(self, lets):
        self.lets = lets

    def indices(self, buf, idx) -> tuple[Expr, ...]:
        idx = tuple(self.expr(i) for i in idx)
        return tuple(widen(i) for i in idx) if needs_64bit_index(buf) else idx

    def expr(self, e):
        if not isinstance(e, Expr):
            return e
        if isinstance(e, BufferLoad):
            return replace(e, indices=self.indices(e.buffer, e.indices))
        if isinstance(e, (BinOp, Compare)):
            return replace(e, a=self.expr(e.a), b=self.expr(e.b))
        if isinstance(e, Not):
            return replace(e, a=self.expr(e.a))
        if isinstance(e, Select):
            return replace(e, cond=self.expr(e.cond), a=self.expr(e.a), b=self.expr(e.b))
        if isinstance(e, Cast):
            return replace(e, value=self.expr(e.value))
        if isinstance(e, Call):
            return replace(e, args=tuple(self.expr(a) for a in e.args))
        return e

    def region(self, r: BufferRegion) -> BufferRegion:
        return replace(r, starts=self.indices(r.buffer, r.starts))

    def value(self, v):
        """A statement field: a statement, expression, region, or a tuple of them."""
        if isinstance(v, Stmt):
            return self.stmt(v)
        if isinstance(v, Expr):
            return self.expr(v)
        if isinstance(v, BufferRegion):
            return self.region(v)
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        return v

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore):
            return replace(s, indices=self.indices(s.buffer, s.indices),
                           value=self.expr(s.value))
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            return replace(s, value=widen(value) if s.var in self.lets else value)
        if not is_dataclass(s):
            return s
        changes = {f.name: self.value(getattr(s, f.name)) for f in fields(s)
                   if f.name != "span"}
        return replace(s, **changes)
