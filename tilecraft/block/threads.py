"""Which values of a block program differ between the threads of a block.

Scalar code outside `parallel` runs in every thread. A value is the same in every thread unless
it comes from a register tensor (each thread holds its own elements), a `parallel` loop's
variables, a thread index variable, or a `var`/`local` buffer stored with such a value or under
control flow on one (to a fixpoint), or a let or loop variable computed from those. Control flow
whose condition or bounds differ between threads is divergent: a barrier inside it deadlocks
(block/barriers.py keeps them out), and a block-level store inside it runs in the threads that
get there (the CUDA printer's once-per-block rule, codegen/block_cuda/scalar.py).

    x = A[0] + 1            same in every thread
    for i, j in parallel(...):
        y[0] = acc[i, j]    y: per thread from here on
    if y[0] > 0:            divergent: what it holds runs per thread
"""

from __future__ import annotations

from collections.abc import Iterable

from tilecraft.ir import BufferLoad, BufferStore, Expr, For, If, LetStmt, SeqStmt, Stmt, Var, While
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .parallel import ParallelCompute


class ThreadValues:
    """The per-thread variables and buffers of a block program body, and its divergent
    statements (by id: statements under control flow on a per-thread value)."""

    def __init__(self, body: Stmt, thread_vars: Iterable[Var] = ()) -> None:
        self.vars: set[Var] = set(thread_vars)
        self.buffers: set = set()
        self.divergent: set[int] = set()
        size = -1
        while size != len(self.vars) + len(self.buffers):
            size = len(self.vars) + len(self.buffers)
            self._visit(body, False)

    def of(self, exprs: Iterable[Expr]) -> bool:
        """`exprs` may have a different value in different threads."""
        for e in exprs:
            for x in walk_expr(e):
                if isinstance(x, Var) and x in self.vars:
                    return True
                if isinstance(x, BufferLoad) and (x.buffer in self.buffers
                                                  or x.buffer.scope == "fragment"):
                    return True
        return False

    def header(self, s: Stmt) -> bool:
        """The condition or bounds of control flow `s` differ between threads."""
        return isinstance(s, (If, While, For)) and self.of(stmt_exprs(s))

    def per_thread(self, s: Stmt) -> bool:
        """Statement `s` runs per thread: under divergent control flow, or on per-thread values."""
        return id(s) in self.divergent or self.of(stmt_exprs(s))

    def _visit(self, s: Stmt, dep: bool) -> None:
        if dep:
            self.divergent.add(id(s))
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self._visit(c, dep)
        elif isinstance(s, (If, While, For)):
            dep = dep or self.header(s)
            if isinstance(s, For) and dep:
                self.vars.add(s.var)
            for c in (s.then_body, s.else_body) if isinstance(s, If) else (s.body,):
                if c is not None:
                    self._visit(c, dep)
        elif isinstance(s, ParallelCompute):
            self.vars.update(s.vars)
            for x in walk(s.body):  # every element of the loop: per thread
                if isinstance(x, (LetStmt, For)):
                    self.vars.add(x.var)
                elif isinstance(x, BufferStore) and x.buffer.scope in ("var", "local"):
                    self.buffers.add(x.buffer)
        elif isinstance(s, LetStmt):
            if self.of([s.value]):  # (under divergent flow: the same where it is computed)
                self.vars.add(s.var)
        elif isinstance(s, BufferStore) and s.buffer.scope in ("var", "local") and (
                dep or self.of(stmt_exprs(s))):
            self.buffers.add(s.buffer)


__all__ = ["ThreadValues"]
