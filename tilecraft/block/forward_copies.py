"""forward_copies: a shared tile that an asynchronous copy fills and that only loads read back,
each into the same threads' same registers, is loaded from global memory into those registers
instead (block program -> block program).

The whole-row kernels copy a row and its weights into shared memory and every thread then
reads back its own elements (the seed RMSNorm: X and gamma, 16 fp16 a thread on 1024 threads):

    copy_async(X_s, X, [bm, 0])                X_f = allocate_register(<the loads' layout>)
    copy_async_commit_group()          ->      load_global(X, [bm, 0], out=X_f)
    copy_async_wait_group(0)                   ...
    ...                                        view(X_f, out=x1)
    load_shared(X_s, [0, 0], out=x1)           ...
    ...                                        view(X_f, out=x2)
    load_shared(X_s, [0, 0], out=x2)           (X_s gone)

Shared memory taken from an SM is L1 taken from its loads; the registers held instead are few.
So a program is rewritten only when the tiles forwarded take more than `MIN_SHARED` bytes and
their registers at most `MAX_REGISTERS` a thread (RMSNorm+SiLU over 16384-wide rows on 1024
threads: 64 KB of tiles a block, 16 registers; 80 -> 86% of copy speed on the H200, while at
4096-wide rows, 16 KB, forwarding cost a point: benchmarks/NOTES.md, session 22).

A tile S qualifies when
- one instruction writes it: a `copy_async` directly followed, in its statement list, by a
  commit and a `copy_async_wait_group(0)`;
- every other access is a `load_shared` of the whole of S (zero offsets, the same shape and
  dtype) later in that list, all with the element of S each (thread, register) holds equal to
  the first's; nothing reads S in an offset or in scalar code, and nothing slices it.
Then the copy and its commit and wait become a `load_global` into a new register tensor in the
first load's layout, each load a `view` of it, and S's allocation goes.

Requires: a block program, before merge_waits (each copy still has its own wait), plan_arena
and insert_barriers. Guarantees: the same results: the load reads global memory where the copy
did, and each view holds the values the load of S would have read.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tilecraft.ir import BufferLoad, For, If, SeqStmt, Stmt, While
from tilecraft.ir.expr import const_int
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .compute import View
from .instructions import AllocateRegister, AllocateShared, Instruction
from .program import BlockProgram
from .tensors import RegisterTensor, SharedTensor
from .transfer import (
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    LoadGlobal,
    LoadShared,
    SharedSlice,
)

MIN_SHARED = 32 * 1024  # bytes of shared tiles forwarded, at least (more than)
MAX_REGISTERS = 16  # 32-bit registers a thread the forwarded tiles take, at most


def forward_copies(program: BlockProgram) -> BlockProgram:
    """`program` with the tiles the module doc describes forwarded, or unchanged."""
    found = {}
    _find(program.body, found)
    tiles = [t for t in found.values() if t is not None and _only_loads(program.body, t)]
    words = sum(-(-t.loads[0].out.layout.local_size * t.tile.dtype.bits // 32) for t in tiles)
    size = sum(_nbytes(t.tile) for t in tiles)
    if not tiles or size <= MIN_SHARED or words > MAX_REGISTERS:
        return program
    return dataclasses.replace(program, body=_rewrite(program.body, {t.tile.buffer: t
                                                                     for t in tiles}))


@dataclasses.dataclass
class _Tile:
    tile: SharedTensor
    copy: CopyAsync
    loads: list  # its load_shared instructions, in order
    regs: RegisterTensor | None = None  # what the copy loads into (made by _rewrite)


def _find(s: Stmt, found: dict) -> None:
    """For each tile a copy_async writes: its _Tile when the copy and its loads sit as the
    module doc asks in one statement list, else None."""
    if isinstance(s, SeqStmt):
        stmts = s.stmts
        for i, x in enumerate(stmts):
            if isinstance(x, CopyAsync):
                b = x.dst.buffer
                ok = b not in found and _waited(stmts, i)
                loads = [y for y in stmts[i + 3:] if isinstance(y, LoadShared)
                         and y.src.buffer is b] if ok else []
                found[b] = _Tile(x.dst, x, loads) if loads and _whole(x.dst, loads) else None
        for x in stmts:
            if not isinstance(x, CopyAsync):
                _find(x, found)
    elif isinstance(s, (For, While)):
        _find(s.body, found)
    elif isinstance(s, If):
        _find(s.then_body, found)
        if s.else_body is not None:
            _find(s.else_body, found)
    elif isinstance(s, CopyAsync):  # (not in a list: not forwarded)
        found[s.dst.buffer] = None


def _waited(stmts, i: int) -> bool:
    return i + 2 < len(stmts) and isinstance(stmts[i + 1], CopyAsyncCommitGroup) and \
        isinstance(stmts[i + 2], CopyAsyncWaitGroup) and stmts[i + 2].n == 0


def _whole(tile: SharedTensor, loads: list) -> bool:
    """Every load reads all of `tile` in its own shape and dtype, each thread the elements the
    first load's thread holds, in the same registers."""
    first = loads[0].out.layout.index_table()
    for ld in loads:
        if tuple(ld.out.shape) != tuple(tile.shape) or ld.out.dtype != tile.dtype or \
                any(const_int(e) != 0 for e in ld.offset) or \
                list(ld.dims) != list(range(tile.ndim)):
            return False
        if not np.array_equal(ld.out.layout.index_table(), first):
            return False
    return True


