"""T.Parallel loops: each thread runs the loop body for the elements its layout gives it.

    for i, j in T.Parallel(128, 64):           #pragma unroll
        acc[i, j] = acc[i, j] * s[i]    ->     for (int li = 0; li < 64; ++li) {
                                                 const int i = <row of (tid, li)>; ...
                                                 acc[li] = acc[li] * s[<li -> s's register>];
A masked store `x = T.if_then_else(a >= b, u, v)` with a - b affine in the loop variables (a
causal mask) tests the margin's range over the tile once: most tiles take the all-u or all-v
branch, only tiles the boundary crosses select per element.
Fragments use their registers (the index folds to a constant after unrolling); memory buffers
use the logical index, except shared tiles the loop only reads at its own variables, which are
read as 16-byte vectors into registers first (shared_vector_reads). With a replicated layout, only one thread of each replica group writes
memory or applies an atomic (an atomic inside T.Parallel acts once per logical element).
"""

from __future__ import annotations

from dataclasses import replace

from tilecraft.ir import (Atomic, BinOp, BufferLoad, BufferStore, Compare, ParallelLoop, Select,
                          Var)
from tilecraft.ir.simplify import linear_form
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .cexpr import ctype
from .emitter import MEMORY
from .indexing import frag_coords, local_map, replica_index


def bind_fragments(em, loop, lay, accesses) -> dict:
    from tilecraft.passes.layout_inference.rules_parallel import loop_dims

    saved = dict(em.frag_local)
    for b, idx in accesses:
        if b.scope == "fragment":
            dims = loop_dims(loop, b, idx)
            em.frag_local[b] = local_map(lay, em.state.layouts[b], dims, loop.span)
    return saved


def emit_parallel(em, loop: ParallelLoop) -> None:
    from tilecraft.passes.layout_inference.rules_parallel import parallel_accesses

    lay = em.state.loop_layouts[id(loop)]
    em.comment(loop, f"T.Parallel{tuple(loop.extents)}: {lay.local_size} per thread, {lay}")
    saved = bind_fragments(em, loop, lay, parallel_accesses(loop))
    rep = replica_index(lay, "tid")
    body = list(walk(loop.body))
    mem_write = any(isinstance(s, Atomic) or isinstance(s, BufferStore) and s.buffer.scope in
                    MEMORY for s in body)
    own_write = any(isinstance(s, BufferStore) and s.buffer.scope not in MEMORY for s in body)
    # replicas hold the same elements: memory is written (an atomic applied) once per element,
    # by the canonical replica; if every replica must still update its own registers, only the
    # memory writes are guarded, else the other replicas skip the loop
    guard = rep is not None and mem_write and not own_write
    saved_flags = em.in_parallel, em.owner, em.thread_branch
    em.in_parallel = True
    em.owner = f"{rep} == 0" if rep is not None and mem_write and own_write else None
    if guard:
        em.open(f"if ({rep} == 0)")
        em.thread_branch += 1  # one replica group runs the loop: no barrier inside
    split = _uniform_select(em, loop)
    if split is None:
        _element_loop(em, loop, lay, loop.body)
    else:  # a mask that is all-true or all-false on most tiles: decide once per tile
        (lo, hi), store, cond_op = split
        em.open("")  # its own scope: the next masked loop declares d_lo and d_hi again
        em.w(f"const int d_lo = {lo}, d_hi = {hi};  // the range of the condition's margin")
        em.open(f"if ({_holds(cond_op, 'd_lo')} && {_holds(cond_op, 'd_hi')})")
        _element_loop(em, loop, lay, replace(store, value=store.value.a))
        em.close(f"}} else if (!{_holds(cond_op, 'd_lo')} && !{_holds(cond_op, 'd_hi')}) {{")
        em.indent += 1
        _element_loop(em, loop, lay, replace(store, value=store.value.b))
        em.close("} else {")
        em.indent += 1
        _element_loop(em, loop, lay, loop.body)
        em.close()
        em.close()
    if guard:
        em.close()
    em.frag_local = saved
    em.in_parallel, em.owner, em.thread_branch = saved_flags


