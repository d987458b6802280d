"""T.fill / T.clear, T.atomic_*, and the ops that emit nothing here (use_swizzle is applied in
the kernel prologue, annotate_layout was consumed by layout inference)."""

from __future__ import annotations

import math

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Atomic, BufferRegion, Fill

from .cexpr import ctype
from .emit_copy import _chunk_loop, _coords, _mem_ptr
from .indexing import frag_coords, replica_index
from .regions import in_bounds, region_index, tile_shape


def emit_fill(em, op: Fill) -> None:
    b = op.dst.buffer
    em.comment(op, f"T.fill {b.name}")
    val = em.p(op.value)
    if op.value.dtype != b.dtype:
        val = f"tc::cast<{ctype(b.dtype)}>({val})"
    if b.scope == "fragment":
        n = em.state.layouts[b].local_size
        em.w("#pragma unroll")
        em.w(f"for (int li = 0; li < {n}; ++li) {em.name_buf(b)}[li] = {val};")
    elif b.scope == "local":
        em.w("#pragma unroll")
        em.w(f"for (int li = 0; li < {b.numel()}; ++li) {em.name_buf(b)}[li] = {val};")
    elif b.scope == "var":
        em.w(f"{em.name_buf(b)} = {val};")
    else:
        shape = tile_shape(op.dst)

        def body():
            idx = region_index(em, op.dst, _coords(shape, "c"))
            g = in_bounds(em, op.dst, idx)
            ref = f"{_mem_ptr(em, b)}[{em.flat_index(b, idx)}]"
            em.w(f"if ({g}) {ref} = {val};" if g else f"{ref} = {val};")

        _chunk_loop(em, math.prod(shape), body)


def emit_atomic(em, op: Atomic) -> None:
    """Scalar form: inside T.Parallel once per logical element (the thread owning the element's
    canonical replica), outside once per block (thread 0) unless it depends on the thread.
    Tile form from a fragment: each element once, from its canonical replica."""
    d = op.dst.buffer
    fn = f"tc::atomic_{op.kind}"
    em.comment(op, f"T.atomic_{op.kind} -> {d.name}")
    if d.scope not in ("global", "shared"):
        raise TilecraftError("TC502", span=op.span, detail=f"T.atomic_{op.kind} on `{d.name}` "
                             f"({d.scope})", hint="atomics act on global or shared memory")
    if not isinstance(op.src, BufferRegion):
        idx = em.index_exprs(d, op.dst.starts)
        call = (f"{fn}(&{_mem_ptr(em, d)}[{em.flat_index(d, idx)}], "
                f"tc::cast<{ctype(d.dtype)}>({em.p(op.src)}));")
        if em.in_parallel:
            guard = em.owner
        else:
            exprs = [*op.dst.starts, op.src]
            guard = None if em.per_thread(exprs) else "tid == 0"
        if guard and d.scope == "global":
            em.written_by_one.add(d)
        em.w(f"if ({guard}) {call}" if guard else call)
        return
    s = op.src.buffer
    if s.scope != "fragment":
        raise TilecraftError("TC502", span=op.span, detail=f"T.atomic_{op.kind} from {s.scope}",
                             hint="atomically add a fragment")
    if tuple(op.src.extents) != tuple(s.shape) or \
            tile_shape(op.dst) != tuple(n for n in s.shape if n != 1):
        # (the loop below walks the whole fragment: a part of it would add the wrong elements
        # at addresses past the destination tile)
        raise TilecraftError("TC502", span=op.span, detail=f"T.atomic_{op.kind} from part of "
                             f"the fragment `{s.name}`", hint="atomically add a whole fragment "
                             "(T.copy the part into a fragment of its own first)")
    lay = em.state.layouts[s]
    rep = replica_index(lay, "tid")
    if rep:
        em.open(f"if ({rep} == 0)")
    em.w("#pragma unroll")
    em.open(f"for (int li = 0; li < {lay.local_size}; ++li)")
    coords = [c for c, n in zip(frag_coords(lay, "tid", "li"), s.shape) if n != 1]
    idx = region_index(em, op.dst, coords)
    g = in_bounds(em, op.dst, idx)
    call = (f"{fn}(&{_mem_ptr(em, d)}[{em.flat_index(d, idx)}], "
            f"tc::cast<{ctype(d.dtype)}>({em.name_buf(s)}[li]));")
    em.w(f"if ({g}) {call}" if g else call)
    em.close()
    if rep:
        em.close()


def emit_nothing(em, op) -> None:
    pass
