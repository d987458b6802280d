"""Lowering of tile ops on `T.alloc_local` arrays and `T.alloc_var` scalars: scalar code.

A local array is private to each thread (every thread holds the whole array), so a tile op on one
is scalar code every thread runs, element by element, in an unrolled loop (constant indices keep
the array in registers); stores to shared/global memory there follow the block-level rule (thread
0's, unless they depend on the thread: codegen/block_cuda/scalar.py). The interpreter's meaning
is kept exactly: region elements pair in row-major order, reads outside a buffer give 0, writes
outside it are dropped, cumsum adds in float64 (int64 for integers) and rounds once through
float32 for narrower float outputs.

    T.copy(A[0, 0], L)       ->  for c in unrolled(32): L[c // 8, c % 8] = cast(A[c // 8, c % 8])
    T.fill(L, 1.0)           ->  v = 1.0; for c in unrolled(32): L[c // 8, c % 8] = v
    T.cumsum(L, dim=1)       ->  for c in unrolled(4): a0 = L[c, 0]; L[c, 0] = a0;
                                     a1 = a0 + L[c, 1]; L[c, 1] = a1; ...
    T.copy(L, F)  (fragment) ->  for i, j in parallel(4, 8, layout=F's): F[i, j] = L[i, j]

T.copy from a fragment to a local array is TC502 (each thread holds only part of the fragment).
"""

from __future__ import annotations

import math

from tilecraft import dtypes as dt
from tilecraft.block.parallel import ParallelCompute
from tilecraft.ir import (
    BufferLoad,
    BufferRegion,
    BufferStore,
    Const,
    Copy,
    CumSum,
    Fill,
    For,
    If,
    LetStmt,
    SeqStmt,
    Stmt,
    TileOp,
    Var,
)
from tilecraft.ir.expr import BinOp, Compare, Expr, Select, cast, const_int

from .context import LowerContext, not_lowered

_PRIVATE = ("local", "var")


def on_local(op: TileOp) -> bool:
    """A copy, fill or cumsum with a local array or var among its operands."""
    return isinstance(op, (Copy, Fill, CumSum)) and any(
        r.buffer.scope in _PRIVATE for r in op.reads() + op.writes())


def lower_local(cx: LowerContext, op: TileOp) -> list[Stmt]:
    """The scalar code (or `parallel` for a fragment destination) that means `op`."""
    regions = op.reads() + op.writes()
    for r in regions:
        if not all(isinstance(e, int) for e in r.extents):
            raise not_lowered(op.span, f"a region of `{r.buffer.name}` with a dynamic extent")
        if r.buffer in cx.staged:
            raise not_lowered(op.span, f"the pipelined tile `{r.buffer.name}` with a local array")
    if isinstance(op, Fill):
        return _fill(op)
    if isinstance(op, CumSum):
        return _cumsum(op)
    if op.src.buffer.scope == "fragment":
        raise not_lowered(op.span, "T.copy from a fragment to a local array (each thread holds "
                          "only part of the fragment)", hint="copy the fragment to shared "
                          "memory, then shared -> local")
    if math.prod(op.src.extents) != math.prod(op.dst.extents):
        raise not_lowered(op.span, f"T.copy of {list(op.src.extents)} elements into "
                          f"{list(op.dst.extents)}")
    if op.dst.buffer.scope == "fragment":
        return _to_fragment(cx, op)
    n = math.prod(op.dst.extents)
    c = Var.create("c") if n > 1 else Const.create(0)
    value = _read(op.src, _unravel(op.src, c))
    return [_loop(c, n, _write(op.dst, _unravel(op.dst, c), value, op), op)]


def _loop(var: Expr, n: int, body: Stmt, op) -> Stmt:
    """`body` for var = 0 .. n - 1, unrolled (once, var the constant 0, when n is 1)."""
    if not isinstance(var, Var):
        return body
    return For(var, Const.create(0), Const.create(n), "unrolled", body, span=op.span)


def _unravel(r: BufferRegion, flat: Expr) -> list[Expr]:
    """The buffer indices of element `flat` (row-major over the region's extents)."""
    idx, stride = [], math.prod(r.extents)
    for start, n in zip(r.starts, r.extents):
        stride //= n
        k = Const.create(0) if n == 1 else flat // stride % n if stride > 1 else flat % n
        idx.append(start if n == 1 else start + k)
    return idx


