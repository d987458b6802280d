"""Generic traversal: children of statements and expressions, and a pre-order walk."""

from __future__ import annotations

from collections.abc import Iterator

from .buffer import BufferRegion
from .expr import BinOp, BufferLoad, Call, Cast, Compare, Expr, Not, Select
from .stmt import (BufferStore, Evaluate, For, If, KernelLaunch, LetStmt, ParallelLoop, SeqStmt,
                   Stmt, While)
from .tileops import Atomic, DeviceAssert, Fill, Print, TileOp


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, (For, ParallelLoop, While, KernelLaunch)):
        return (s.body,)
    if isinstance(s, If):
        return (s.then_body,) + ((s.else_body,) if s.else_body is not None else ())
    return ()


def walk(s: Stmt) -> Iterator[Stmt]:
    """Every statement under `s` (itself included), pre-order."""
    yield s
    for c in stmt_children(s):
        yield from walk(c)


def expr_children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (BinOp, Compare)):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, BufferLoad):
        return e.indices
    return ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    yield e
    for c in expr_children(e):
        yield from walk_expr(c)


def region_exprs(r: BufferRegion) -> tuple[Expr, ...]:
    return tuple(r.starts) + tuple(x for x in r.extents if isinstance(x, Expr))


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement itself holds (not those of nested statements)."""
    if isinstance(s, (For,)):
        return (s.start, s.extent)
    if isinstance(s, (If, While)):
        return (s.cond,)
    if isinstance(s, LetStmt):
        return (s.value,)
    if isinstance(s, BufferStore):
        return tuple(s.indices) + (s.value,)
    if isinstance(s, Evaluate):
        return (s.value,)
    if isinstance(s, KernelLaunch):
        return tuple(s.grid)
    if isinstance(s, ParallelLoop):
        return tuple(x for x in s.extents if isinstance(x, Expr))
    if isinstance(s, TileOp):
        out: list[Expr] = []
        for r in s.reads() + s.writes():
            out.extend(region_exprs(r))
        if isinstance(s, Fill):
            out.append(s.value)
        if isinstance(s, Atomic) and isinstance(s.src, Expr):
            out.append(s.src)
        if isinstance(s, Print) and isinstance(s.value, Expr):
            out.append(s.value)
        if isinstance(s, DeviceAssert):
            out.append(s.cond)
        return tuple(out)
    exprs = getattr(s, "exprs", None)  # block instructions (tilecraft/block) list their own
    return tuple(exprs()) if callable(exprs) else ()
