"""pipeline_copies: software pipelining of T.Pipelined loops on the block program (IR -> IR).

Requires: `block_program` (lower_tile_ops: a pipelined loop's producers are `copy_async`,
commit, `copy_async_wait_group(0)` of a whole shared tile). Guarantees (`pipelined`): in every
loop of kind "pipelined" with S >= 2 stages whose producers qualify, each produced tile X is
allocated S times (`stacked` layout, X_stages) and the loop issues the copies of iteration
k + S - 1 while iteration k computes:

    X_stages = allocate_shared(f16[S, 64, 32], ...)
    for p in 0 .. S-2:                          (unrolled)
        if p < n: X_p = shared_slice(X_stages, [p]); copy_async(X_p, A, offset(ko = start + p))
        copy_async_commit_group()
    for ko in range(start, start + n):
        copy_async_wait_group(S - 2)            (the group of iteration ko has landed)
        synchronize()                           (for every thread; all are done with ko - 1)
        if ko - start + S - 1 < n:
            X_w = shared_slice(X_stages, [(ko - start + S - 1) % S])
            copy_async(X_w, A, offset(ko + S - 1))        (refills the stage ko - 1 read)
        copy_async_commit_group()               (empty groups keep the count uniform)
        X = shared_slice(X_stages, [(ko - start) % S])
        <the rest of the body, unchanged, reading X>
    copy_async_wait_group(0)

When the rest of the body ends in its only consumer, one `dot_shared` into its c on a produced
b, and the target runs it on wgmma (S >= 3), the dot is asynchronous and one group stays in
flight across iterations (the wgmma mainloop): copies run S - 2 iterations ahead, so the stage
refilled at iteration k was read by the dot of k - 2, which `dot_wait_group(1)` at k - 1
completed before the barrier:

    for ko ...:
        copy_async_wait_group(S - 3); synchronize(); <refill ko + S - 2>; commit
        <slices>; dot_shared(A, B, acc, out=acc, asynchronous=True); dot_wait_group(1)
    dot_wait_group(0); copy_async_wait_group(0)

The dot's a is a produced tile, or a register tensor the body makes before the dot with
register-only work (pipeline_forms.py: lets, allocations, loads from shared tiles, view, cast,
element-wise ops; the quantized matmul's dequantization). That work overlaps the previous dot;
the shared tiles it loads are produced (a load is complete when issued, before the dot of its
iteration) or read-only in the loop, so the same distance holds. wgmma reads register A until
its wait, so iteration k + 1 must make its A in other registers: the loop runs two iterations
a trip, the second on fresh tensors (unroll_pairs.py; the VM's TC611 checks it):

    for ko2 in range(n // 2):
        <iteration 2 ko2: ...; w = ...; dot_shared(w, X, acc, asynchronous=True); wait(1)>
        <iteration 2 ko2 + 1 on w_odd, X_odd, ...>
    <when n is odd, the last iteration on w_last, ...>; dot_wait_group(0); ...

A producer (pipeline_forms.py) qualifies when its tile is written by nothing else in the loop
and used nowhere outside it, and its offsets use only the loop variable and values defined
outside the loop (the body's top-level lets before it are inlined: `kk = bs * n + ko` then
`A[kk * 64]`).
The synchronize orders the reuse of every stage (insert_barriers leaves the slices' stages to
this pass). Loops that do not qualify keep their copies complete at once (correct, unpipelined).
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import (
    AllocateShared,
    CopyAsyncBulk,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    DotWaitGroup,
    MbarrierArrive,
    MbarrierExpect,
    MbarrierInit,
    MbarrierWait,
    RegisterTensor,
    SharedSlice,
    SharedTensor,
    Synchronize,
)
from tilecraft.block.roles import WarpRoles
from tilecraft.block.select_tma import select_tma
from tilecraft.block.smem_plan import arena_blocks, plan_program_arena
from tilecraft.ir import Buffer, BufferLoad, Const, For, If, SeqStmt, Stmt, While
from tilecraft.ir.expr import const_int
from tilecraft.ir.rewrite import substitute
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import walk_expr
from tilecraft.layout import stacked

from . import overlap_dots, warp_specialize
from .context import KernelState
from .pipeline_forms import Producer, lone_dot, producers
from .unroll_pairs import unroll_pairs
from .warp_specialize import (
    PRODUCER_THREADS,
    can_split,
    dequantizing,
    hoist,
    specialized,
    split_mode,
    top_statements,
)


@dataclasses.dataclass(frozen=True)
class _Config:
    lone_dot: bool  # the lone dot_shared runs on wgmma, left in flight across iterations
    tma: bool  # copies that qualify become TMA loads on mbarriers
    warps: int  # of the block (arrivals on a stage's "empty" barrier)
    roles: bool  # a top-level wgmma mainloop may be warp-specialized (warp_specialize.py)
    dequantize: bool  # ... with a producer that also makes the dot's register A
    threads: int  # of the block
    smem_per_sm: int  # the target's shared memory per SM (bytes)
    always: bool  # split wherever the form allows (warp_specialize="always")
    blocks: int  # the plain kernel's blocks an SM by shared memory (0: not known yet)
    overlap: bool = False  # a split two-dot loop rotates its consumer (overlap_dots.py)


def pipeline_copies(state: KernelState) -> None:
    """The pipeline's pass (a no-op without a block program)."""
    program = state.block_program
    if program is None:
        return
    opts, hopper, target = state.options, state.target.has_wgmma, state.target
    lone = hopper and opts.wgmma and opts.wgmma_pipeline
    threads = program.num_threads
    roles = lone and opts.tma and opts.warp_specialize and can_split(program.body, threads)
    cfg = _Config(lone, hopper and opts.tma, threads // 32, False, warp_specialize.DEQUANTIZE,
                  threads, target.shared_memory_per_sm, opts.warp_specialize == "always", 0,
                  overlap_dots.ENABLED)
    body = _pipeline(program.body, cfg)
    if body is None:
        return
    if roles:  # the split, where it is worth it and its arena fits the block
        blocks = arena_blocks(plan_program_arena(body, threads, target), target, threads)
        split = _pipeline(program.body, dataclasses.replace(cfg, roles=True, blocks=blocks))
        if split is not None and any(isinstance(s, WarpRoles) for s in top_statements(split)):
            arena = plan_program_arena(split, threads, target)
            if arena_blocks(arena, target, threads + PRODUCER_THREADS) > 0:
                body = split
    state.block_program = dataclasses.replace(program, body=body)


