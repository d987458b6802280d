"""plan_pipeline: decide how each `T.Pipelined(n, num_stages=S)` loop is software-pipelined.

Requires: `legal`.  Guarantees (`pipelines`): for every pipelined loop with S >= 2, a
PipelinePlan listing its *producers* — the global->shared copies of the loop body whose source
depends only on the loop variable and values defined outside the loop (or lets of the body's top
level computed from those) — and the shared buffers
they fill, which get S stages. Everything else in the body is a consumer. Codegen then issues
the producers of iteration k + S - 1 (cp.async, one commit group per iteration) while the
consumers of iteration k run (Multistage schedule, as in CUTLASS / TileLang's pipeline).
Loops with S < 2, or without a qualifying copy, run as plain loops with barriers. A buffer
that is also used outside the loop is not staged (after the loop it would hold a rotated stage),
nor a copy from a global tensor the body stores to (the prefetch would read it too early).

    for ko in T.Pipelined(K // 32, num_stages=3):      plan: producers = (copy A, copy B)
        T.copy(A[by*128, ko*32], A_s)                        buffers   = (A_s, B_s), stages 3
        T.copy(B[ko*32, bx*128], B_s)
        T.gemm(A_s, B_s, C_f)
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (
    Atomic,
    BufferLoad,
    BufferStore,
    Call,
    Copy,
    Evaluate,
    For,
    LetStmt,
    TileOp,
    Var,
)
from tilecraft.ir.visitor import region_exprs, stmt_children, stmt_exprs, walk, walk_expr

from .context import KernelState, PipelinePlan


def _defined_inside(loop: For) -> set[Var]:
    out: set[Var] = {loop.var}
    for s in walk(loop.body):
        if isinstance(s, (LetStmt, For)):
            out.add(s.var)
    return out


def _pure_lets(loop: For, inner: set[Var]) -> set[Var]:
    """The body's top-level lets whose values use only the loop variable, values defined
    outside the loop and earlier such lets (`kk = bs * n + ko`): a copy may use them (the
    block-level pass inlines them into its offsets, passes/pipeline_copies.py)."""
    pure: set[Var] = set()
    for s in _top_level(loop.body):
        if isinstance(s, LetStmt) and all(
                x not in inner or x == loop.var or x in pure
                for x in walk_expr(s.value) if isinstance(x, Var)):
            pure.add(s.var)
    return pure


def _depends_only_on_outside(copy: Copy, inner: set[Var], loop_var: Var) -> bool:
    for e in region_exprs(copy.src):
        for x in walk_expr(e):
            if isinstance(x, Var) and x in inner and x != loop_var:
                return False
    return True


def _buffers_used_outside(root, loop: For) -> set:
    """Buffers that statements outside `loop` read or write (a stage rotates inside the loop,
    so a buffer also used after it would see the wrong stage)."""
    used: set = set()
    stack = [root]
    while stack:
        s = stack.pop()
        if s is loop:
            continue
        if isinstance(s, TileOp):
            used.update(r.buffer for r in (*s.reads(), *s.writes()))
        if isinstance(s, BufferStore):
            used.add(s.buffer)
        for e in stmt_exprs(s):
            used.update(x.buffer for x in walk_expr(e) if isinstance(x, BufferLoad))
        stack.extend(stmt_children(s))
    return used


def _globals_written(body) -> set:
    """Global tensors the loop body stores to (element stores, tile ops, atomics): a copy from
    one is not prefetched, since iteration k + S - 1's read would run before iteration k's store
    (the interpreter runs the iterations in order)."""
    out = set()
    for s in walk(body):
        if isinstance(s, BufferStore):
            out.add(s.buffer)
        out.update(r.buffer for r in getattr(s, "writes", lambda: ())())
    return {b for b in out if b.scope == "global"}


def _top_level(body) -> list:
    from tilecraft.ir import SeqStmt

    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def plan_pipeline(state: KernelState) -> None:
    for loop in walk(state.kernel.body):
        if not (isinstance(loop, For) and loop.kind == "pipelined" and loop.pipeline):
            continue
        info = loop.pipeline
        if info.order is not None or info.stage is not None or info.group is not None:
            raise TilecraftError("TC502", span=loop.span, detail="T.Pipelined with explicit "
                                 "order/stage/group", hint="use num_stages only for now")
        stages = info.num_stages
        if stages < 2:
            continue
        for a in walk(loop.body):  # (its copies for later iterations would go ahead of it)
            if isinstance(a, Evaluate) and isinstance(a.value, Call) and \
                    a.value.op == "cluster_sync":
                raise TilecraftError("TC502", span=a.span, detail="T.cluster_sync inside "
                                     "T.Pipelined, which issues later iterations' copies ahead "
                                     "of it", hint="loop with T.serial around it")
            if isinstance(a, Atomic) and a.order in ("acquire", "acq_rel", "seq_cst"):
                raise TilecraftError(
                    "TC502", span=a.span, detail=f"T.atomic_{a.kind} with memory_order "
                    f"{a.order!r} inside T.Pipelined, which issues later iterations' copies "
                    "ahead of it", hint="loop with T.serial, or order the atomic outside the "
                    "pipelined loop")
        inner = _defined_inside(loop)
        inner -= _pure_lets(loop, inner)
        producers, buffers = [], []
        written_elsewhere = set()
        top = {id(t) for t in _top_level(loop.body)}
        for s in walk(loop.body):
            if isinstance(s, Copy) and s.dst.buffer.scope == "shared" \
                    and s.src.buffer.scope == "global" and id(s) in top \
                    and s.dst.is_full() and s.src.dtype == s.dst.dtype \
                    and _depends_only_on_outside(s, inner, loop.var):
                producers.append(s)
                buffers.append(s.dst.buffer)
            else:
                for r in getattr(s, "writes", lambda: ())():
                    written_elsewhere.add(r.buffer)
        outside = _buffers_used_outside(state.kernel.body, loop)
        stored = _globals_written(loop.body)
        keep = [(p, b) for p, b in zip(producers, buffers)
                if b not in written_elsewhere and buffers.count(b) == 1 and b not in outside
                and p.src.buffer not in stored]
        if not keep:
            continue
        state.pipelines[loop] = PipelinePlan(
            loop=loop, num_stages=stages, producers=tuple(p for p, _ in keep),
            buffers=tuple(b for _, b in keep))
