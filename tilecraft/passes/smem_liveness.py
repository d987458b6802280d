"""Live ranges and barriers for the shared-memory planner (plan_shared_memory.py).

`Program` numbers the kernel body in pre-order (a T.Parallel nest is one statement), gives the
live range of a buffer from its uses (a use inside a loop keeps it alive for the whole loop
unless the body starts by overwriting all of it), and tells whether a `__syncthreads` lies on
every path between two statements (`separated`). The barriers it counts mirror where the CUDA
emitter (codegen/cuda/emitter.py, emit_pipeline.py) always puts them: a change there that drops
one must be mirrored here.
"""

from __future__ import annotations

import math

from tilecraft.ir import (
    Break,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    If,
    ParallelLoop,
    Reduce,
    SeqStmt,
    Stmt,
    TileOp,
    While,
)
from tilecraft.ir.visitor import stmt_children, stmt_exprs, walk, walk_expr

from .context import KernelState


def cross_warp_modes(layout, dim: int) -> list[tuple[int, int]]:
    """(thread stride, size) of the spatial modes of `dim` (replications excluded)."""
    out = []
    sizes = layout.spatial_sizes
    for k, m in enumerate(layout.spatial_modes):
        if m >= 0 and m in layout.dim_modes[dim]:
            out.append((math.prod(sizes[k + 1:]), sizes[k]))
    return out


def _loads(s: Stmt) -> set[Buffer]:
    return {y.buffer for e in stmt_exprs(s) for y in walk_expr(e) if isinstance(y, BufferLoad)}


def _touched(s: Stmt, reads_only: bool = False) -> set[Buffer]:
    """Shared buffers a statement itself reads (or reads and writes); a Parallel nest: its body."""
    out: set[Buffer] = set()
    for x in walk(s) if isinstance(s, ParallelLoop) else (s,):
        if isinstance(x, TileOp):
            out.update(r.buffer for r in x.reads() + (() if reads_only else x.writes()))
        if isinstance(x, BufferStore) and not reads_only:
            out.add(x.buffer)
        out |= _loads(x)
    return {b for b in out if b.scope == "shared"}


def _writes_shared(s: Stmt) -> bool:
    if isinstance(s, TileOp):
        return any(r.buffer.scope == "shared" for r in s.writes())
    return isinstance(s, (ParallelLoop, BufferStore)) and any(
        isinstance(x, BufferStore) and x.buffer.scope == "shared" for x in walk(s))


