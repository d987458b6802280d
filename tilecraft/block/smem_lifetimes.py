"""Lifetimes of a block program's shared tensors, for the arena planner (smem_plan.py).

Statements are numbered in program order (a loop takes one number before its body and one
after). A tensor lives from its first to its last access (a load in an instruction's offsets
or other expressions is one); an access through a `shared_slice` (a stage of a pipelined tile)
is one of the sliced tensor. Beyond its accesses, a tensor lives:

- over every loop that it was allocated outside of and that accesses it (the next iteration
  may read what this one wrote), unless every iteration begins by overwriting all of it: the
  body's first access of the tensor is, at the body's top level, a `store_shared` of the whole
  tensor or a `copy_async` into all of it, the body has no `break` (nor a while condition that
  reads the tensor) and leaves no copy into it pending. What one iteration wrote is then dead
  by the next: the tensor lives from that write on, and between its last access in one
  iteration and the write in the next, other tensors may use its bytes;
- in a warp_roles split, over both roles when the producer touches it (they run at once);
- until the waits that land asynchronous writes into it (a `copy_async` lands at a
  `copy_async_wait_group`, a `copy_async_bulk` at an `mbarrier_wait` on its barrier) and the
  wait that completes an asynchronous `dot_shared` reading it (`dot_wait_group`); a copy never
  waited for keeps it alive to the end.

    for k in range(n):                  X lives [1, 2] of each iteration, Y [3, 4]: they may
        store_shared(r, X)     # 1      share bytes (insert_barriers then orders the load of
        r = load_shared(X)     # 2      X before the store into Y, and the load of Y before
        store_shared(r, Y)     # 3      the next iteration's store into X)
        r = load_shared(Y)     # 4
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tilecraft.ir import (
    Atomic,
    Break,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    For,
    If,
    SeqStmt,
    Stmt,
    While,
)
from tilecraft.ir.expr import const_int
from tilecraft.ir.visitor import stmt_children, stmt_exprs, walk, walk_expr

from .dot_shared import DotShared, DotWaitGroup
from .instructions import AllocateShared, Instruction
from .mbarrier import CopyAsyncBulk, MbarrierInit, MbarrierWait
from .roles import WarpRoles
from .smem_async import BulkCopy, Pending, drains
from .tensors import SharedTensor
from .transfer import CopyAsync, CopyAsyncWaitGroup, SharedSlice, StoreShared


@dataclass
class Root:
    """An allocated shared tensor: where it is allocated and used (statement numbers)."""

    tensor: SharedTensor
    alloc: int
    uses: list[int] = field(default_factory=list)
    sliced: bool = False  # viewed by shared_slice (the stages of a pipelined tile)
    bulk: bool = False  # written by copy_async_bulk (TMA, through the async proxy)
    barrier: bool = False  # holds mbarriers (mbarrier_init writes it)

    def span(self) -> tuple[int, int]:
        """(first, last) statement number of its lifetime."""
        pos = self.uses or [self.alloc]
        return min(pos), max(pos)


class Lifetimes:
    """Walks a program body once: every shared tensor's `Root`, and (`scratch`: bytes of
    shared memory an instruction stages through when printed) the statement number of each
    instruction that needs some, in `staged` as (instruction, number, bytes)."""

    def __init__(self, scratch: Callable[[Instruction], int] | None = None):
        self.pos = 0
        self.roots: dict[Buffer, Root] = {}
        self.alias: dict[Buffer, Buffer] = {}  # slice -> its root
        self.sliced: set[Buffer] = set()
        self.staged: list[tuple[Instruction, int, int]] = []
        self.scratch = scratch
        self.loop_uses: list[list[Root]] = []  # per enclosing loop: the roots used in it
        self.pending = Pending()  # asynchronous work in flight (smem_async.py)
        self.guards: list = []  # conditions of the enclosing `if`s (None: an else branch)

    def root(self, b: Buffer) -> Root | None:
        return self.roots.get(self.alias.get(b, b))

    # ---- the walk -----------------------------------------------------------------------------
    def visit(self, s: Stmt, top: bool = True) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.visit(c, top=False)
        elif isinstance(s, (For, While)):
            self.loop(s)
        elif isinstance(s, WarpRoles):
            self.roles(s)
        elif isinstance(s, If):
            self.pos += 1
            self.scalar_uses(s)
            before = self.pending.copy()
            self.guards.append(s.cond)
            self.visit(s.then_body, top=False)
            self.guards[-1] = None
            then, self.pending = self.pending, before
            if s.else_body is not None:
                self.visit(s.else_body, top=False)
            self.guards.pop()
            self.pending.merge(then)
        elif isinstance(s, Instruction):
            self.pos += 1
            self.instruction(s)
        else:  # scalar code: its loads and stores of shared memory
            self.pos += 1
            self.scalar_uses(s)
            for c in stmt_children(s):
                self.visit(c, top=False)
        if top:  # what is never waited for lands after everything
            self.pos += 1
            for b in self.pending.roots():
                self._use(self.roots[b])
            for b in remote_buffers(s):  # other blocks of the cluster may read it until the end
                if (r := self.root(b)) is not None:
                    self._use(r)

    def roles(self, s: WarpRoles) -> None:
        """The roles run at once: what the producer touches lives until the consumer ends, and
        the producer's copies land at the consumer's waits."""
        self.pos += 1
        seen = {b: len(r.uses) for b, r in self.roots.items()}
        self.visit(s.producer, top=False)
        producer = [r for b, r in self.roots.items() if len(r.uses) > seen.get(b, 0)]
        self.visit(s.consumer, top=False)
        self.pos += 1
        for r in producer:
            self._use(r)

    def loop(self, s: For | While) -> None:
        start = self.pos = self.pos + 1
        self.scalar_uses(s)
        kills = self.kills(s)
        before = self.pending.copy()
        for x in walk(s.body):  # what one iteration issues may land at the next one's waits
            if isinstance(x, SharedSlice) and (r := self.root(x.src.buffer)) is not None:
                self.alias[x.out.buffer] = r.tensor.buffer
            elif isinstance(x, CopyAsync) and (r := self.root(x.dst.buffer)) is not None:
                self.pending.copies.add(r.tensor.buffer)
            elif isinstance(x, DotShared) and x.asynchronous:
                self.pending.dots |= self.operands(x)
        inner: list[Root] = []
        self.loop_uses.append(inner)
        guards, self.guards = self.guards, []
        self.visit(s.body, top=False)
        self.guards = guards
        self.loop_uses.pop()
        self.pos += 1
        end = self.pos
        for bars, copies in list(self.pending.bulk.items()):
            old = before.bulk.get(bars, [])
            new = [c for c in copies if c not in old]
            if new and drains(s, bars, int(self.roots[bars].tensor.shape[0]), old, new):
                del self.pending.bulk[bars]
                before.bulk.pop(bars, None)
        self.pending.merge(before)  # (or the loop runs no iteration)
        pending = self.pending.roots()
        for r in inner:  # alive for the whole loop when allocated outside it
            b = r.tensor.buffer
            if r.alloc < start and not (b in kills and b not in pending):
                r.uses += [start, end]
        if self.loop_uses:
            self.loop_uses[-1].extend(inner)

    def instruction(self, s: Instruction) -> None:
        if isinstance(s, AllocateShared):
            self.roots[s.out.buffer] = Root(s.out, self.pos)
            return
        if isinstance(s, SharedSlice):
            r = self.root(s.src.buffer)
            if r is not None:
                self.alias[s.out.buffer] = r.tensor.buffer
                r.sliced = True
                self.sliced.add(r.tensor.buffer)
                self._use(r)
            return
        for t in (*s.reads(), *s.writes()):  # (a parallel body's accesses included)
            if isinstance(t, SharedTensor) and (r := self.root(t.buffer)) is not None:
                self._use(r)
                r.barrier |= isinstance(s, MbarrierInit)
        self.scalar_uses(s)  # shared memory its offsets (or fill value, ...) read
        pend = self.pending
        if isinstance(s, CopyAsync) and (r := self.root(s.dst.buffer)) is not None:
            pend.copies.add(r.tensor.buffer)
        elif isinstance(s, CopyAsyncBulk) and (r := self.root(s.dst.buffer)) is not None:
            r.bulk = True
            guard = self.guards[-1] if self.guards else None
            pend.bulk.setdefault(s.bars.buffer, []).append(
                BulkCopy(r.tensor.buffer, s, guard))
        elif isinstance(s, DotShared) and s.asynchronous:
            pend.dots |= self.operands(s)
        elif isinstance(s, CopyAsyncWaitGroup):
            self._land(pend.copies, clear=s.n == 0)
        elif isinstance(s, DotWaitGroup):
            self._land(pend.dots, clear=s.n == 0)
        elif isinstance(s, MbarrierWait):
            self._land({c.root for c in pend.bulk.get(s.bars.buffer, [])}, clear=False)
        if self.scratch is not None and (n := self.scratch(s)) > 0:
            self.staged.append((s, self.pos, n))

    def operands(self, s: DotShared) -> set[Buffer]:
        return {r.tensor.buffer for t in (s.a, s.b)
                if isinstance(t, SharedTensor) and (r := self.root(t.buffer)) is not None}

    def scalar_uses(self, s: Stmt) -> None:
        """The shared tensors a statement's own expressions load, and scalar code stores."""
        bufs = [s.buffer] if isinstance(s, BufferStore) else \
            [] if isinstance(s, Instruction) else _atomic_writes(s)
        bufs += [x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                 if isinstance(x, BufferLoad)]
        for b in bufs:
            if (r := self.root(b)) is not None:
                self._use(r)

    def _use(self, r: Root) -> None:
        r.uses.append(self.pos)
        for inner in self.loop_uses:
            inner.append(r)

    def _land(self, roots: set[Buffer], clear: bool) -> None:
        for b in roots:
            self._use(self.roots[b])
        if clear:
            roots.clear()

    # ---- full overwrites at the top of a loop body ----------------------------------------------
    def kills(self, loop: For | While) -> set[Buffer]:
        """Roots whose first access in every iteration of `loop` overwrites all of them."""
        if any(isinstance(x, Break) for x in walk(loop.body)):
            return set()
        seen: set[Buffer] = set()
        if isinstance(loop, While):
            seen |= {x.buffer for x in walk_expr(loop.cond) if isinstance(x, BufferLoad)}
        out: set[Buffer] = set()
        alias = dict(self.alias)
        for x in loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,):
            if isinstance(x, SharedSlice):
                alias[x.out.buffer] = alias.get(x.src.buffer, x.src.buffer)
            whole = _overwritten(x)
            if whole is not None and whole not in seen and whole not in alias and \
                    whole not in _read(x):
                out.add(whole)
            seen |= {alias.get(b, b) for b in _touched(x)}
        return out


