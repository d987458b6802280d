"""Statements. Every statement made from user code carries the span of its line.

Loops: `For` covers serial / pipelined / unrolled / vectorized loops; `ParallelLoop` is one
`T.Parallel(*extents)` nest, the unit that layout inference maps onto threads.
`LetStmt` binds a name to a device value for the rest of its enclosing block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilecraft.diagnostics import Span

from .buffer import Buffer
from .expr import Expr, Var

LOOP_KINDS = ("serial", "pipelined", "unrolled", "vectorized")


class Stmt:
    span: Span | None

    def __str__(self) -> str:
        from .printer import stmt_str

        return stmt_str(self)


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]
    span: Span | None = field(default=None, compare=False)

    @classmethod
    def create(cls, stmts) -> Stmt:
        flat: list[Stmt] = []
        for s in stmts:
            flat.extend(s.stmts if isinstance(s, SeqStmt) else [s])
        return cls(tuple(flat))


@dataclass(frozen=True)
class PipelineInfo:
    """What `T.Pipelined` asked for: stages, the optional order/stage/group annotations, and
    `unroll`, a hint to the CUDA compiler (unroll that many iterations; 0: its own choice)."""

    num_stages: int = 0
    order: tuple[int, ...] | None = None
    stage: tuple[int, ...] | None = None
    group: tuple[tuple[int, ...], ...] | None = None
    unroll: int = 0


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    start: Expr
    extent: Expr
    kind: str
    body: Stmt
    pipeline: PipelineInfo | None = None
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ParallelLoop(Stmt):
    """`for i, j in T.Parallel(M, N)`: every (i, j) runs independently."""

    vars: tuple[Var, ...]
    extents: tuple[Any, ...]  # ints (or Exprs for dynamic extents)
    body: Stmt
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: Stmt
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class LetStmt(Stmt):
    """`v = expr` inside a kernel: binds `var` for the rest of the enclosing block."""

    var: Var
    value: Expr
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Allocate(Stmt):
    buffer: Buffer
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Evaluate(Stmt):
    """An expression run for its effect (`T.call_extern(...)`)."""

    value: Expr
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Break(Stmt):
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class KernelLaunch(Stmt):
    """`with T.Kernel(*grid, threads=...) as (bx, by, bz):` — the body runs once per block.
    `cluster`: `T.Kernel(..., cluster_dims=...)`'s thread-block cluster, one entry per grid
    dimension (each divides it), or None."""

    grid: tuple[Expr, ...]
    block_vars: tuple[Var, ...]
    threads: tuple[int, ...]
    thread_vars: tuple[Var, ...]
    body: Stmt
    span: Span | None = field(default=None, compare=False)
    cluster: tuple[int, ...] | None = None

    @property
    def cluster_size(self) -> int:
        n = 1
        for c in self.cluster or ():
            n *= c
        return n

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n
