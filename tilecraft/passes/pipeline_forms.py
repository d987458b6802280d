"""What pipeline_copies pipelines: a T.Pipelined loop's producers (the copies it may issue
stages ahead) and its lone dot (the one it may leave in flight across iterations).

A producer is a `copy_async`, commit, `copy_async_wait_group(0)` of a whole shared tile that
nothing else in the loop writes and nothing outside it touches, at offsets that use only the
loop variable and values defined outside the loop (the body's top-level lets before it are
inlined). The lone dot is the body's only consumer, one dot_shared into its c ending the body,
on a produced b, with an a that is produced too or made before it by register-only work.
"""

from __future__ import annotations

import dataclasses

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    Cast,
    CastBytes,
    CastPlanes,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    DotShared,
    Fill,
    Fma,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    UnaryOp,
    View,
)
from tilecraft.ir import For, LetStmt, SeqStmt, Stmt, Var
from tilecraft.ir.rewrite import substitute
from tilecraft.ir.simplify import simplify
from tilecraft.ir.visitor import walk, walk_expr

#: what the body may do before an in-flight dot besides lets: make register tensors
_REGISTER_WORK = (AllocateRegister, LoadShared, View, Cast, CastPlanes, CastBytes, BinaryOp, Fma,
                  UnaryOp, Fill)


@dataclasses.dataclass(frozen=True)
class Producer:
    copy: CopyAsync
    stmts: tuple[Stmt, Stmt, Stmt]  # copy, commit, wait(0)


def producers(loop: For, root: Stmt) -> list[Producer]:
    stmts = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    inner = {loop.var} | {x.var for x in walk(loop.body) if isinstance(x, (LetStmt, For))}
    out = []
    lets: dict = {}  # the body's top-level lets before the copy, inlined (`kk = base + ko`)
    for i, c in enumerate(stmts[:-2]):
        if isinstance(c, LetStmt):
            lets[c.var] = substitute(c.value, lets) if lets else c.value
            continue
        if not isinstance(c, CopyAsync):
            continue
        commit, wait = stmts[i + 1], stmts[i + 2]
        if not (isinstance(commit, CopyAsyncCommitGroup) and isinstance(wait, CopyAsyncWaitGroup)
                and wait.n == 0):
            continue
        copy = c
        if lets:
            copy = dataclasses.replace(c, offset=tuple(simplify(substitute(e, lets))
                                                       for e in c.offset))
        used = {x for e in copy.offset for x in walk_expr(e) if isinstance(x, Var)}
        if (used & inner) - {loop.var}:
            continue
        out.append(Producer(copy, (c, commit, wait)))
    tiles = [p.copy.dst for p in out]
    if len(set(tiles)) != len(tiles):
        return []
    mine = {id(x) for p in out for x in p.stmts}
    inside = {id(y) for y in walk(loop.body)}
    for x in walk(root):  # written only by its producer; touched nowhere outside the loop
        for t in _tensors(x):
            if t in tiles and id(x) not in mine and (
                    t in x.writes() or id(x) not in inside) and not _allocates(x, t):
                return []
    return out


def _tensors(x) -> tuple:
    reads, writes = getattr(x, "reads", None), getattr(x, "writes", None)
    if not callable(reads) or not callable(writes):
        return ()
    return tuple(reads()) + tuple(writes())


def _allocates(x, t) -> bool:
    return isinstance(x, AllocateShared) and x.out == t


def lone_dot(rest: list[Stmt], producers: list[Producer]) -> DotShared | None:
    """The body's only consumer, one dot_shared into its c ending the body: b a produced tile,
    a one too or a register tensor the body makes before it with register-only work."""
    tiles = {p.copy.dst for p in producers}
    if not rest or not isinstance(rest[-1], DotShared):
        return None
    d = rest[-1]
    ok = d.out == d.c and d.b in tiles and (d.a in tiles or not isinstance(d.a, SharedTensor))
    return d if ok and _register_only(rest[:-1], d) else None


def _register_only(work: list[Stmt], d: DotShared) -> bool:
    """`work` only makes register tensors for the dot (its lets, allocations, loads from shared
    tiles, element-wise ops); it reads neither the dot's c nor its out, which are in flight, and
    writes no shared memory (every shared tile it reads is produced or read-only in the loop)."""
    made = {s.out for s in work if isinstance(s, AllocateRegister)}
    if isinstance(d.a, RegisterTensor) and d.a not in made:
        return False
    for s in work:
        if isinstance(s, LetStmt):
            continue
        if not isinstance(s, _REGISTER_WORK) or any(t not in made for t in s.writes()) or \
                any(t in (d.c, d.out) for t in s.reads()):
            return False
    return True
