"""plan_shared: where each shared tensor of a block program lives in the arena (byte offsets),
tensors whose lifetimes do not overlap sharing bytes.

A tensor's lifetime runs from its first to its last access in program order; an access inside
a loop that the tensor was allocated outside of keeps it alive for the whole loop (the next
iteration comes back to it). Tensors whose lifetimes are disjoint may share bytes; the stages
of a pipelined tile (a tensor that `shared_slice` views) never do, since its slices are ordered
by the pipelining pass alone. `groups` names, for every tensor that shares bytes with another,
one representative: insert_barriers treats the tensors of a group as the same memory, so the
first write of the later tensor waits for the other threads' last reads of the earlier one.

    Q_s  [--------------------]                 Q_s and O_s share bytes (Q_s's last read,
    K_s  [----------------------------]         a barrier, then O_s's first write)
    O_s                          [--------]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilecraft.ir import Buffer, BufferLoad, BufferStore, For, SeqStmt, Stmt, While
from tilecraft.ir.visitor import stmt_children, stmt_exprs, walk_expr

from .instructions import AllocateShared, Instruction
from .tensors import SharedTensor
from .transfer import SharedSlice


@dataclass
class SharedPlan:
    offsets: dict[Buffer, int] = field(default_factory=dict)  # root tensor -> byte offset
    size: int = 0  # bytes of the arena the tensors take
    groups: dict[Buffer, Buffer] = field(default_factory=dict)  # tensor -> its group's first


def _align(t: SharedTensor) -> int:
    return 1024 if t.layout.swizzle is not None else 128  # (TMA, wgmma: whole swizzle periods)


def _nbytes(t: SharedTensor) -> int:
    return -(-t.layout.cosize * t.dtype.bits // 8 // 16) * 16


def plan_shared(body: Stmt) -> SharedPlan:
    """The arena of the program body `body`."""
    walker = _Lifetimes()
    walker.visit(body)
    roots = walker.roots
    placed: list[tuple[int, int, int, int, Buffer]] = []  # (start, end, first, last, buffer)
    plan = SharedPlan()
    order = sorted(roots.values(), key=lambda r: -_nbytes(r.tensor))
    for r in order:
        t, size, align = r.tensor, _nbytes(r.tensor), _align(r.tensor)
        first, last = r.span()
        offset = 0
        while True:
            offset = -(-offset // align) * align
            clash = [p for p in placed if p[0] < offset + size and offset < p[1]
                     and (r.sliced or p[4] in walker.sliced or not (last < p[2] or p[3] < first))]
            if not clash:
                break
            offset = max(p[1] for p in clash)
        placed.append((offset, offset + size, first, last, t.buffer))
        plan.offsets[t.buffer] = offset
        plan.size = max(plan.size, offset + size)
    for i, a in enumerate(placed):  # tensors sharing bytes: one group
        for b in placed[:i]:
            if a[0] < b[1] and b[0] < a[1]:
                ra, rb = _find(plan.groups, a[4]), _find(plan.groups, b[4])
                if ra is not rb:
                    plan.groups[ra] = rb
    members = set(plan.groups) | set(plan.groups.values())
    plan.groups = {b: _find(plan.groups, b) for b in members}
    return plan


def _find(groups: dict, b: Buffer) -> Buffer:
    while b in groups and groups[b] is not b:
        b = groups[b]
    return b


@dataclass
class _Root:
    tensor: SharedTensor
    alloc: int
    uses: list[int] = field(default_factory=list)
    sliced: bool = False

    def span(self) -> tuple[int, int]:
        pos = self.uses or [self.alloc]
        return min(pos), max(pos)


class _Lifetimes:
    """Positions (statement order) of every shared tensor's allocation and accesses, loops
    extending the accesses of tensors allocated outside them."""

    def __init__(self):
        self.pos = 0
        self.roots: dict[Buffer, _Root] = {}
        self.alias: dict[Buffer, Buffer] = {}  # slice -> its root
        self.sliced: set[Buffer] = set()
        self.loop_uses: list[list[_Root]] = []  # per enclosing loop: the roots used in it

    def root(self, t) -> _Root | None:
        b = t.buffer
        return self.roots.get(self.alias.get(b, b))

    def visit(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.visit(c)
            return
        if isinstance(s, (For, While)):
            start = self.pos
            self.pos += 1
            inner: list[_Root] = []
            self.loop_uses.append(inner)
            self.visit(s.body)
            self.loop_uses.pop()
            end = self.pos
            for r in inner:  # alive for the whole loop when allocated outside it
                if r.alloc < start:
                    r.uses += [start, end]
            if self.loop_uses:
                self.loop_uses[-1].extend(inner)
            return
        if isinstance(s, Instruction):
            self.pos += 1
            if isinstance(s, AllocateShared):
                self.roots[s.out.buffer] = _Root(s.out, self.pos)
                return
            if isinstance(s, SharedSlice):
                r = self.root(s.src)
                if r is not None:
                    self.alias[s.out.buffer] = r.tensor.buffer
                    r.sliced = True
                    self.sliced.add(r.tensor.buffer)
                    self._use(r)
                return
            for t in (*s.reads(), *s.writes()):  # (a parallel body's accesses included)
                if isinstance(t, SharedTensor):
                    r = self.root(t)
                    if r is not None:
                        self._use(r)
            return
        self.pos += 1  # scalar code: its loads and stores of shared memory
        bufs = [s.buffer] if isinstance(s, BufferStore) else []
        bufs += [x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                 if isinstance(x, BufferLoad)]
        for b in bufs:
            r = self.roots.get(self.alias.get(b, b))
            if r is not None:
                self._use(r)
        for c in stmt_children(s):
            self.visit(c)

    def _use(self, r: _Root) -> None:
        r.uses.append(self.pos)
        for inner in self.loop_uses:
            inner.append(r)
