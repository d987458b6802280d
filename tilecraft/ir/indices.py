"""Index analyses both backends share: which index arithmetic is done in 64 bits, and which
fragment accesses a T.Parallel loop cannot make.

Index width (the language's rule, docs/compiler.md): a global tensor that may hold 2^31
elements or more (static size, or any dynamic dim) is indexed in 64-bit arithmetic: every
index expression into it, every product and sum of its flat offset, and the integer lets those
indices read (directly or through other lets) are computed as int64. Other indices keep 32 bits.

    base = bx * 1024              ->  int64 (it feeds an index of A)
    A[r, base + i]                ->  widen(r), widen(base + i): (int64)base + (int64)i
"""

from __future__ import annotations

from dataclasses import replace

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError

from .buffer import Buffer
from .expr import BinOp, BufferLoad, Call, Cast, Compare, Const, Expr, Not, Select, Var
from .stmt import BufferStore, LetStmt, ParallelLoop
from .tileops import TileOp
from .visitor import stmt_exprs, walk, walk_expr


def needs_64bit_index(buf: Buffer) -> bool:
    """Global tensors that may hold 2^31 elements or more get 64-bit index arithmetic."""
    if buf.scope != "global":
        return False
    n = buf.numel()
    return n is None or n >= 2**31


def wide_index_roots(body) -> list[Expr]:
    """Every index expression into a tensor that needs 64-bit indices (loads, stores, tile-op
    region starts)."""
    roots: list[Expr] = []
    for s in walk(body):
        if isinstance(s, BufferStore) and needs_64bit_index(s.buffer):
            roots.extend(s.indices)
        if isinstance(s, TileOp):
            roots.extend(x for r in s.reads() + s.writes() if needs_64bit_index(r.buffer)
                         for x in r.starts)
        for e in stmt_exprs(s):
            roots.extend(i for y in walk_expr(e)
                         if isinstance(y, BufferLoad) and needs_64bit_index(y.buffer)
                         for i in y.indices)
    return roots


def wide_let_vars(body) -> set[Var]:
    """Integer `let` variables that an index into a 64-bit-indexed tensor reads, directly or
    through other lets (`base = bx * 256; A[base + i]`): they are computed in 64 bits."""
    lets = {s.var: s.value for s in walk(body) if isinstance(s, LetStmt) and s.var.dtype.is_integer}
    if not lets:
        return set()
    wide: set[Var] = set()
    stack = [v for e in wide_index_roots(body) for v in walk_expr(e) if isinstance(v, Var)]
    while stack:
        v = stack.pop()
        if v in lets and v not in wide:
            wide.add(v)
            stack.extend(x for x in walk_expr(lets[v]) if isinstance(x, Var))
    return wide


def _wide_type(t: dt.DataType) -> dt.DataType:
    return dt.int64 if t.is_integer and t.bits < 64 else t


def widen(e: Expr) -> Expr:
    """`e` with every integer sub-expression narrower than 64 bits computed as int64: variables
    and loaded values converted, constants retyped, operations and integer casts in int64 (what
    the CUDA printer's wide mode prints). Loads keep their own indices."""
    t = _wide_type(e.dtype)
    if isinstance(e, Const):
        return Const(e.value, t) if t is not e.dtype else e
    if isinstance(e, (Var, BufferLoad)):
        return Cast(e, t) if t is not e.dtype else e
    if isinstance(e, BinOp):
        return replace(e, a=widen(e.a), b=widen(e.b), dtype=t)
    if isinstance(e, Compare):
        return replace(e, a=widen(e.a), b=widen(e.b))
    if isinstance(e, Not):
        return replace(e, a=widen(e.a))
    if isinstance(e, Select):
        return replace(e, cond=widen(e.cond), a=widen(e.a), b=widen(e.b), dtype=t)
    if isinstance(e, Cast):
        return replace(e, value=widen(e.value), dtype=t)
    if isinstance(e, Call):
        return replace(e, args=tuple(widen(a) for a in e.args), dtype=t)
    return e


def check_parallel_fragments(loop: ParallelLoop, extents) -> None:
    """A fragment indexed by a T.Parallel variable spans that variable's whole extent: each
    thread holds the elements its layout gives it, and the loop runs where the fragment lives.
    `extents`: the loop's extents as ints (None for one unknown at compile time). TC401 at the
    loop when a fragment dimension is smaller than the extent of the variable indexing it."""
    for s in walk(loop.body):
        accesses = [(s.buffer, s.indices)] if isinstance(s, BufferStore) else []
        accesses += [(y.buffer, y.indices) for e in stmt_exprs(s) for y in walk_expr(e)
                     if isinstance(y, BufferLoad)]
        for buf, indices in accesses:
            if buf.scope != "fragment":
                continue
            for d, (ix, n) in enumerate(zip(indices, buf.shape)):
                if not (isinstance(ix, Var) and ix in loop.vars and isinstance(n, int)):
                    continue
                ext = extents[loop.vars.index(ix)]
                if isinstance(ext, int) and ext > n:
                    raise TilecraftError(
                        "TC401", span=loop.span, buffer=buf.name, shape=list(buf.shape),
                        detail=f"T.Parallel{tuple(extents)} indexes dimension {d} (size {n}) "
                        f"with `{ix.name}` up to {ext - 1}")