def _inside(r: BufferRegion, idx: list[Expr]) -> Expr | None:
    """The condition that `idx` lies inside r's buffer; None when it does for sure (constant
    starts and a region inside the buffer)."""
    conds = []
    for i, start, n, size in zip(idx, r.starts, r.extents, r.buffer.shape):
        s = const_int(start)
        if s is not None and isinstance(size, int) and 0 <= s and s + n <= size:
            continue
        conds += [Compare.create(">=", i, 0), Compare.create("<", i, size)]
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = BinOp.create("and", out, c)
    return out


def _read(r: BufferRegion, idx: list[Expr]) -> Expr:
    """r's element at `idx`; 0 outside the buffer (the interpreter's tile read)."""
    load = BufferLoad.create(r.buffer, tuple(idx))
    ok = _inside(r, idx)
    return load if ok is None else Select.create(ok, load, cast(r.buffer.dtype, 0))


def _write(r: BufferRegion, idx: list[Expr], value: Expr, op) -> Stmt:
    """r's element at `idx` <- value; dropped outside the buffer."""
    store = BufferStore(r.buffer, tuple(idx), cast(r.buffer.dtype, value), span=op.span)
    ok = _inside(r, idx)
    return store if ok is None else If(ok, store, None, span=op.span)


def _fill(op: Fill) -> list[Stmt]:
    n = math.prod(op.dst.extents)
    if n == 1:
        return [_write(op.dst, _unravel(op.dst, Const.create(0)), op.value, op)]
    v = Var.create("fill_value", op.value.dtype)
    c = Var.create("c")
    body = _write(op.dst, _unravel(op.dst, c), v, op)
    return [LetStmt(v, op.value, span=op.span), _loop(c, n, body, op)]


def _cumsum(op: CumSum) -> list[Stmt]:
    src, dst = op.src, op.dst
    if tuple(src.extents) != tuple(dst.extents):
        raise not_lowered(op.span, "T.cumsum over regions of different shapes")
    if src.buffer is dst.buffer and (tuple(src.starts) != tuple(dst.starts)):
        raise not_lowered(op.span, "T.cumsum between overlapping regions of one buffer")
    wide = dt.resolve("int64" if src.dtype.is_integer else "float64")
    narrow = dst.dtype.is_float and dst.dtype.name != "float64"
    n = src.extents[op.dim]
    rest = [e for d, e in enumerate(src.extents) if d != op.dim]
    row = Var.create("row") if math.prod(rest) > 1 else Const.create(0)
    body: list[Stmt] = []
    acc = None
    for step in range(n):
        k = n - 1 - step if op.reverse else step
        coords, flat = [], row  # the row's coordinates (row-major over the other dims)
        stride = math.prod(rest)
        for d, e in enumerate(src.extents):
            if d == op.dim:
                coords.append(Const.create(k))
                continue
            stride //= e
            coords.append(Const.create(0) if e == 1 else flat // stride % e if stride > 1
                          else flat % e)
        x = cast(wide, _read(src, [s + c for s, c in zip(src.starts, coords)]))
        a = Var.create(f"scan{step}", wide)
        body.append(LetStmt(a, x if acc is None else acc + x, span=op.span))
        acc = a
        out = cast(dt.resolve("float32"), a) if narrow else a
        body.append(_write(dst, [s + c for s, c in zip(dst.starts, coords)], out, op))
    return [_loop(row, math.prod(rest), SeqStmt.create(body), op)]


def _to_fragment(cx: LowerContext, op: Copy) -> list[Stmt]:
    """Each thread reads the elements of the fragment it holds from its own copy of the array."""
    reg = cx.whole_fragment(op.dst, op.span)
    vars_ = [Var.create(f"i{d}") for d in range(reg.ndim)]
    flat: Expr = Const.create(0)
    for v, n in zip(vars_, reg.shape):
        flat = flat * n + v
    value = _read(op.src, _unravel(op.src, flat))
    body = BufferStore(op.dst.buffer, tuple(vars_), cast(op.dst.dtype, value), span=op.span)
    return [ParallelCompute.create(vars_, reg.layout, body, [reg], span=op.span)]


__all__ = ["lower_local", "on_local"]
