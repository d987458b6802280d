"""Copies that need not run: a global -> shared T.copy whose destination still holds that tile.

The seed softmax and RMSNorm read each row twice (a statistics pass, then a normalising pass).
With a whole row per chunk, each T.Pipelined loop runs once and the second pass's copy brings
the very tile the first one left in shared memory: it is skipped, and the kernel reads global
memory once.

    for c in T.Pipelined(1, 2): T.copy(X[bm * 4, c * 4096], X_s) ...   copies X's tile
    for c in T.Pipelined(1, 2): T.copy(X[bm * 4, c * 4096], X_s) ...   skipped: X_s holds it

Why it means the same as running it (the interpreter does):
- the key of a copy is its source tensor, its start indices with every one-iteration loop's
  variable replaced by the loop's start (only block indices may remain), its extents and its
  destination; the destination is the whole shared buffer;
- the source tensor is stored to nowhere in the kernel (no block changes it), and nothing stores
  to any global tensor between the two copies (a parameter may alias the source: an in-place
  call passes one tensor twice);
- walking the program in order, anything that writes the destination forgets it; a loop that
  may run other than once forgets, before and after it, what its body writes; an `if` forgets
  what either branch writes; statements of other kinds (`T.call_extern`) forget everything;
- pipeline producers are neither recorded nor skipped (their stages rotate);
- the shared-memory plan (block/smem_plan.py) keeps the destination alive from the first copy
  to its last read (the copy that is skipped is no longer an access), so no other tensor takes
  its bytes in between.

Used by lowering (passes/lowering/copy.py: a reused copy lowers to nothing).
"""

from __future__ import annotations

from tilecraft.ir import (
    Allocate,
    BufferStore,
    Copy,
    For,
    If,
    KernelLaunch,
    LetStmt,
    ParallelLoop,
    SeqStmt,
    TileOp,
    Var,
    While,
)
from tilecraft.ir.expr import const_int
from tilecraft.ir.simplify import linear_form
from tilecraft.ir.stmt import Break
from tilecraft.ir.visitor import walk


def reused_copies(state) -> frozenset[int]:
    """ids of the Copy ops whose destination already holds their tile (see the module doc)."""
    kernel = state.kernel
    written = {b for s in walk(kernel) for b in _writes(s)}
    producers = {id(p) for plan in state.pipelines.values() for p in plan.producers}
    skip: set[int] = set()

    def key(op: Copy, subst: dict):
        src, dst = op.src, op.dst
        if (src.buffer.scope != "global" or dst.buffer.scope != "shared" or id(op) in producers
                or src.buffer in written or not dst.is_full()
                or not all(isinstance(e, int) for e in src.extents)):
            return None
        starts = []
        for e in src.starts:
            form = linear_form(e)
            if form is None:
                return None
            terms, const = {}, form[1]
            for atom, c in form[0].items():
                if atom in subst:
                    const += c * subst[atom]
                elif isinstance(atom, Var) and atom in kernel.block_vars:
                    terms[atom] = c
                else:
                    return None
            starts.append((frozenset(terms.items()), const))
        return src.buffer, tuple(starts), tuple(src.extents), dst.buffer

    def forget(holds: dict, s) -> None:
        for x in walk(s):
            if not isinstance(x, (SeqStmt, For, If, While, LetStmt, Allocate, BufferStore,
                                  ParallelLoop, TileOp, KernelLaunch, Break)):
                holds.clear()
                return
            for b in _writes(x):
                if b.scope == "global":  # may alias a recorded source
                    holds.clear()
                    return
                holds.pop(b, None)

    def run(s, holds: dict, subst: dict) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                run(x, holds, subst)
        elif isinstance(s, KernelLaunch):
            run(s.body, holds, subst)
        elif isinstance(s, For) and _runs_once(s):
            run(s.body, holds, {**subst, s.var: const_int(s.start)})
        elif isinstance(s, (For, While)):
            forget(holds, s.body)
            run(s.body, dict(holds), subst)
            forget(holds, s.body)
        elif isinstance(s, If):
            for branch in (s.then_body, s.else_body):
                if branch is not None:
                    run(branch, dict(holds), subst)
                    forget(holds, branch)
        elif isinstance(s, Copy):
            k = key(s, subst)
            if k is not None and holds.get(s.dst.buffer) == k:
                skip.add(id(s))
                return
            forget(holds, s)
            if k is not None:
                holds[s.dst.buffer] = k
        else:
            forget(holds, s)

    run(kernel, {}, {})
    return frozenset(skip)


def _runs_once(loop: For) -> bool:
    return (const_int(loop.extent) == 1 and const_int(loop.start) is not None
            and not any(isinstance(x, Break) for x in walk(loop.body)))


def _writes(s) -> list:
    if isinstance(s, BufferStore):
        return [s.buffer]
    if isinstance(s, TileOp):
        return [r.buffer for r in s.writes() if hasattr(r, "buffer")]
    return []
