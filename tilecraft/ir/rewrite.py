"""Rebuilding immutable IR: substitute variables, replace one statement.

The IR's nodes are frozen dataclasses; these helpers walk their fields generically, so a new
node kind needs no change here. Buffers are left alone (their shapes are not rewritten).

    body = substitute(loop.body, {loop.var: loop.start})   # a one-iteration loop's body
    new_root = replace_stmt(root, old_stmt, new_stmt)      # by identity, not equality
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .buffer import Buffer
from .expr import Expr, Var
from .simplify import simplify
from .stmt import Stmt


def substitute(node: Any, mapping: dict[Var, Expr]) -> Any:
    """`node` with every occurrence of a key of `mapping` replaced by its value; unchanged
    subtrees keep their identity (a node without a mapped variable is returned as is). Integer
    expressions that changed are simplified (`c * 64 + 64` with c = 0 becomes `64`)."""
    if not mapping:
        return node
    return _map(node, lambda n: mapping.get(n) if isinstance(n, Var) else None, _fold)


def _fold(e: Any) -> Any:
    if isinstance(e, Expr) and not e.dtype.is_float:
        return simplify(e)
    return e


def map_exprs(node: Any, fn) -> Any:
    """`node` with every expression `e` for which `fn(e)` is not None replaced by it (outermost
    first; a replacement is not visited again)."""
    return _map(node, lambda n: fn(n) if isinstance(n, Expr) else None)


def replace_stmt(root: Stmt, old: Stmt, new: Stmt) -> Stmt:
    """`root` with the statement that *is* `old` (identity) replaced by `new`."""
    return _map(root, lambda n: new if n is old else None)


def _map(node: Any, visit, rebuilt=lambda n: n) -> Any:
    hit = visit(node)
    if hit is not None:
        return hit
    if isinstance(node, tuple):
        items = tuple(_map(x, visit, rebuilt) for x in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    if isinstance(node, Buffer) or not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    if not isinstance(node, (Expr, Stmt)) and not _holds_ir(node):
        return node
    changes = {}
    for f in dataclasses.fields(node):
        if not f.init:
            continue
        old = getattr(node, f.name)
        new = _map(old, visit, rebuilt)
        if new is not old:
            changes[f.name] = new
    return rebuilt(dataclasses.replace(node, **changes)) if changes else node


def _holds_ir(node: Any) -> bool:
    """Dataclasses other than Expr/Stmt (BufferRegion, PipelineInfo, ...) are rebuilt only when
    a field may hold IR."""
    return any(isinstance(getattr(node, f.name), (Expr, Stmt, tuple))
               for f in dataclasses.fields(node))