def _pipeline(body: Stmt, cfg: _Config) -> Stmt | None:
    """`body` with its pipelined loops rewritten (None: none qualified)."""
    staged: dict[SharedTensor, SharedTensor] = {}  # tile -> its stages
    new = _rewrite(body, body, staged, cfg)
    if not staged:
        return None
    return hoist(_reallocate(new, staged), cfg.threads)


def _rewrite(s: Stmt, root: Stmt, staged: dict, cfg: _Config, top: bool = True) -> Stmt:
    """`top`: `s` is the body or one of its statements (a split may end the body there)."""
    if isinstance(s, SeqStmt):
        return SeqStmt.create([_rewrite(c, root, staged, cfg, top and s is root)
                               for c in s.stmts])
    if isinstance(s, For):
        body = _rewrite(s.body, root, staged, cfg, False)
        s = dataclasses.replace(s, body=body) if body is not s.body else s
        stages = s.pipeline.num_stages if s.pipeline is not None else 0
        if s.kind == "pipelined" and stages >= 2:
            found = producers(s, root)
            if found:
                return _pipelined(s, stages, found, staged,
                                  dataclasses.replace(cfg, roles=cfg.roles and top))
        return s
    if isinstance(s, If):
        other = None if s.else_body is None else _rewrite(s.else_body, root, staged, cfg, False)
        return dataclasses.replace(s, then_body=_rewrite(s.then_body, root, staged, cfg, False),
                                   else_body=other)
    if isinstance(s, While):
        return dataclasses.replace(s, body=_rewrite(s.body, root, staged, cfg, False))
    return s


