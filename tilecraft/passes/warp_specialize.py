"""Warp specialization of a TMA mainloop (called by pipeline_copies; docs/warp_specialization.md).

Requires: a T.Pipelined loop at the top of the kernel's body that pipeline_copies turns into
the TMA form (full mbarriers), on sm_90a, in a kernel of whole warpgroups with no `exit`, whose
top-level lets read no memory, with no other top-level pipelined loop, whose bounds and copy
offsets read no memory (a staged row index: the consumers would fill it after the producer
read it) and whose shared tiles fit the block with none sharing bytes (the stages stay alive
across both roles); and where the split measured faster (`split_mode`). Guarantees: the
loop's copies move to a producer warpgroup of 128 more threads (block/roles.py), which fills
each stage as soon as the consumers release it (S iterations ahead instead of S - 2 with the
lone in-flight dot, S - 1 without); the consumers (the block's threads) only wait, compute and
release; every statement of the body except the lets, the shared allocations and
`T.use_swizzle` moves into the consumer role, after which nothing follows the split
(`dequantizing`: the variant whose producer also makes the dot's register A, off). With the
lone dot, stage k - 1 is released at k, once `dot_wait_group(1)` says its dot is done:

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

Without it (attention's two dots, MLA's scores through shared memory, a 2-stage GEMM) the
plain loop synchronizes the block every iteration before thread 0 refills the stage read at
k - 1; split, the consumers wait on full[k % S], run the body and arrive on empty[k % S] (each
warp, after `__syncwarp`): no block-wide barrier an iteration, so the consumer warpgroups
drift apart and one's softmax overlaps another's wgmma.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tilecraft.block import (
    AllocateShared,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    DotWaitGroup,
    Exit,
    MbarrierInit,
    MbarrierWait,
    RegisterTensor,
    SharedTensor,
)
from tilecraft.block.barriers import is_cluster_sync
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
    if num_threads % 128 or any(isinstance(s, Exit) or is_cluster_sync(s) for s in walk(body)):
        return False  # (a cluster barrier needs every thread of the block: no roles)
    if sum(isinstance(s, For) and s.kind == "pipelined" for s in top) != 1:
        return False
    return all(not any(isinstance(x, BufferLoad) for x in walk_expr(s.value))
               for s in top if isinstance(s, LetStmt))


def split_mode(dot, stages: int, dequantize: bool, num_threads: int, stage_bytes: int,
               smem_per_sm: int, always: bool = False, blocks: int = 0) -> str | None:
    """How the loop splits: "copies" (the producer only copies), "dequantize" (it also makes the
    dot's A, `dequantizing`; only with DEQUANTIZE, and where the consumers' f32 accumulators
    fit the 128 registers a thread of a 4-warpgroup block has), or None (the plain pipeline).
    `always` (warp_specialize="always"): "copies" wherever the form allows. `dot` None: a
    loop without the lone in-flight dot (attention's two dots, a body that writes shared
    memory), whose consumers release each stage once their body is done with it: split
    wherever the plain kernel's shared memory keeps one block per SM anyway (`blocks`: the
    plain arena's blocks an SM; the caller checks that the split's arena fits)."""
    if dot is None:  # (H200, benchmarks/NOTES.md "Session 30": attention +7-22%)
        return "copies" if always or blocks == 1 else None
    if isinstance(dot.a, RegisterTensor):
        m, n, _ = dot.mnk
        return "dequantize" if dequantize and m * n // num_threads <= 64 else None
    fast = always or worth_splitting(dot, stages, stage_bytes, smem_per_sm)
    return "copies" if fast else None


def worth_splitting(dot, stages: int, stage_bytes: int, smem_per_sm: int) -> bool:
    """Whether the split measured faster than the plain pipeline (H200, 8192^3 and 4096^3 f16
    GEMM, benchmarks/NOTES.md "Session 16"): yes for tiles under 128 x 256 (128 x 128 on 128 or
    256 threads, 3-5 stages: +6-9%) and for 3 stages (the plain loop's copies run one iteration
    ahead: 128 x 256 +14%); no for 128 x 256 and 256 x 128 on 4 stages (-3-4%), nor where the
    body makes the dot's A in registers (the quantized matmul: -3% to +1%; its producer would
    have to dequantize: docs/warp_specialization.md). Only where the stages (`stage_bytes`, all
    of them) leave room for one block per SM anyway: the split's consumers take the registers
    (setmaxnreg), which would cost the plain kernel's other resident blocks; every measured
    case had one (128 KB of stages and more)."""
    m, n, _ = dot.mnk
    return stage_bytes > smem_per_sm // 2 and (stages == 3 or m * n < 128 * 256)


def specialized(loop: For, S: int, empty, issue: Callable, guarded: Callable,
                consumer: Stmt, after: list[Stmt], num_threads: int) -> list[Stmt]:
    """The split of `loop`: the producer issues, iteration by iteration, the copies of
    `issue(k, stage, tag)` (iteration start + k into `stage`: its expect and bulk copies) once
    the consumers released the stage (`empty`); `consumer`: the loop as the consumers run it
    (full wait, body, dot, release), `after`: the statements that end it."""
    v, start, n, span = loop.var, loop.start, loop.extent, loop.span
    k = simplify(v - start)
    released = MbarrierWait.create(empty, simplify(k % S), simplify((k // S + 1) % 2),
                                   issuer=True, span=span)
    producer = For(v, start, n, "serial", SeqStmt.create(
        guarded(simplify(k >= S), [released]) + issue(k, simplify(k % S), "w")), None, span)
    return [WarpRoles.create([producer], [consumer] + after, num_threads, PRODUCER_THREADS,
                             span=span)]


#: whether a loop whose body makes the dot's A in registers splits with a dequantizing producer:
#: off, it measured 2.2x slower than the plain pipeline (benchmarks/NOTES.md, session 16)
DEQUANTIZE = False

#: the dequantized A's stages (its ring is apart from the copies': shared memory)
DEQUANT_STAGES = 2

#: registers a dequantizing producer keeps
DEQUANT_REGS = 88


def dequantizing(loop: For, S: int, D: int, bars, empty, issue: Callable, guarded: Callable,
                 tiles: dict, work: list[Stmt], dot, after: list[Stmt],
                 num_threads: int) -> list[Stmt]:
    """The split where the producer also makes the dot's register A (the quantized matmul's
    dequantization) and stores it into a ring of DEQUANT_STAGES shared tiles in the wgmma
    layout; the consumers' dot reads it from there (both operands in shared memory). The
    producer is as many threads as the block (its layouts are the block's).

    producer, iteration k:                       consumer, iteration k:
      [issuer] refill k + D (after empty: dot      wait ready[k % R]; wait full[k % S]
               k + D - S is done), D = S - 2       dot_shared(A_deq[k % R], ...); wait(1)
      wait full[k % S]                             arrive empty[(k-1) % S], free[(k-1) % R]
      k >= R: wait free[k % R] (dot k - R done)
      <work>; store_shared(A, A_deq[k % R]); arrive ready[k % R]

    `tiles`: each produced tile -> its stages (the slices name them per iteration)."""
    from tilecraft.block import AllocateShared as Alloc
    from tilecraft.block import MbarrierArrive, SharedSlice, SharedTensor, StoreShared
    from tilecraft.ir import Buffer, Const, If
    from tilecraft.layout import make_swizzled_layout, stacked

    v, start, n, span = loop.var, loop.start, loop.extent, loop.span
    R = DEQUANT_STAGES
    k = simplify(v - start)
    a = dot.a
    tile = make_swizzled_layout(a.shape, a.dtype.bits)
    buf = Buffer.create(f"{a.name}_deq", (R, *a.shape), a.dtype, "shared", a.buffer.span)
    ring = SharedTensor.of(buf, stacked(tile, R))
    ready = SharedTensor.create(f"{a.name}_ready", "uint64", (R,), span=span)
    free = SharedTensor.create(f"{a.name}_free", "uint64", (R,), span=span)
    setup = [Alloc.create(ring, span=span), Alloc.create(ready, span=span),
             MbarrierInit.create(ready, num_threads // 32, span=span),
             Alloc.create(free, span=span), MbarrierInit.create(free, num_threads // 32,
                                                                  span=span)]

    def slices(tensors, tag=None) -> list[Stmt]:
        out = []
        for t, stages in tiles.items():
            if t in tensors:
                sl = SharedSlice.create(stages, [simplify(k % S)], t.name, span=span)
                out.append(dataclasses.replace(sl, out=t))
        return out

    read = {t for x in work if hasattr(x, "reads") for t in x.reads()}
    first = []
    for it in range(D):  # the first D iterations' copies, before the loop
        first += guarded(simplify(Const.create(it) < n), issue(Const.create(it),
                                                               Const.create(it), f"p{it}"))
    ahead = simplify(k + D)
    refill = guarded(simplify(ahead >= S), [MbarrierWait.create(
        empty, simplify(ahead % S), simplify(((ahead + S) // S) % 2), issuer=True, span=span)])
    refill += issue(ahead, simplify(ahead % S), "w")
    mine = SharedSlice.create(ring, [simplify(k % R)], f"{a.name}_w", span=span)
    body = [If(simplify(ahead < n), SeqStmt.create(refill), None, span),
            MbarrierWait.create(bars, simplify(k % S), simplify((k // S) % 2), span=span)]
    body += guarded(simplify(k >= R), [MbarrierWait.create(
        free, simplify(k % R), simplify(((k + R) // R) % 2), span=span)])
    body += slices(read) + list(work) + [
        mine, StoreShared.create(a, mine.out, [0] * a.ndim, span=span),
        MbarrierArrive.create(ready, simplify(k % R), span=span)]
    producer = first + [For(v, start, n, "serial", SeqStmt.create(body), None, span)]
    theirs = SharedSlice.create(ring, [simplify(k % R)], f"{a.name}_r", span=span)
    cbody = [MbarrierWait.create(ready, simplify(k % R), simplify((k // R) % 2), span=span),
             MbarrierWait.create(bars, simplify(k % S), simplify((k // S) % 2), span=span)]
    cbody += slices(set(dot.reads()) - {a}) + [
        theirs, dataclasses.replace(dot, a=theirs.out, asynchronous=True),
        DotWaitGroup.create(1, span=span)]
    cbody += guarded(simplify(k >= 1), [
        MbarrierArrive.create(empty, simplify((k + S - 1) % S), span=span),
        MbarrierArrive.create(free, simplify((k + R - 1) % R), span=span)])
    consumer = For(v, start, n, "serial", SeqStmt.create(cbody), None, span)
    roles = WarpRoles.create(producer, [consumer] + after, num_threads, num_threads,
                             producer_regs=DEQUANT_REGS, span=span)
    return setup + [roles]


def hoist(body: Stmt, num_threads: int) -> Stmt:
    """Move every statement but the lets, shared allocations, barrier set-up and `use_swizzle`
    into a role of the top-level split, which then ends the body: into the producer what
    touches only tensors the producer uses (a dequantizing producer's scales), the rest into
    the consumer (with a copy's commit and wait going where the copy went)."""
    top = top_statements(body)
    at = next((i for i, s in enumerate(top) if isinstance(s, WarpRoles)), None)
    if at is None:
        return body
    roles = top[at]
    stays = [s for s in top[:at]
             if isinstance(s, (LetStmt, AllocateShared, MbarrierInit, UseSwizzle))]
    rest = [s for s in top[:at] if not any(s is x for x in stays)]
    theirs = _tensors(roles.producer)  # grown with the statements that join the producer
    joins: set[int] = set()
    changed = True
    while changed:  # (an allocation joins with the store that fills the producer's tile)
        changed = False
        for s in rest:
            if id(s) not in joins and _tensors(s) & theirs:
                joins.add(id(s))
                theirs |= _tensors(s)
                changed = True
    pre = stays
    moved: dict[str, list[Stmt]] = {"producer": [], "consumer": []}
    last = "consumer"  # the role of the last copy_async moved
    for s in rest:
        if isinstance(s, (CopyAsyncCommitGroup, CopyAsyncWaitGroup)):
            role = last
        else:
            role = "producer" if id(s) in joins else "consumer"
        if isinstance(s, CopyAsync):
            last = role
        moved[role].append(s)
    producer = SeqStmt.create(moved["producer"] + [roles.producer])
    consumer = SeqStmt.create(moved["consumer"] + [roles.consumer] + list(top[at + 1:]))
    split = dataclasses.replace(roles, then_body=producer, else_body=consumer)
    return SeqStmt.create(pre + [split])


def _tensors(s: Stmt) -> set:
    """The shared and register tensors `s` touches (every role may read global memory)."""
    return {t for x in walk(s) if hasattr(x, "reads") and callable(x.reads)
            for t in (*x.reads(), *x.writes()) if isinstance(t, (SharedTensor, RegisterTensor))}


__all__ = ["PRODUCER_THREADS", "can_split", "hoist", "specialized"]
