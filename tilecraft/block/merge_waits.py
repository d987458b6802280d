"""merge_waits: asynchronous copies issued one after another are waited for once (block program
-> block program).

Lowering makes each global -> shared T.copy outside a multi-stage pipeline an asynchronous copy
complete at once (passes/lowering/copy.py), so a kernel's copies of a row and its weights each
waited for the one before it had landed:

    copy_async(X_s, X, ...)                    copy_async(X_s, X, ...)
    copy_async_commit_group()                  copy_async_commit_group()
    copy_async_wait_group(0)         ->        copy_async(w_s, W, ...)
    copy_async(w_s, W, ...)                    copy_async_commit_group()
    copy_async_commit_group()                  copy_async_wait_group(0)
    copy_async_wait_group(0)

A `copy_async_wait_group(0)` is dropped when everything after it in its statement list, up to
the next `copy_async_wait_group(0)` there, is an asynchronous copy, a commit or an allocation,
none of them reads memory in an expression (an offset, an initial value), and no copy among
them writes a tile that a copy before them in that list also writes (their bytes could land in
either order). Nothing between then reads
what the dropped wait landed, and the later wait lands it.

Requires: a block program. Guarantees: the same results (the block VM lands a copy at the wait
that covers it; nothing reads its tile before that wait).
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir import BufferLoad, For, If, SeqStmt, Stmt, While
from tilecraft.ir.visitor import stmt_exprs, walk_expr

from .instructions import AllocateRegister, AllocateShared
from .program import BlockProgram
from .transfer import CopyAsync, CopyAsyncCommitGroup, CopyAsyncWaitGroup

_BETWEEN = (CopyAsync, CopyAsyncCommitGroup, AllocateShared, AllocateRegister)


def merge_waits(program: BlockProgram) -> BlockProgram:
    """`program` with the waits the module doc describes dropped."""
    return dataclasses.replace(program, body=_merge(program.body))


def _merge(s: Stmt) -> Stmt:
    if isinstance(s, SeqStmt):
        stmts = [_merge(x) for x in s.stmts]
        return dataclasses.replace(s, stmts=tuple(x for i, x in enumerate(stmts)
                                                  if not _redundant(stmts, i)))
    if isinstance(s, (For, While)):
        return dataclasses.replace(s, body=_merge(s.body))
    if isinstance(s, If):
        other = None if s.else_body is None else _merge(s.else_body)
        return dataclasses.replace(s, then_body=_merge(s.then_body), else_body=other)
    return s


def _is_wait_all(s: Stmt) -> bool:
    return isinstance(s, CopyAsyncWaitGroup) and s.n == 0


def _redundant(stmts: list, i: int) -> bool:
    """stmts[i] is a wait for all copies that the next such wait in `stmts` may stand for."""
    if not _is_wait_all(stmts[i]):
        return False
    before = {x.dst.buffer for x in stmts[:i] if isinstance(x, CopyAsync)}
    j = i + 1
    while j < len(stmts) and not _is_wait_all(stmts[j]):
        x = stmts[j]
        if not isinstance(x, _BETWEEN):
            return False
        if any(isinstance(e, BufferLoad) for ex in stmt_exprs(x) for e in walk_expr(ex)):
            return False  # (an offset or an initial value reading memory)
        if isinstance(x, CopyAsync):
            if x.dst.buffer in before:
                return False
            before.add(x.dst.buffer)
        j += 1
    return j < len(stmts) and j > i + 1