def element_private(loop: ParallelLoop) -> dict:
    """The shared buffers the loop body stores to and touches only at one index that is the
    loop's own variables (`s[i, j]` in `T.Parallel(I, J)`, or `s[j, i]` throughout): no other
    element reads or writes that address, so each element keeps its value in a register
    (loaded first, stored once at the end by one replica) and needs no barrier between its
    statements. Buffer -> its index."""
    body = list(walk(loop.body))
    written = {x.buffer for x in body if isinstance(x, BufferStore) and x.buffer.scope == "shared"}
    written -= {x.dst.buffer for x in body if isinstance(x, Atomic)}
    own = set(loop.vars)
    index: dict = {}
    for x in body:
        uses = [(x.buffer, tuple(x.indices))] if isinstance(x, BufferStore) else []
        uses += [(y.buffer, tuple(y.indices)) for e in stmt_exprs(x) for y in walk_expr(e)
                 if isinstance(y, BufferLoad)]
        for b, idx in uses:
            if b not in written:
                continue
            ok = (all(isinstance(i, Var) for i in idx) and len(set(idx)) == len(idx) == len(own)
                  and set(idx) == own and index.setdefault(b, idx) == idx)
            if not ok:
                written.discard(b)
    return {b: index[b] for b in written}


def shared_vector_reads(loop: ParallelLoop, lay) -> tuple[dict, dict]:
    """({buffer: elements per vector}, {buffer: loop dims it is indexed by}) for the shared
    buffers the loop only reads, always at its own variables in order, the last one last
    (`X_s[i, j]`, `g_s[j]` in `T.Parallel(I, J)`), when each thread's innermost
    registers of the loop layout run along the last dimension: those elements are read as
    16-byte (or narrower) vectors before the element loop instead of one at a time."""
    if not lay.local_modes or lay.dim_modes[-1][-1:] != (lay.local_modes[-1],):
        return {}, {}
    run = lay.local_sizes[-1]
    body = list(walk(loop.body))
    written = {x.buffer for x in body if isinstance(x, BufferStore)}
    written |= {x.dst.buffer for x in body if isinstance(x, Atomic)}
    out, bad, dims = [], set(), {}
    for x in body:
        for e in stmt_exprs(x):
            for y in walk_expr(e):
                if isinstance(y, BufferLoad) and y.buffer.scope == "shared":
                    if y.buffer in written or _dims_of(loop, y.indices) is None:
                        bad.add(y.buffer)
                    elif dims.setdefault(y.buffer, _dims_of(loop, y.indices)) != \
                            _dims_of(loop, y.indices):
                        bad.add(y.buffer)
                    else:
                        out.append(y.buffer)
    vecs = {}
    for b in dict.fromkeys(out):
        bits = b.dtype.bits
        inside = all(isinstance(n, int) and isinstance(loop.extents[d], int)
                     and loop.extents[d] <= n for d, n in zip(dims[b], b.shape))
        if b in bad or bits not in (8, 16, 32, 64) or not inside:
            continue  # (a loop wider than the buffer reads it only under some condition)
        v = min(run, 128 // bits)
        v = 1 << (v.bit_length() - 1)  # vectors of 2^k elements (a run of 6 reads pairs)
        while v > 1 and (run % v or not isinstance(b.shape[-1], int) or b.shape[-1] % v):
            v //= 2
        if v > 1 and lay.local_size * bits <= 64 * 16:  # at most 64 16-bit registers' worth
            vecs[b] = v
    return vecs, dims


def _dims_of(loop: ParallelLoop, indices) -> tuple[int, ...] | None:
    """The loop dimensions a shared access uses when its indices are loop variables in order
    ending with the last one (`X_s[i, j]`, `g_s[j]`); None otherwise."""
    dims = [loop.vars.index(i) if isinstance(i, Var) and i in loop.vars else -1
            for i in indices]
    if not dims or dims[-1] != len(loop.vars) - 1 or dims != sorted(set(dims)) or -1 in dims:
        return None
    return tuple(dims)


def _preload_shared(em, loop: ParallelLoop, lay) -> dict:
    """Read the loop's vector-readable shared buffers into per-thread arrays; buffer -> the
    register of the current element (`name[li]`)."""
    vecs, dims = shared_vector_reads(loop, lay)
    regs = {}
    for b, v in vecs.items():
        arr, t = em.fresh("vec"), ctype(b.dtype)
        em.w(f"{t} {arr}[{lay.local_size}];  // {b.name}'s elements of this thread")
        em.w("#pragma unroll")
        em.open(f"for (int li = 0; li < {lay.local_size}; li += {v})")
        coords = frag_coords(lay, "tid", "li")
        idx = [f"({coords[d]})" for d in dims[b]]
        em.w(f"const tc::Vec<{t}, {v}> val = tc::load_vec<{t}, {v}>("
             f"&{em.shared_ptr[b]}[{em.flat_index(b, idx)}]);")
        for k in range(v):
            em.w(f"{arr}[li + {k}] = val.v[{k}];")
        em.close()
        regs[b] = f"{arr}[li]"
        em.read_since_sync = True
    return regs


def _element_loop(em, loop: ParallelLoop, lay, body) -> None:
    vec_regs = _preload_shared(em, loop, lay)
    em.w("#pragma unroll")
    em.open(f"for (int li = 0; li < {lay.local_size}; ++li)")
    for v, c, n in zip(loop.vars, frag_coords(lay, "tid", "li"), loop.extents):
        em.set_range(v, first=0, count=n)  # 0 <= v < n: `v // 2` prints as plain C division
        em.w(f"const int {em.name(v)} = {c};")
    private = element_private(loop)
    saved, regs = dict(em.elem_local), dict(vec_regs)
    for b, idx in private.items():
        regs[b] = em.fresh("elem")
        em.w(f"{ctype(b.dtype)} {regs[b]} = {em.ref(b, em.index_exprs(b, idx))};")
    em.elem_local.update(regs)
    em.stmt(body)
    em.elem_local = saved
    for b, idx in private.items():  # (after the loop, the barrier that follows a shared write)
        guard = f"if ({em.owner}) " if em.owner else ""
        em.w(f"{guard}{em.ref(b, em.index_exprs(b, idx))} = {regs[b]};")
    em.close()


def _holds(op: str, d: str) -> str:
    return {">=": f"({d} >= 0)", ">": f"({d} > 0)", "<=": f"({d} <= 0)", "<": f"({d} < 0)"}[op]


def _uniform_select(em, loop: ParallelLoop):
    """For `x[...] = T.if_then_else(a <op> b, u, v)` with a - b affine in the loop variables
    (a causal mask), the C range [d_lo, d_hi] of a - b over the whole tile: where the condition
    holds at both ends it holds everywhere (monotone margin), so the tile takes one branch
    without a per-element select. None when the loop is not of that form."""
    body = loop.body
    if not (isinstance(body, BufferStore) and isinstance(body.value, Select)
            and isinstance(body.value.cond, Compare) and body.value.cond.op in
            (">=", ">", "<=", "<") and all(isinstance(n, int) for n in loop.extents)):
        return None
    c = body.value.cond
    form = linear_form(BinOp.create("-", c.a, c.b))
    if form is None:
        return None
    terms, const = form
    lo = hi = const
    rest = []
    for atom, coeff in terms.items():
        if atom in loop.vars:
            n = loop.extents[loop.vars.index(atom)]
            lo, hi = lo + min(0, coeff * (n - 1)), hi + max(0, coeff * (n - 1))
        elif any(isinstance(x, Var) and x in loop.vars for x in walk_expr(atom)):
            return None  # a non-linear use of a loop variable
        else:
            rest.append(f"({em.p(atom)}) * {coeff}" if coeff != 1 else f"({em.p(atom)})")
    if len(rest) == len(terms):
        return None  # no loop variable: a plain uniform condition
    outer = " + ".join(rest) if rest else "0"
    return (f"{outer} + {lo}", f"{outer} + {hi}"), body, c.op
