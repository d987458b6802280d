"""Warp specialization of a wgmma mainloop (called by pipeline_copies; docs/warp_specialization.md).

Requires: a T.Pipelined loop at the top of the kernel's body that pipeline_copies turns into
the TMA form with its lone asynchronous dot (full and empty mbarriers), on sm_90a, in a kernel
of whole warpgroups with no `exit`, whose top-level lets read no memory, and no other top-level
pipelined loop; and where the split measured faster (`worth_splitting`). Guarantees: the loop's copies move to a producer warpgroup of 128 more threads
(block/roles.py), which fills each stage as soon as the consumers release it (S iterations ahead
instead of S - 2); the consumers (the block's threads) only wait, compute and release; every
statement of the body except the lets, the shared allocations and `T.use_swizzle` moves into the
consumer role, after which nothing follows the split:

    <lets, shared allocations>                 <lets, shared allocations>
    full = ...; empty = ...                    full = ...; empty = ...
    <register work>                            warp_roles(...):
    <prologue: the first S - 2 stages>           producer:
    for ko in range(n):                            for ko in range(n):
        mbarrier_wait(full, ...)                       if ko >= S: mbarrier_wait(empty, ko % S,
        <refill of ko + S - 2>                                         (ko // S - 1) % 2, issuer)
        <body>; dot_shared(...); wait(1)               <expect, copies of ko into stage ko % S>
        if ko >= 1: arrive(empty, ...)           consumer:
    dot_wait_group(0)                              <register work>
    <epilogue>                                     for ko in range(n): <wait full, body, dot,
                                                                        wait(1), arrive>
                                                   dot_wait_group(0); <epilogue>
"""

from __future__ import annotations

from collections.abc import Callable

from tilecraft.block import AllocateShared, Exit, MbarrierInit, MbarrierWait, RegisterTensor
from tilecraft.block.roles import WarpRoles
from tilecraft.ir import BufferLoad, For, LetStmt, SeqStmt, Stmt, UseSwizzle
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import walk, walk_expr

#: threads of the producer role (one warpgroup)
PRODUCER_THREADS = 128


def top_statements(body: Stmt) -> tuple[Stmt, ...]:
    return body.stmts if isinstance(body, SeqStmt) else (body,)


def can_split(body: Stmt, num_threads: int) -> bool:
    """The kernel may take the split (the module's requirements besides the loop's own)."""
    top = top_statements(body)
    if num_threads % 128 or any(isinstance(s, Exit) for s in walk(body)):
        return False
    if sum(isinstance(s, For) and s.kind == "pipelined" for s in top) != 1:
        return False
    return all(not any(isinstance(x, BufferLoad) for x in walk_expr(s.value))
               for s in top if isinstance(s, LetStmt))


def worth_splitting(dot, stages: int) -> bool:
    """Whether the split measured faster than the plain pipeline (H200, 8192^3 and 4096^3 f16
    GEMM, benchmarks/NOTES.md "Session 16"): yes for tiles under 128 x 256 (128 x 128 on 128 or
    256 threads, 3-5 stages: +6-9%) and for 3 stages (the plain loop's copies run one iteration
    ahead: 128 x 256 +14%); no for 128 x 256 and 256 x 128 on 4 stages (-3-4%), nor where the
    body makes the dot's A in registers (the quantized matmul: -3% to +1%; its producer would
    have to dequantize: docs/warp_specialization.md)."""
    if isinstance(dot.a, RegisterTensor):
        return False
    m, n, _ = dot.mnk
    return stages == 3 or m * n < 128 * 256


def specialized(loop: For, S: int, empty, issue: Callable, guarded: Callable,
                consumer: Stmt, after: list[Stmt], num_threads: int) -> list[Stmt]:
    """The split of `loop`: the producer issues, iteration by iteration, the copies of
    `issue(k, stage, tag)` (iteration start + k into `stage`: its expect and bulk copies) once
    the consumers released the stage (`empty`); `consumer`: the loop as the consumers run it
    (full wait, body, dot, release), `after`: the statements that end it."""
    v, start, n, span = loop.var, loop.start, loop.extent, loop.span
    k = simplify(v - start)
    released = MbarrierWait.create(empty, simplify(k % S), simplify((k // S - 1) % 2),
                                   issuer=True, span=span)
    producer = For(v, start, n, "serial", SeqStmt.create(
        guarded(simplify(k >= S), [released]) + issue(k, simplify(k % S), "w")), None, span)
    return [WarpRoles.create([producer], [consumer] + after, num_threads, PRODUCER_THREADS,
                             span=span)]


def hoist(body: Stmt, num_threads: int) -> Stmt:
    """Move every statement but the lets, shared allocations, barrier set-up and `use_swizzle`
    into the consumer role of the top-level split, which then ends the body; fill in the
    consumer's thread count and registers."""
    top = top_statements(body)
    at = next((i for i, s in enumerate(top) if isinstance(s, WarpRoles)), None)
    if at is None:
        return body
    roles = top[at]
    pre: list[Stmt] = []
    moved: list[Stmt] = []
    for s in top[:at]:
        stays = isinstance(s, (LetStmt, AllocateShared, MbarrierInit, UseSwizzle))
        (pre if stays else moved).append(s)
    consumer = SeqStmt.create(moved + [roles.consumer] + list(top[at + 1:]))
    split = WarpRoles.create(roles.producer, consumer, num_threads, PRODUCER_THREADS,
                             span=roles.span)
    return SeqStmt.create(pre + [split])


__all__ = ["PRODUCER_THREADS", "can_split", "hoist", "specialized"]