def remote_buffers(s: Stmt) -> set[Buffer]:
    """The shared buffers that `T.remote` reads in `s` (parallel bodies included)."""
    from .parallel import ParallelCompute

    out = set()
    for x in walk(s):
        for y in walk(x.body) if isinstance(x, ParallelCompute) else (x,):
            for e in stmt_exprs(y):
                out |= {c.args[1].buffer for c in walk_expr(e)
                        if isinstance(c, Call) and c.op == "remote_load"}
    return out


def _read(s: Stmt) -> set[Buffer]:
    if isinstance(s, Instruction):
        return {t.buffer for t in s.reads() if isinstance(t, SharedTensor)}
    return set()


def _touched(s: Stmt) -> set[Buffer]:
    """Buffers statement `s` (and what it contains) reads or writes."""
    out: set[Buffer] = set()
    for x in walk(s):
        if isinstance(x, Instruction):
            out |= {t.buffer for t in (*x.reads(), *x.writes()) if isinstance(t, SharedTensor)}
            if isinstance(x, SharedSlice):
                out.add(x.src.buffer)
        else:
            if isinstance(x, BufferStore):
                out.add(x.buffer)
            out |= set(_atomic_writes(x))
            out |= {y.buffer for e in stmt_exprs(x) for y in walk_expr(e)
                    if isinstance(y, BufferLoad)}
    return out


def _atomic_writes(s: Stmt) -> list[Buffer]:
    """What a scalar atomic writes: its destination and the shared element of its old value."""
    return [r.buffer for r in s.writes()] if isinstance(s, Atomic) else []


def _overwritten(s: Stmt) -> Buffer | None:
    """The shared tensor instruction `s` writes every element of, if any."""
    if isinstance(s, (CopyAsync, CopyAsyncBulk)):
        return s.dst.buffer
    if isinstance(s, StoreShared):
        whole, tile = s.dst, s.src
        if any(const_int(o) != 0 for o in s.offset):
            return None
        extents = [1] * whole.ndim
        for d, n in zip(s.dims, tile.shape):
            extents[d] = int(n)
        if all(int(w) == e for w, e in zip(whole.shape, extents)):
            return whole.buffer
    return None
