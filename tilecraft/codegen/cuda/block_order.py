"""Block-level statements and global memory: who runs them, and where a barrier must order them.

A statement outside T.Parallel runs once per block (as on the interpreter). A scalar store or
atomic to global or shared memory there is printed under `if (tid == 0)` unless its index or
value depends on the thread (T.get_thread_binding, lets of it, `var`/`local` buffers given
per-thread values, loop variables of T.Parallel, or control flow on them): then each thread
does its own, as written. Thread 0's accesses must be ordered with the other threads' like
statements on the interpreter:

    T.copy(f, A[r, c])                   all threads write A
    A[r - 1, c] = A[r - 1, c] + 5   ->   __syncthreads();  if (tid == 0) A[..] = A[..] + 5;
    T.copy(A[r - 1, c], t)               __syncthreads();  all threads read A

`GlobalOrder` records, per global buffer, the kinds of access (read "r", write "w", atomic "a")
made since the last barrier by thread 0 alone and by all threads; an access that conflicts with
one of the other group (not read/read, not atomic/atomic) needs a barrier first. So does one by
all threads that conflicts with an earlier one by all threads (tile ops, T.Parallel): a thread
may read or overwrite an element another thread wrote (`T.copy(f, A[r, c])` then
`T.copy(A[r, c + 1], s)`), and only a barrier orders the two statements as on the interpreter.
Shared memory keeps the emitter's own `read_since_sync` / `write_pending` rules.
"""

from __future__ import annotations

from tilecraft.ir import (Atomic, Buffer, BufferLoad, BufferRegion, BufferStore, For, If, LetStmt,
                          ParallelLoop, SeqStmt, TileOp, Var, While)
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

MEMORY = ("global", "shared")
Access = tuple[bool, Buffer, str]  # (by thread 0 alone, buffer, "r" | "w" | "a")


class GlobalOrder:
    """Global-memory accesses since the last barrier, by thread 0 alone and by all threads."""

    def __init__(self) -> None:
        self.one: dict[Buffer, set[str]] = {}
        self.all: dict[Buffer, set[str]] = {}

    def conflicts(self, accesses: list[Access]) -> bool:
        for one, b, kind in accesses:
            other = self.all.get(b, set()) | (set() if one else self.one.get(b, set()))
            if any(kind != k or kind == "w" for k in other):
                return True
        return False

    def add(self, accesses: list[Access]) -> None:
        for one, b, kind in accesses:
            (self.one if one else self.all).setdefault(b, set()).add(kind)

    def clear(self) -> None:
        self.one, self.all = {}, {}

    def copy(self) -> GlobalOrder:
        out = GlobalOrder()
        out.one = {b: set(k) for b, k in self.one.items()}
        out.all = {b: set(k) for b, k in self.all.items()}
        return out

    def merge(self, other: GlobalOrder) -> None:
        """After control flow: what either path may have left unordered."""
        for mine, theirs in ((self.one, other.one), (self.all, other.all)):
            for b, kinds in theirs.items():
                mine.setdefault(b, set()).update(kinds)


