"""The consumer loop of a warp-specialized attention-shaped loop, rotated so that the second dot
runs under the next iteration's register work (FlashAttention-3's intra-warpgroup overlap;
called by pipeline_copies for a split loop without the lone dot of 3 stages or more, while
`ENABLED`, which is off: it measured no faster; docs/warp_specialization.md).

Requires: the consumer body (after the full wait and the stage slices) is

    F; D1 = dot_shared(.., stage tile, S, out=S); R; D2 = dot_shared(P, stage tile, O, out=O)

with exactly these two dots, D2 last, D1 accumulating into the register tensor S that the
statements F before it write (the fill, the causal mask) and D2's A a register tensor P; F
touches nothing R or D2 writes; R splits into R1, the longest prefix touching neither P nor O
(the scores' max, exponentials and sums), and R2, the rest (P from S, O rescaled); no
statement synchronizes the block. Guarantees: the same values, with D2(k) in flight while
R1(k + 1) runs, and D1(k + 1) issued before D2(k) so that one wait completes it alone:

    wait full[0]; F(0); D1(0); dot_wait_group(0)
    for k in range(n):
        <slices of stage k>; R1(k)
        dot_wait_group(0)                        (D2(k - 1): P and O are free)
        if k >= 1: arrive(empty, (k - 1) % S)    (its stage too)
        R2(k)
        if k + 1 < n: wait full[k + 1]; F(k + 1); D1(k + 1) on stage k + 1, asynchronous
        D2(k), asynchronous
        dot_wait_group(1)                        (D1(k + 1) done; D2(k) may run on)
    dot_wait_group(0)                            (the last stage is never refilled)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tilecraft.block import (
    DotShared,
    DotWaitGroup,
    Instruction,
    MbarrierArrive,
    MbarrierWait,
    RegisterTensor,
    Synchronize,
)
from tilecraft.ir import BufferLoad, BufferStore, Const, For, If, LetStmt, SeqStmt, Stmt
from tilecraft.ir.rewrite import substitute
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

#: whether a split two-dot loop of 3 stages or more is rotated (pipeline_copies): off. H200,
#: attention d128 at 128 x 128 on 3 stages against the split without it: -3% to +5%, within
#: the measurement's noise; on 2 stages 24-34% slower (the next stage's copies wait for a
#: release that comes an iteration later). benchmarks/NOTES.md, session 30.
ENABLED = False


def buffers(s: Stmt) -> tuple[set, set]:
    """(read, written) buffers of `s` and everything in it: instructions' tensors, and the
    stores and loads of element-wise loops."""
    reads: set = set()
    writes: set = set()
    for x in walk(s):
        if isinstance(x, Instruction):
            reads |= {t.buffer for t in x.reads()}
            writes |= {t.buffer for t in x.writes()}
        elif isinstance(x, BufferStore):
            writes.add(x.buffer)
        for e in stmt_exprs(x):
            reads |= {y.buffer for y in walk_expr(e) if isinstance(y, BufferLoad)}
    return reads, writes


def rotated(loop: For, S: int, bars, empty, slices: Callable, rest: list[Stmt],
            guarded: Callable) -> Stmt | None:
    """The consumer loop of `loop` rotated as the module says, or None where its body is not
    of that form. `slices(k, tag)`: (tile, slice statement) for every stage tile of
    iteration `start + k` (tag None: the slice names the tile itself, as the body does; else
    a new tensor, which D1 of that iteration then reads); `rest`: the body without copies,
    slices and barriers."""
    dots = [i for i, s in enumerate(rest) if isinstance(s, DotShared)]
    if len(dots) != 2 or dots[1] != len(rest) - 1:
        return None
    i1, i2 = dots
    d1, d2 = rest[i1], rest[i2]
    if d1.out != d1.c or d2.out != d2.c or not isinstance(d1.c, RegisterTensor) or \
            not isinstance(d2.a, RegisterTensor) or isinstance(d1.a, RegisterTensor):
        return None
    if any(isinstance(x, (Synchronize, LetStmt)) for s in rest for x in walk(s)):
        return None  # (a let of F would not reach R, which the rotation puts before it)
    fill, work = rest[:i1], rest[i1 + 1:i2]
    hot = {d2.a.buffer, d2.c.buffer}  # what D2 reads from registers or writes
    r1 = []
    for s in work:
        r, w = buffers(s)
        if (r | w) & hot:
            break
        r1.append(s)
    r2 = work[len(r1):]
    fill_r, fill_w = buffers(SeqStmt.create(fill)) if fill else (set(), set())
    later_w = set().union(*(buffers(s)[1] for s in work)) | {d2.c.buffer}
    if fill_w - {d1.c.buffer} or fill_r & later_w:
        return None  # (F must only make S, from what stays put across the rotation)

    v, start, n, span = loop.var, loop.start, loop.extent, loop.span
    k = simplify(v - start)
    nxt = simplify(k + 1)

    def full_wait(it):
        return MbarrierWait.create(bars, simplify(it % S), simplify((it // S) % 2), span=span)

    def first_dot(it, tag):
        """F and D1 of iteration `start + it` on stage slices of their own (`tag`),
        asynchronous."""
        named = slices(it, tag)  # [(the body's tile, its slice for this iteration)]
        swap = {tile: sl.out for tile, sl in named}
        at = {v: simplify(start + it)}
        moved = [substitute(s, at) for s in fill]
        dot = dataclasses.replace(d1, a=swap.get(d1.a, d1.a), b=swap.get(d1.b, d1.b),
                                  asynchronous=True)
        return [full_wait(it)] + [sl for _, sl in named] + moved + [dot]

    release = [MbarrierArrive.create(empty, simplify((k + S - 1) % S), span=span)]
    body = [sl for _, sl in slices(k, None)] + r1 + [DotWaitGroup.create(0, span=span)]
    body += guarded(simplify(k >= 1), release) + r2
    body += guarded(simplify(nxt < n), first_dot(nxt, "next"))
    body += [dataclasses.replace(d2, asynchronous=True), DotWaitGroup.create(1, span=span)]
    prologue = first_dot(Const.create(0), "first") + [DotWaitGroup.create(0, span=span)]
    new = dataclasses.replace(loop, kind="serial", body=SeqStmt.create(body))
    done = prologue + [new, DotWaitGroup.create(0, span=span)]  # (the last stage: no refill)
    if isinstance(n, Const):
        return SeqStmt.create(done) if n.value > 0 else SeqStmt.create([])
    return If(simplify(n > 0), SeqStmt.create(done), None, span)