def _only_loads(body: Stmt, t: _Tile) -> bool:
    """Nothing but t's copy, its loads and its allocation touches t's tile."""
    b, allowed = t.tile.buffer, {id(t.copy), *(id(ld) for ld in t.loads)}
    for s in walk(body):
        if any(isinstance(x, BufferLoad) and x.buffer is b for e in stmt_exprs(s)
               for x in walk_expr(e)):
            return False
        if isinstance(s, SharedSlice) and s.src.buffer is b:
            return False
        if isinstance(s, Instruction) and not isinstance(s, AllocateShared) and \
                id(s) not in allowed and any(getattr(x, "buffer", None) is b
                                             for x in (*s.reads(), *s.writes())):
            return False
    return True


def _nbytes(t: SharedTensor) -> int:
    return t.layout.cosize * t.dtype.bits // 8


def _rewrite(s: Stmt, tiles: dict) -> Stmt:
    if isinstance(s, SeqStmt):
        out, skip = [], 0
        for x in s.stmts:
            if skip:
                skip -= 1
                continue
            if isinstance(x, CopyAsync) and x.dst.buffer in tiles:
                t = tiles[x.dst.buffer]
                t.regs = RegisterTensor.create(f"{t.tile.name}_f", t.tile.dtype,
                                               t.loads[0].out.layout, span=x.span)
                out += [AllocateRegister.create(t.regs, span=x.span),
                        LoadGlobal.create(x.src, t.regs, offset=x.offset, dims=x.dims,
                                          span=x.span)]
                skip = 2  # (its commit and wait)
            elif isinstance(x, LoadShared) and x.src.buffer in tiles:
                out.append(View.create(tiles[x.src.buffer].regs, x.out, span=x.span))
            elif isinstance(x, AllocateShared) and x.out.buffer in tiles:
                continue
            else:
                out.append(_rewrite(x, tiles))
        return dataclasses.replace(s, stmts=tuple(out))
    if isinstance(s, (For, While)):
        return dataclasses.replace(s, body=_rewrite(s.body, tiles))
    if isinstance(s, If):
        other = None if s.else_body is None else _rewrite(s.else_body, tiles)
        return dataclasses.replace(s, then_body=_rewrite(s.then_body, tiles), else_body=other)
    return s
