"""sink_stores: a `store_shared` of registers that a `load_global` filled moves below the
asynchronous copies issued after it (block program -> block program).

    load_global(S, out=s)                      load_global(S, out=s)
    store_shared(s, S_s)                       load_global(Z, out=z)
    load_global(Z, out=z)             ->       copy_async(X_s_p0, X, ...)
    store_shared(z, Z_s)                       copy_async_commit_group()
    copy_async(X_s_p0, X, ...)                 store_shared(s, S_s)
    copy_async_commit_group()                  store_shared(z, Z_s)
    synchronize()                              synchronize()

A thread's store of loaded registers waits for the load's data, a memory latency; what the
thread issues after the store waits behind it. Before a pipelined loop that is the prologue's
copies, so each block's first tiles were requested one or two latencies late (the quantized
matmul's scales and zero codes, benchmarks/NOTES.md, sessions 20-21). Sunk, the loads, then
the copies, go out at once and the stores wait for all of them together.

With TMA the prologue's copies come after the mbarriers' initialisation and a barrier, which
every thread reached only once its store had its data; the store passes that barrier too:

    load_global(S, out=s)                      load_global(S, out=s)
    store_shared(s, S_s)                       mbarrier_init(bars, 1)
    mbarrier_init(bars, 1)            ->       synchronize()
    synchronize()                              copy_async_bulk(X_s_p0, X, ..., barrier=bars[0])
    copy_async_bulk(X_s_p0, X, ..., ...)       store_shared(s, S_s)

Requires: a block program, before plan_arena and insert_barriers (the lifetimes see the stores
where they are, and the barriers that order them are placed after the move). A store moves
only within its statement list, only when its registers were filled by a `load_global`
earlier in that list, and only past instructions that neither touch its shared tensor
(through any slice of it, nor by a load in their offsets) nor write its registers: loads of
global memory, asynchronous copies (cp.async, TMA) and their commits, mbarrier
initialisations and announcements, shared slices, register allocations and fills, stores
into other shared tensors, and barriers. It never passes a wait, control flow or scalar code,
and it stops right after the last asynchronous copy of that run (with no copy in the run, it
stays where it is).

Guarantees: the same results. Nothing the store passes touches its tensor or its registers, so
the block-synchronous meaning is unchanged; insert_barriers then puts a barrier between the
store and the first access of its tensor by other threads, as for any store.
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir import BufferLoad, SeqStmt, Stmt
from tilecraft.ir.rewrite import replace_stmt
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .compute import Fill, View
from .instructions import AllocateRegister, AllocateShared, Instruction, Synchronize
from .mbarrier import CopyAsyncBulk, MbarrierExpect, MbarrierInit
from .program import BlockProgram
from .tensors import SharedTensor
from .transfer import CopyAsync, CopyAsyncCommitGroup, LoadGlobal, SharedSlice, StoreShared

#: what a store may move past (when it touches neither the store's tensor nor its registers)
_PASSABLE = (LoadGlobal, CopyAsync, CopyAsyncBulk, CopyAsyncCommitGroup, MbarrierInit,
             MbarrierExpect, SharedSlice, AllocateRegister, AllocateShared, Fill, StoreShared,
             Synchronize)
_ASYNC = (CopyAsync, CopyAsyncBulk)  # the issues worth moving a store below


def sink_stores(program: BlockProgram) -> BlockProgram:
    """`program` with its loaded stores below the asynchronous copies that follow them (module
    docstring)."""
    roots = _roots(program.body)
    body = program.body
    for seq in [s for s in walk(program.body) if isinstance(s, SeqStmt)]:
        stmts = _sink(list(seq.stmts), roots)
        if stmts is not None:
            body = replace_stmt(body, seq, SeqStmt(tuple(stmts), seq.span))
    return program if body is program.body else dataclasses.replace(program, body=body)


def _roots(body: Stmt) -> dict:
    """Buffer -> the buffer whose bits it names: a shared slice's tensor, a register view's
    source (absent: itself)."""
    roots: dict = {}
    for s in walk(body):
        if isinstance(s, (SharedSlice, View)):
            roots[s.out.buffer] = s.src.buffer

    def root(b):
        while b in roots:
            b = roots[b]
        return b
    return {b: root(b) for b in roots}


def _sink(stmts: list[Stmt], roots: dict) -> list[Stmt] | None:
    """The list with each sinkable store moved (None: nothing moved)."""
    loaded: set = set()  # register buffers a load_global of this list filled, unchanged since
    moved = False
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if isinstance(s, StoreShared) and roots.get(s.src.buffer, s.src.buffer) in loaded:
            to = _last_async(stmts, i, roots)
            if to is not None:
                stmts.insert(to, stmts.pop(i))
                moved = True
                continue  # stmts[i] is now the statement that followed the store
        elif isinstance(s, Instruction):
            written = {roots.get(t.buffer, t.buffer) for t in s.writes()}
            loaded = (loaded - written) | (written if isinstance(s, LoadGlobal) else set())
        else:
            loaded = set()  # (scalar code or control flow: what it writes is not followed)
        i += 1
    return stmts if moved else None


def _last_async(stmts: list[Stmt], i: int, roots: dict) -> int | None:
    """Where the store at `i` goes (its index after popping it): just past the last
    asynchronous copy of the run of statements it may pass, or None."""
    store = stmts[i]
    dst = roots.get(store.dst.buffer, store.dst.buffer)
    src = roots.get(store.src.buffer, store.src.buffer)
    last = None
    for j in range(i + 1, len(stmts)):
        s = stmts[j]
        if not isinstance(s, _PASSABLE) or _touches(s, dst, src, roots):
            break
        if isinstance(s, _ASYNC):
            last = j
    return last


def _touches(s: Instruction, dst, src, roots: dict) -> bool:
    """Whether `s` accesses shared tensor `dst` (its tiles, or a load in its offsets or other
    expressions) or writes register `src` (through any slice or view of them)."""
    for t in (*s.reads(), *s.writes()):
        if isinstance(t, SharedTensor) and roots.get(t.buffer, t.buffer) is dst:
            return True
    for e in stmt_exprs(s):
        if any(isinstance(x, BufferLoad) and roots.get(x.buffer, x.buffer) is dst
               for x in walk_expr(e)):
            return True
    return any(roots.get(t.buffer, t.buffer) is src for t in s.writes())