def _pipelined(loop: For, S: int, producers: list[Producer], staged: dict,
               cfg: _Config) -> Stmt:
    v, start, n = loop.var, loop.start, loop.extent
    mine = {id(x) for p in producers for x in p.stmts}
    rest = [x for x in (loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,))
            if id(x) not in mine]
    dot = lone_dot(rest, producers) if cfg.lone_dot and S >= 3 else None
    ahead = S - 1 if dot is None else S - 2  # iterations the copies run ahead
    # TMA (one thread, stages on mbarriers) when every copy can be one; with the lone dot the
    # stages are freed by "empty" mbarriers every warp arrives on, not by a CTA barrier
    tma = cfg.tma and all(
        p.copy.bulk_ok and select_tma(p.copy.dst, p.copy.src, p.copy.dims) is not None
        for p in producers)
    span = loop.span
    for p in producers:
        tile = p.copy.dst
        if tile not in staged:
            buf = Buffer.create(f"{tile.name}_stages", (S, *tile.shape), tile.dtype, "shared",
                                tile.buffer.span)
            staged[tile] = SharedTensor.of(buf, stacked(tile.layout, S))
    nbytes = sum(p.copy.dst.layout.size * p.copy.dst.dtype.bits // 8 for p in producers)
    # the copies (and the dot's A) go to a producer warpgroup (warp_specialize.py); a loop
    # without the lone dot splits too, its consumers releasing each stage after its body
    mode = None
    if cfg.roles and tma and not _reads_memory(
            [loop.start, loop.extent, *(e for p in producers for e in p.copy.offset)]):
        mode = split_mode(dot, S, cfg.dequantize, cfg.threads, nbytes * S, cfg.smem_per_sm,
                          cfg.always, cfg.blocks)
    roles = mode == "copies"
    bars = empty = None
    if tma:
        first = producers[0].copy.dst
        bars = SharedTensor.create(f"{first.name}_full", "uint64", (S,), span=span)
        if dot is not None or roles:
            empty = SharedTensor.create(f"{first.name}_empty", "uint64", (S,), span=span)

    def issue(it, stage, tag: str) -> list[Stmt]:
        """The copies of iteration `start + it` into `stage` (a slice per tile)."""
        out: list[Stmt] = []
        if bars is not None:
            out.append(MbarrierExpect.create(bars, stage, nbytes, span=span))
        for p in producers:
            tile = p.copy.dst
            sl = SharedSlice.create(staged[tile], [stage], f"{tile.name}_{tag}", span=p.copy.span)
            moved = substitute(p.copy, {v: start + it})
            if bars is None:
                out += [sl, dataclasses.replace(moved, dst=sl.out)]
            else:
                out += [sl, CopyAsyncBulk.create(sl.out, moved.src, moved.offset, bars, stage,
                                                 dims=moved.dims, span=moved.span)]
        return out

    def guarded(cond, stmts: list[Stmt]) -> list[Stmt]:
        known = const_int(cond)
        if known == 1:
            return stmts
        if known == 0:
            return []
        return [If(cond, SeqStmt.create(stmts), None, span)]

    commit = [] if tma else [CopyAsyncCommitGroup.create(span=span)]
    prologue: list[Stmt] = []
    if bars is not None:
        prologue += [AllocateShared.create(bars, span=span),
                     MbarrierInit.create(bars, 1, span=span)]
    if empty is not None:  # every warp arrives once it is done reading a stage
        prologue += [AllocateShared.create(empty, span=span),
                     MbarrierInit.create(empty, cfg.warps, span=span)]
    if mode == "dequantize":
        tiles = {p.copy.dst: staged[p.copy.dst] for p in producers}
        return SeqStmt.create(prologue + dequantizing(
            loop, S, ahead, bars, empty, issue, guarded, tiles, rest[:-1], dot,
            [DotWaitGroup.create(0, span=span)], cfg.threads))
    # the second dot under the next iteration's work: from 3 stages (on 2 the next stage's
    # copies wait for the release of the one before, which now comes an iteration later)
    if roles and dot is None and cfg.overlap and S >= 3:
        def slices(it, tag):
            out = []
            for p in producers:
                tile = p.copy.dst
                sl = SharedSlice.create(staged[tile], [_simple(it % S)],
                                        tile.name if tag is None else f"{tile.name}_{tag}",
                                        span=p.copy.span)
                out.append((tile, dataclasses.replace(sl, out=tile) if tag is None else sl))
            return out

        consumer = overlap_dots.rotated(loop, S, bars, empty, slices, rest, guarded)
        if consumer is not None:
            return SeqStmt.create(prologue + specialized(loop, S, empty, issue, guarded,
                                                         consumer, [], cfg.threads))
    for it in range(0 if roles else ahead):
        cond = _lt(Const.create(it), n)
        prologue += guarded(cond, issue(Const.create(it), Const.create(it), f"p{it}"))
        prologue += commit
    k = _simple(v - start)
    pre = _simple(k + ahead)
    if bars is None:
        body: list[Stmt] = [CopyAsyncWaitGroup.create(ahead - 1, span=span)]
    elif roles:
        body = []  # (the producer's loop waits on full)
    else:
        body = [MbarrierWait.create(bars, _simple(k % S), _simple((k // S) % 2), span=span)]
    refill = issue(pre, pre % S, "w")
    if empty is None:
        body.append(Synchronize.create(span=span))  # every thread is done with the stage refilled
    elif not roles:  # the stage refilled was read at k - 2; its readers arrived at k - 1
        # (the phase of (k - 2) // S written (k + 2S - 2) // S: the same parity, and a
        # numerator the printer proves non-negative, so plain C division, not tc::floordiv)
        released = MbarrierWait.create(empty, pre % S, _simple(((k + 2 * S - 2) // S) % 2),
                                       issuer=True, span=span)
        refill = guarded(_simple(k >= 2), [released]) + refill
    if not roles:
        body += [If(_lt(pre, n), SeqStmt.create(refill), None, span)] + commit
    for p in producers:
        tile = p.copy.dst
        sl = SharedSlice.create(staged[tile], [k % S], tile.name, span=p.copy.span)
        assert sl.out.layout == tile.layout, (sl.out.layout, tile.layout)
        body.append(dataclasses.replace(sl, out=tile))  # the body's own name for the tile
    after = [] if tma else [CopyAsyncWaitGroup.create(0, span=span)]
    if dot is None:
        body += rest
        if roles:  # every read of stage k is done (its dots too): the producer may refill it
            body.append(MbarrierArrive.create(empty, _simple(k % S), span=span))
    else:
        body += rest[:-1] + [dataclasses.replace(dot, asynchronous=True),
                             DotWaitGroup.create(1, span=span)]
        if empty is not None:  # the dot of k - 1 is done: its stage is free
            body += guarded(_simple(k >= 1), [MbarrierArrive.create(
                empty, _simple((k + S - 1) % S), span=span)])  # (stage k - 1, non-negative)
        after.insert(0, DotWaitGroup.create(0, span=span))
    if roles:  # the consumer's loop waits on full first (warp_specialize.py)
        body.insert(0, MbarrierWait.create(bars, _simple(k % S), _simple((k // S) % 2),
                                           span=span))
    new: Stmt = dataclasses.replace(loop, kind="serial", body=SeqStmt.create(body))
    if dot is not None and isinstance(dot.a, RegisterTensor):  # A registers of two iterations
        new = unroll_pairs(new)
    if roles:
        return SeqStmt.create(prologue + specialized(loop, S, empty, issue, guarded, new, after,
                                                     cfg.threads))
    return SeqStmt.create(prologue + [new] + after)


def _reads_memory(exprs) -> bool:
    """Whether the producer's loop bounds or copy offsets read memory (a row index staged in
    shared memory): the producer role would read it before the consumers, which run the
    statements that fill it, have written it; such a loop keeps one role."""
    return any(isinstance(x, BufferLoad) for e in exprs for x in walk_expr(e))


def _lt(a, b):
    return simplify(a < b)


def _simple(e):
    return simplify(e)


def _reallocate(body: Stmt, staged: dict) -> Stmt:
    """Allocate each staged tile's stages where the tile was allocated."""
    def go(s: Stmt) -> Stmt:
        if isinstance(s, AllocateShared) and s.out in staged:
            return AllocateShared.create(staged[s.out], span=s.span)
        if isinstance(s, SeqStmt):
            return SeqStmt.create([go(c) for c in s.stmts])
        if isinstance(s, (For, If, While)):
            changes = {f: go(getattr(s, f)) for f in ("body", "then_body", "else_body")
                       if isinstance(getattr(s, f, None), Stmt)}
            return dataclasses.replace(s, **changes)
        return s

    return go(body)
