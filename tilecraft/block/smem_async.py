"""Asynchronous work still in flight, for the shared-memory lifetimes (smem_lifetimes.py): a
tensor an async copy writes lives until the copy lands, one an asynchronous `dot_shared` reads
until it completes.

- `copy_async` lands at a `copy_async_wait_group(n)` (all of them at n = 0);
- `dot_shared(..., asynchronous=True)` completes at a `dot_wait_group(n)` (all at n = 0);
- `copy_async_bulk` lands at an `mbarrier_wait` on its barrier. Which wait is a matter of
  barrier indices and phases, so a bulk copy stays pending after every wait, except where a
  loop provably drains its barrier (`drains`): the TMA pipeline of passes/pipeline_copies.py,

      if c < n: copy_async_bulk(..., barrier=bars[c])              (c = 0 .. a-1, prologue)
      for v in range(start, start + n):                            k = v - start
          mbarrier_wait(bars, k % S, ...)                          (every thread)
          if k + a < n: copy_async_bulk(..., barrier=bars[(k + a) % S])      (1 <= a < S)

  whose copy into barrier (k + a) % S, issued at iteration k, is waited for at iteration
  k + a < n (the first iteration after k whose wait names that barrier), and whose prologue
  copy c at iteration c < n: none is in flight once the loop is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilecraft.ir import Break, Buffer, Compare, Const, Expr, For, If, SeqStmt, Stmt
from tilecraft.ir.expr import BinOp, const_int
from tilecraft.ir.simplify import linear_form, simplify
from tilecraft.ir.visitor import walk

from .mbarrier import CopyAsyncBulk, MbarrierWait


@dataclass(frozen=True, eq=False)
class BulkCopy:
    """A pending copy_async_bulk into `root`, and the condition of the `if` right around it."""

    root: Buffer
    copy: CopyAsyncBulk
    guard: Expr | None


@dataclass
class Pending:
    """What is in flight at a point of the walk (roots, by their buffers)."""

    copies: set = field(default_factory=set)  # written by copy_async
    dots: set = field(default_factory=set)  # read by asynchronous dot_shared
    bulk: dict = field(default_factory=dict)  # barrier buffer -> [BulkCopy]

    def copy(self) -> Pending:
        return Pending(set(self.copies), set(self.dots),
                       {b: list(v) for b, v in self.bulk.items()})

    def merge(self, other: Pending) -> None:
        """In flight after this path or `other`."""
        self.copies |= other.copies
        self.dots |= other.dots
        for b, v in other.bulk.items():
            mine = self.bulk.setdefault(b, [])
            mine += [c for c in v if c not in mine]

    def roots(self) -> set:
        return self.copies | self.dots | {c.root for v in self.bulk.values() for c in v}


def drains(loop: Stmt, bars: Buffer, n_stages: int, before: list[BulkCopy],
           inside: list[BulkCopy]) -> bool:
    """`loop` lands every bulk copy on `bars` (`n_stages` barriers) pending before it
    (`before`) or issued by it (`inside`) by the time it ends (see the module docstring)."""
    if not isinstance(loop, For) or any(isinstance(x, Break) for x in walk(loop.body)):
        return False  # (a break may leave copies in flight)
    k = simplify(loop.var - loop.start)
    n = loop.extent
    top = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    waits = [x for x in walk(loop.body) if isinstance(x, MbarrierWait) and x.bars.buffer is bars]
    if len(waits) != 1 or waits[0].issuer or not any(x is waits[0] for x in top):
        return False
    first = next(i for i, x in enumerate(top) if x is waits[0])
    if not _same(waits[0].index, simplify(k % n_stages)):
        return False
    guarded = {}  # id(copy) -> ahead, for the copies right inside a top-level `if k + a < n`
    for x in top[first + 1:]:
        if isinstance(x, If) and x.else_body is None:
            body = x.then_body.stmts if isinstance(x.then_body, SeqStmt) else (x.then_body,)
            for a in range(1, n_stages):
                if _same_lt(x.cond, simplify(k + a), n):
                    guarded.update({id(c): a for c in body if isinstance(c, CopyAsyncBulk)})
    for c in inside:
        a = guarded.get(id(c.copy))
        if a is None or not _same(c.copy.index, simplify(simplify(k + a) % n_stages)):
            return False
    for c in before:  # the prologue: copy c of iteration c < n
        stage = const_int(c.copy.index)
        if stage is None or not 0 <= stage < n_stages:
            return False
        known = const_int(n)
        if not (c.guard is not None and _same_lt(c.guard, Const.create(stage), n)) and \
                not (known is not None and stage < known):
            return False
    return True


def _same(a: Expr, b: Expr) -> bool:
    if isinstance(a, BinOp) and isinstance(b, BinOp) and a.op == b.op == "%":
        return const_int(a.b) == const_int(b.b) is not None and _same(a.a, b.a)
    la, lb = linear_form(a), linear_form(b)
    return la is not None and la == lb


def _same_lt(cond: Expr, lhs: Expr, rhs: Expr) -> bool:
    """`cond` is `lhs < rhs` (as affine forms)."""
    return isinstance(cond, Compare) and cond.op == "<" and _same(cond.a, lhs) and \
        _same(cond.b, rhs)