class ThreadDependence:
    """The values that differ between the threads of a block: the thread index variables, lets
    and loop variables computed from them, T.Parallel variables, and the `var`/`local` buffers
    stored with such values or under control flow on them (to a fixpoint)."""

    def __init__(self, kernel) -> None:
        self.vars: set[Var] = set(kernel.thread_vars) if kernel is not None else set()
        self.buffers: set[Buffer] = set()
        if kernel is None:
            return
        size = -1
        while size != len(self.vars) + len(self.buffers):
            size = len(self.vars) + len(self.buffers)
            self._visit(kernel.body, False)

    def of(self, exprs) -> bool:
        """`exprs` may have a different value in different threads."""
        for e in exprs:
            for x in walk_expr(e):
                if isinstance(x, Var) and x in self.vars:
                    return True
                if isinstance(x, BufferLoad) and (x.buffer in self.buffers
                                                  or x.buffer.scope == "fragment"):
                    return True
        return False

    def _visit(self, s, dep: bool) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self._visit(c, dep)
        elif isinstance(s, (If, While, For)):
            dep = dep or self.of(stmt_exprs(s))
            if isinstance(s, For) and dep:
                self.vars.add(s.var)
            for c in (s.then_body, s.else_body) if isinstance(s, If) else (s.body,):
                if c is not None:
                    self._visit(c, dep)
        elif isinstance(s, ParallelLoop):
            self.vars.update(s.vars)
            self._visit(s.body, True)
        elif isinstance(s, LetStmt):
            if self.of([s.value]):
                self.vars.add(s.var)
        elif isinstance(s, BufferStore):
            if s.buffer.scope in ("var", "local") and (dep or self.of(stmt_exprs(s))):
                self.buffers.add(s.buffer)
        elif isinstance(s, TileOp):
            if dep or self.of(stmt_exprs(s)) or any(r.buffer.scope == "fragment"
                                                   for r in s.reads()):
                self.buffers.update(r.buffer for r in s.writes()
                                    if r.buffer.scope in ("var", "local"))


def once_per_block(em, s) -> bool:
    """A block-level scalar store or atomic to memory that thread 0 alone performs."""
    if em.in_parallel:
        return False
    if isinstance(s, BufferStore):
        return s.buffer.scope in MEMORY and not em.per_thread(stmt_exprs(s))
    if isinstance(s, Atomic) and not isinstance(s.src, BufferRegion):
        return not em.per_thread([*s.dst.starts, s.src])
    return False


def accesses(em, s, dep: bool = False) -> list[Access]:
    """The global-memory accesses of statement `s` (nested statements included) at block level;
    `dep`: `s` sits under control flow on the thread index."""
    if isinstance(s, SeqStmt):
        return [a for c in s.stmts for a in accesses(em, c, dep)]
    if isinstance(s, (If, While, For)):
        out = _loads(False, stmt_exprs(s))
        dep = dep or em.threads.of(stmt_exprs(s))
        for c in (s.then_body, s.else_body) if isinstance(s, If) else (s.body,):
            if c is not None:
                out += accesses(em, c, dep)
        return out
    if isinstance(s, BufferStore) or isinstance(s, Atomic) and not isinstance(s.src, BufferRegion):
        exprs = stmt_exprs(s) if isinstance(s, BufferStore) else [*s.dst.starts, s.src]
        one = not dep and not em.in_parallel and not em.threads.of(exprs) and (
            isinstance(s, Atomic) or s.buffer.scope in MEMORY)
        dst = s.buffer if isinstance(s, BufferStore) else s.dst.buffer
        out = _loads(one, exprs)
        if dst.scope == "global":
            out.append((one, dst, "w" if isinstance(s, BufferStore) else "a"))
        return out
    if isinstance(s, ParallelLoop):
        out = []
        for x in walk(s):
            out += _loads(False, stmt_exprs(x))
            if isinstance(x, (BufferStore, Atomic)):
                b = x.buffer if isinstance(x, BufferStore) else x.dst.buffer
                if b.scope == "global":
                    out.append((False, b, "w" if isinstance(x, BufferStore) else "a"))
        return out
    out = _loads(False, stmt_exprs(s))
    if isinstance(s, TileOp):
        out += [(False, r.buffer, "r") for r in s.reads() if r.buffer.scope == "global"]
        kind = "a" if isinstance(s, Atomic) else "w"
        out += [(False, r.buffer, kind) for r in s.writes() if r.buffer.scope == "global"]
    return out


def _loads(one: bool, exprs) -> list[Access]:
    return [(one, x.buffer, "r") for e in exprs for x in walk_expr(e)
            if isinstance(x, BufferLoad) and x.buffer.scope == "global"]
