"""The NaN debugger: stop at the first statement that computes a NaN or an inf from operands that
had none, and say where and why (TC404).

The machine calls `before(machine, stmt)` for every statement when it was made with
`debug_nans=True` (`tilecraft.jit(..., debug_nans=True)` or `TILECRAFT_DEBUG_NANS=1`, read in
jit.py), and nothing at all when off. What counts as produced, per operation and per element:
a NaN whose operands have no NaN (-inf - -inf, 0 * inf, 0 / 0, sqrt(-1)), or an inf whose
operands are all finite (1 / 0, exp2(200), 70000 stored as float16). NaN and inf that come in
through the inputs propagate unreported.

- Element-wise statements (stores, lets, T.fill's value) are checked before they run: only the
  elements the statement writes count (under the mask of enclosing `if`s, the taken side of
  T.if_then_else); the innermost producing sub-expression is reported with its operands' values.
- Tile ops are checked after they run, against their inputs read before: a copy element by
  element, a gemm element (i, j) against row i of A, column j of B and C, a reduction against
  its row, anything else against all of its inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (Atomic, BinOp, BufferRegion, BufferStore, Call, Cast, Copy, CumSum,
                          Expr, Fill, For, Gemm, LetStmt, Reduce, Select, TileOp, Var)
from tilecraft.ir.visitor import walk, walk_expr

from . import nan_report as report
from .ops.common import read
from .values import store_cast


def before(m, s) -> Callable[[], None] | None:
    """Check `s` before the machine runs it; returns a check to call after it ran, or None."""
    if isinstance(s, BufferStore):
        arr = m.buffers.get(s.buffer)
        if arr is not None and s.buffer.dtype.is_float:
            _check_expr(m, s.value, s.buffer, s.indices)
    elif isinstance(s, LetStmt):
        _check_expr(m, s.value, None, (), s.var)
    elif isinstance(s, TileOp) and m.mask is None and not m.par_axes:
        check = _TILE_CHECKS.get(type(s))
        if check is not None:
            return check(m, s)
    return None


def _bad(v: np.ndarray) -> np.ndarray:
    return ~np.isfinite(v) if v.dtype.kind in "fc" else np.zeros(v.shape, bool)


def _nan(v: np.ndarray) -> np.ndarray:
    return np.isnan(v) if v.dtype.kind in "fc" else np.zeros(v.shape, bool)


def made(out: np.ndarray, nan_in: np.ndarray, finite_in: np.ndarray) -> np.ndarray:
    """Where `out` is a NaN from operands without NaN, or an inf from finite operands."""
    if out.dtype.kind not in "fc":
        return np.zeros(out.shape, bool)
    return (np.isnan(out) & ~nan_in) | (np.isinf(out) & finite_in)


# ---- element-wise statements ---------------------------------------------------------------
def operands(e: Expr) -> tuple[Expr, ...]:
    """The operands an expression node computes its value from (a Select: both sides)."""
    if isinstance(e, BinOp) and e.op not in ("and", "or"):
        return (e.a, e.b)
    if isinstance(e, Call):
        return tuple(e.args)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.a, e.b)
    return ()


class _Nodes:
    """An expression's nodes evaluated at every element of the statement (broadcast to `grid`),
    and where each one is bad because something inside it produced a NaN or an inf."""

    def __init__(self, m, root: Expr, grid: tuple[int, ...], first: np.ndarray):
        self.m, self.grid = m, grid
        self.values: dict[int, np.ndarray] = {id(root): first}
        self.reach: dict[int, np.ndarray] = {}

    def value(self, e: Expr, lenient: int = 0) -> np.ndarray:
        v = self.values.get(id(e))
        if v is None:
            self.m.ev.lenient += lenient
            try:
                v = np.broadcast_to(np.asarray(self.m.ev.eval(e)), self.grid)
            finally:
                self.m.ev.lenient -= lenient
            self.values[id(e)] = v
        return v

    def reaches(self, e: Expr, lenient: int = 0) -> np.ndarray:
        """Where `e` is bad and a producing node lies on a bad path inside it (or is `e`)."""
        r = self.reach.get(id(e))
        if r is not None:
            return r
        v = self.value(e, lenient)
        ops = operands(e)
        if isinstance(e, Select):
            cond = np.broadcast_to(np.asarray(self.m.ev.eval(e.cond), bool), self.grid)
            inner = np.where(cond, self.reaches(e.a, lenient + 1), self.reaches(e.b, lenient + 1))
        elif ops:
            vals = [self.value(o, lenient) for o in ops]
            nan_in = np.logical_or.reduce([_nan(np.asarray(x)) for x in vals])
            fin_in = np.logical_and.reduce([~_bad(np.asarray(x)) for x in vals])
            inner = made(np.asarray(v), nan_in, fin_in)
            for o in ops:
                inner = inner | self.reaches(o, lenient)
        else:
            inner = np.zeros(self.grid, bool)
        r = _bad(np.asarray(v)) & inner
        self.reach[id(e)] = r
        return r

    def path(self, e: Expr, pos: tuple) -> list[Expr]:
        """Root-to-origin chain of nodes at element `pos`: the innermost producing node last."""
        chain = [e]
        while True:
            ops = operands(chain[-1])
            if isinstance(chain[-1], Select):
                cond = np.broadcast_to(np.asarray(self.m.ev.eval(chain[-1].cond)), self.grid)
                ops = (ops[0],) if bool(cond[pos]) else (ops[1],)
            nxt = next((o for o in ops if id(o) in self.reach and self.reach[id(o)][pos]), None)
            if nxt is None:
                return chain
            chain.append(nxt)


def _check_expr(m, value: Expr, buffer, indices, let_var: Var | None = None) -> None:
    """Raise TC404 if `value` (stored to `buffer` when given) makes a NaN or inf at an element
    the statement writes."""
    v = np.asarray(m.ev.eval(value))
    idx = [np.asarray(m.ev.eval(i)) for i in indices]
    stored = store_cast(buffer.dtype, v) if buffer is not None else v
    if not _bad(np.asarray(stored)).any():
        return
    loop_vars = [x for x in _vars(value, indices) if np.ndim(m.env.get(x)) > 0]
    shapes = [v.shape, *(i.shape for i in idx), *(np.shape(m.env[x]) for x in loop_vars)]
    if m.mask is not None:
        shapes.append(np.shape(m.mask))
    grid = np.broadcast_shapes(*shapes)
    sel = np.broadcast_to(m.mask if m.mask is not None else np.True_, grid)
    nodes = _Nodes(m, value, grid, np.broadcast_to(v, grid))
    stored = np.broadcast_to(stored, grid)
    overflow = _bad(stored) & ~_bad(nodes.value(value))
    hits = np.argwhere(sel & (nodes.reaches(value) | overflow))
    if not len(hits):
        return
    pos = tuple(int(p) for p in hits[0])
    at = {x: int(np.broadcast_to(m.env[x], grid)[pos]) for x in loop_vars}
    element = tuple(int(np.broadcast_to(i, grid)[pos]) for i in idx)
    where = report.where(m, at, let_var if let_var is not None else buffer, element)
    if overflow[pos]:
        raise report.store_overflow(buffer, float(nodes.value(value)[pos]), stored[pos], where)
    raise report.expression(m, nodes, nodes.path(value, pos), pos, where)


def _vars(value: Expr, indices) -> list[Var]:
    seen: dict[int, Var] = {}
    for root in (value, *indices):
        for e in walk_expr(root):
            if isinstance(e, Var):
                seen.setdefault(id(e), e)
    return list(seen.values())


# ---- tile ops --------------------------------------------------------------------------------
def _fill(m, op: Fill):
    _check_expr(m, op.value, None, ())
    v = np.asarray(m.ev.eval(op.value))
    stored = store_cast(op.dst.dtype, v)
    if _bad(np.asarray(stored)).any() and not _bad(v).any():
        where = report.where(m, {}, None, ())
        raise report.store_overflow(op.dst.buffer, float(v), stored, where)


def _copy(m, op: Copy):
    src = read(m, op.src, squeeze=False)

    def after():
        out = read(m, op.dst, squeeze=False)
        s, o = src.reshape(-1), out.reshape(-1)
        _first(m, op, op.dst, made(o, _nan(s), ~_bad(s)), lambda k: report.copy(op, s[k], o[k]))

    return after


def _gemm(m, op: Gemm):
    a, b = read(m, op.A).astype(np.float64), read(m, op.B).astype(np.float64)
    a, b = (a.T if op.transpose_A else a), (b.T if op.transpose_B else b)
    c = None if op.clear_accum else read(m, op.C)

    def after():
        out = read(m, op.C)
        nan_in = _nan(a).any(1)[:, None] | _nan(b).any(0)[None, :]
        fin_in = (~_bad(a)).all(1)[:, None] & (~_bad(b)).all(0)[None, :]
        if c is not None:
            nan_in, fin_in = nan_in | _nan(c), fin_in & ~_bad(c)
        where = made(out, nan_in, fin_in).reshape(-1)
        n = out.shape[1]
        _first(m, op, op.C, where, lambda k: report.gemm(
            op, k // n, k % n, a[k // n], b[:, k % n], None if c is None else c.reshape(-1)[k],
            out.reshape(-1)[k]))

    return after


def _reduce(m, op: Reduce):
    src = read(m, op.src, squeeze=False)
    old = None if op.clear else read(m, op.dst, squeeze=False)
    rows = np.moveaxis(src, op.dim, -1).reshape(-1, src.shape[op.dim])

    def after():
        out = read(m, op.dst, squeeze=False).reshape(-1)
        nan_in, fin_in = _nan(rows).any(1), (~_bad(rows)).all(1)
        if old is not None:
            o = old.reshape(-1)
            nan_in, fin_in = nan_in | _nan(o), fin_in & ~_bad(o)
        _first(m, op, op.dst, made(out, nan_in, fin_in), lambda k: report.reduce(
            op, rows[k], None if old is None else old.reshape(-1)[k], out[k]))

    return after


def _whole(m, op):
    """Any other tile op: an output element against all of the op's inputs."""
    ins = [read(m, r, squeeze=False) for r in op.reads() if isinstance(r, BufferRegion)]
    if isinstance(op, Atomic) and isinstance(op.src, Expr):
        ins.append(np.asarray(m.ev.eval(op.src)))
    nan_in = any(bool(_nan(x).any()) for x in ins)
    fin_in = all(not _bad(x).any() for x in ins)

    def after():
        (dst,) = op.writes()
        out = read(m, dst, squeeze=False).reshape(-1)
        _first(m, op, dst, made(out, np.bool_(nan_in), np.bool_(fin_in)),
               lambda k: report.whole(op, out[k]))

    return after


def _first(m, op, dst: BufferRegion, where: np.ndarray, explain) -> None:
    hits = np.flatnonzero(where)
    if not len(hits):
        return
    k = int(hits[0])
    element = report.region_element(m, dst, k)
    value, detail, hint = explain(k)
    raise TilecraftError("TC404", value=value, where=report.where(m, {}, dst.buffer, element),
                         detail=f"{report.op_name(op)}: {detail}", hint=hint)


_TILE_CHECKS: dict[type, Callable] = {
    Fill: _fill, Copy: _copy, Gemm: _gemm, Reduce: _reduce, CumSum: _whole, Atomic: _whole,
}


def loop_vars(m) -> list[Var]:
    """The serial/pipelined loop variables of the kernel (bound in `m.env` while they run)."""
    return [s.var for s in walk(m.func.body) if isinstance(s, For)]