class Program:
    """The kernel body numbered in pre-order, and where the emitter puts barriers."""

    def __init__(self, state: KernelState):
        self.state = state
        self.stmts: list[Stmt] = []
        self.parent: list[int] = []
        self.last: list[int] = []  # the last number inside each statement
        self.children: list[list[int]] = []
        self._number(state.kernel.body, -1)
        self.uses: dict[Buffer, list[int]] = {}
        for i, s in enumerate(self.stmts):
            for b in _touched(s):
                self.uses.setdefault(b, []).append(i)
        self.pipelined = {i for i, s in enumerate(self.stmts) if id(s) in state.pipelines}
        self.producers = {id(p) for plan in state.pipelines.values() for p in plan.producers}
        self.scratch = set()  # cross-warp reductions combine through shared memory
        for i, s in enumerate(self.stmts):
            if isinstance(s, Reduce) and s.src.buffer.scope == "fragment":
                lay = state.layouts[s.src.buffer]
                if any(st * sz > 32 for st, sz in cross_warp_modes(lay, s.dim)):
                    self.scratch.add(i)

    def _number(self, s: Stmt, parent: int) -> None:
        i = len(self.stmts)
        self.stmts.append(s)
        self.parent.append(parent)
        self.last.append(i)
        self.children.append([])
        if parent >= 0:
            self.children[parent].append(i)
        if not isinstance(s, ParallelLoop):
            for c in stmt_children(s):
                self._number(c, i)
        self.last[i] = len(self.stmts) - 1

    def _ancestors(self, i: int) -> list[int]:
        out = [i]
        while self.parent[out[-1]] >= 0:
            out.append(self.parent[out[-1]])
        return out

    def _is_loop(self, i: int) -> bool:
        return isinstance(self.stmts[i], (For, While))

    # ---- liveness ------------------------------------------------------------------------
    def live_range(self, buf: Buffer, uses: list[int]) -> tuple[int, int]:
        lo, hi = min(uses), max(uses)
        for q, s in enumerate(self.stmts):
            inside = any(q < u <= self.last[q] for u in uses) or (isinstance(s, While) and q in uses)
            if self._is_loop(q) and inside and not self._killed(q, buf, uses):
                lo, hi = min(lo, q), max(hi, self.last[q])
        return lo, hi

    def _killed(self, q: int, buf: Buffer, uses: list[int]) -> bool:
        """Loop q's body starts, at its top level, by overwriting all of `buf` unread."""
        plan = self.state.pipelines.get(id(self.stmts[q]))
        if q in uses or self._breaks(q + 1) or (plan is not None and buf in plan.buffers):
            return False
        first = min(u for u in uses if q < u <= self.last[q])
        op = self.stmts[first]
        top = first == q + 1 or (isinstance(self.stmts[q + 1], SeqStmt)
                                 and self.parent[first] == q + 1)
        return (top and isinstance(op, TileOp) and buf not in _touched(op, reads_only=True)
                and any(r.buffer == buf and r.is_full() for r in op.writes()))

    # ---- barriers ------------------------------------------------------------------------
    def _sync_after(self, i: int) -> bool:
        """The emitter always ends statement i with a barrier."""
        s = self.stmts[i]
        if isinstance(s, (TileOp, ParallelLoop)):
            return (_writes_shared(s) and id(s) not in self.producers) or i in self.scratch
        return i in self.pipelined  # the drain

    def _body_end_sync(self, q: int) -> bool:
        """Serial loop q ends every iteration with a barrier (its body touches shared memory)."""
        return (isinstance(self.stmts[q], For) and q not in self.pipelined
                and any(q < u <= self.last[q] for us in self.uses.values() for u in us))

    def _may_sync(self, i: int) -> bool:
        return (_writes_shared(self.stmts[i]) or i in self.scratch or i in self.pipelined
                or self._body_end_sync(i))

    def _breaks(self, i: int) -> bool:
        """A Break inside statement i leaves it (one in a nested loop ends that loop only)."""
        if self._is_loop(i):
            return False
        return isinstance(self.stmts[i], Break) or any(self._breaks(c) for c in self.children[i])

    def _after(self, a: int, top: int) -> bool:
        """A barrier on every path from the end of statement a out of `top` (a or an ancestor)."""
        if self._sync_after(a):
            return True
        cur, broken = a, False
        while cur != top:
            p = self.parent[cur]
            if isinstance(self.stmts[p], SeqStmt) and not broken:
                for c in (c for c in self.children[p] if c > cur):
                    if self._sync_after(c):
                        return True
                    if self._breaks(c):
                        broken = True  # the rest of the loop body may be skipped
                        break
            if self._is_loop(p):
                if (not broken and self._body_end_sync(p)) or self._sync_after(p):
                    return True
                broken = False
            cur = p
        return False

    def _before(self, b: int, top: int) -> bool:
        """A barrier on every path from entering `top` (an ancestor of b) to statement b."""
        cur = b
        while cur != top:
            p = self.parent[cur]
            if isinstance(self.stmts[p], SeqStmt) and any(
                    self._sync_after(c) for c in self.children[p] if c < cur):
                return True
            if p in self.pipelined and id(self.stmts[b]) not in self.producers:
                return True  # each iteration waits for its stage, then a barrier
            cur = p
        return False

    def _flagged(self, a: int, b: int) -> bool:
        """The emitter puts a barrier right before b: b writes shared memory, a read shared
        memory, and nothing emitted in between (the rest of a's loops included) can sync."""
        sa, sb = self.stmts[a], self.stmts[b]
        if self._is_loop(a) or id(sa) in self.producers or not _touched(sa, reads_only=True):
            return False
        if not ((_writes_shared(sb) and id(sb) not in self.producers) or b in self.scratch):
            return False
        between = set(range(a + 1, b)) | set(self._ancestors(a)) - set(self._ancestors(b))
        return not any(self._may_sync(z) for z in between - {a})

    def separated(self, a: int, b: int) -> bool:
        """A barrier lies on every path from statement a to a later statement b, and from b back
        to a around every loop holding both."""
        up_a, up_b = self._ancestors(a), self._ancestors(b)
        common = [x for x in up_a if x in set(up_b)]
        lca = common[0]
        if lca == a:  # b is inside a (a loop whose bounds read shared memory)
            forward = self._before(b, a)
        elif isinstance(self.stmts[lca], If):
            return False  # the two branches of one If: assume nothing about their order
        else:
            ca, cb = up_a[up_a.index(lca) - 1], up_b[up_b.index(lca) - 1]
            forward = (self._after(a, ca) or self._before(b, cb) or any(
                self._sync_after(c) for c in self.children[lca] if ca < c < cb))
        forward = forward or self._flagged(a, b)
        loops = [w for w in common if w != a and self._is_loop(w)]
        return forward and all(
            self._after(x, w + 1) or self._before(y, w) or self._body_end_sync(w)
            or w in self.pipelined for w in loops for x, y in ((a, b), (b, a)))
