"""The IR verifier: structural rules every pass keeps.

  * every buffer used is a parameter or allocated in an enclosing block before the use;
  * every variable used is defined (parameter, dynamic dim, block/thread index, loop, let);
  * allocations and tile ops sit inside `T.Kernel`; tile ops never inside `T.Parallel` (but
    atomics on one element, which act per element);
  * stores and loads give one index per dimension.
Violations are TilecraftErrors (TC504) at the offending statement's line.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError, at_span

from .buffer import Buffer
from .expr import BufferLoad, Expr, Var
from .func import PrimFunc
from .stmt import (Allocate, BufferStore, For, If, KernelLaunch, LetStmt, ParallelLoop, SeqStmt,
                   Stmt, While)
from .tileops import AnnotateLayout, Atomic, TileOp
from .visitor import stmt_exprs, walk_expr


class _Verifier:
    def __init__(self, func: PrimFunc):
        self.vars: list[set[Var]] = [set(p for p in func.params if isinstance(p, Var))
                                     | set(func.dynamic_vars)]
        self.buffers: list[set[Buffer]] = [set(p for p in func.params if isinstance(p, Buffer))]
        self.in_kernel = False
        self.in_parallel = False

    def fail(self, detail: str):
        raise TilecraftError("TC504", detail=f"invalid IR: {detail}",
                             hint="this is a tilecraft bug if your kernel parsed; please report it")

    def defined_var(self, v: Var) -> bool:
        return any(v in s for s in self.vars)

    def defined_buf(self, b: Buffer) -> bool:
        return any(b in s for s in self.buffers)

    def check_exprs(self, s: Stmt) -> None:
        for root in stmt_exprs(s):
            for e in walk_expr(root):
                if isinstance(e, Var) and not self.defined_var(e):
                    self.fail(f"variable `{e.name}` used outside its scope")
                if isinstance(e, BufferLoad):
                    self.check_buffer(e.buffer)
                    if len(e.indices) != e.buffer.ndim:
                        self.fail(f"load of `{e.buffer.name}` with {len(e.indices)} indices")

    def check_buffer(self, b: Buffer) -> None:
        if not self.defined_buf(b):
            self.fail(f"buffer `{b.name}` used before it is allocated")

    def block(self, s: Stmt) -> None:
        self.vars.append(set())
        self.buffers.append(set())
        try:
            self.stmt(s)
        finally:
            self.vars.pop()
            self.buffers.pop()

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
            return
        with at_span(s.span):
            self.check_exprs(s)
            if isinstance(s, KernelLaunch):
                if self.in_kernel:
                    self.fail("nested T.Kernel")
                self.in_kernel = True
                self.vars.append(set(s.block_vars) | set(s.thread_vars))
                self.block(s.body)
                self.vars.pop()
                self.in_kernel = False
            elif isinstance(s, Allocate):
                if not self.in_kernel:
                    self.fail(f"allocation of `{s.buffer.name}` outside T.Kernel")
                self.buffers[-1].add(s.buffer)
            elif isinstance(s, LetStmt):
                self.vars[-1].add(s.var)
            elif isinstance(s, BufferStore):
                self.check_buffer(s.buffer)
                if len(s.indices) != s.buffer.ndim:
                    self.fail(f"store to `{s.buffer.name}` with {len(s.indices)} indices")
            elif isinstance(s, For):
                self.vars.append({s.var})
                self.block(s.body)
                self.vars.pop()
            elif isinstance(s, ParallelLoop):
                outer = self.in_parallel
                self.in_parallel = True
                self.vars.append(set(s.vars))
                self.block(s.body)
                self.vars.pop()
                self.in_parallel = outer
            elif isinstance(s, (If, While)):
                self.block(s.then_body if isinstance(s, If) else s.body)
                if isinstance(s, If) and s.else_body is not None:
                    self.block(s.else_body)
            elif isinstance(s, TileOp):
                if not self.in_kernel:
                    self.fail(f"T.{s.op_name} outside T.Kernel")
                if self.in_parallel and not (isinstance(s, Atomic) and isinstance(s.src, Expr)):
                    self.fail(f"T.{s.op_name} inside T.Parallel")
                if isinstance(s, Atomic) and (s.prev is not None or s.order != "relaxed"):
                    self._ordered_atomic(s)
                for r in s.reads() + s.writes():
                    self.check_buffer(r.buffer)
                if isinstance(s, AnnotateLayout):
                    for b, _ in s.layouts:
                        self.check_buffer(b)

    def _ordered_atomic(self, s: Atomic) -> None:
        """return_prev / memory_order: a scalar atomic at block level; `prev` one element of a
        shared tensor of dst's type."""
        if self.in_parallel or not isinstance(s.src, Expr):
            self.fail(f"T.atomic_{s.kind} with return_prev or memory_order is a scalar atomic "
                      "outside T.Parallel")
        if s.order not in ("relaxed", "acquire", "release", "acq_rel", "seq_cst"):
            self.fail(f"T.atomic_{s.kind}: memory order {s.order!r}")
        p = s.prev
        if p is not None and (p.buffer.scope != "shared" or p.buffer.dtype != s.dst.dtype
                              or any(e != 1 for e in p.extents)):
            self.fail(f"T.atomic_{s.kind}: its previous value goes to one element of a shared "
                      f"tensor of type {s.dst.dtype}, not `{p.buffer.name}`")


def verify(func: PrimFunc) -> PrimFunc:
    """Check `func` against the IR's structural rules; return it unchanged."""
    _Verifier(func).block(func.body)
    return func
