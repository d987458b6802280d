"""T.Parallel loops: each thread runs the loop body for the elements its layout gives it.

    for i, j in T.Parallel(128, 64):           #pragma unroll
        acc[i, j] = acc[i, j] * s[i]    ->     for (int li = 0; li < 64; ++li) {
                                                 const int i = <row of (tid, li)>; ...
                                                 acc[li] = acc[li] * s[<li -> s's register>];
Fragments use their registers (the index folds to a constant after unrolling); memory buffers
use the logical index. With a replicated layout, only one thread of each replica group writes
memory.
"""

from __future__ import annotations

from tilecraft.ir import BufferStore, ParallelLoop
from tilecraft.ir.visitor import walk

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
    mem_store = any(isinstance(s, BufferStore) and s.buffer.scope != "fragment"
                    for s in walk(loop.body))
    guard = rep is not None and mem_store
    if guard:
        em.open(f"if ({rep} == 0)")
    em.w("#pragma unroll")
    em.open(f"for (int li = 0; li < {lay.local_size}; ++li)")
    for v, c in zip(loop.vars, frag_coords(lay, "tid", "li")):
        em.w(f"const int {em.name(v)} = {c};")
    em.stmt(loop.body)
    em.close()
    if guard:
        em.close()
    em.frag_local = saved
