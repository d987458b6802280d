"""Layout inference over the kernel's tile ops (TileLang appendix E; DESIGN 2.3 step 3).

Three levels, each a fixpoint over the ops that carry a rule (see RULES):
  strict  layouts fixed by the user, first (`T.annotate_layout`, `T.alloc_fragment(layout=)`,
          the register tensors of Tilus-level instructions: rules_block.py), then by hardware:
          gemm accumulators and register operands (mma.sync/wgmma atoms + the warp partition,
          the one whose accumulator layout was declared when there is one);
  common  propagation: fragment-to-fragment copies keep the layout, reductions replicate the
          reduced dimension across the threads that shared it, Parallel loops take the layout of
          a fragment they index with their own loop variables and impose it on the others;
  free    what is still unknown (loops over global/shared memory, fragments only copied from
          memory) gets the layout with fewest registers per thread that gives each thread
          16 contiguous bytes and consecutive threads consecutive chunks (coalesced); after each
          free choice, common propagation runs again.
Conflicts raise TC501 naming both ops, both layouts and the user's lines.

Requires: `legal`.  Produces (`layouts`): state.layouts[fragment buffer] and
state.loop_layouts[ParallelLoop] for every Parallel loop; state.gemm_warps for every gemm.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Allocate, CumSum, ParallelLoop, TileOp
from tilecraft.ir.visitor import walk

from ..context import KernelState
from .context import InferenceContext
from .free import free_layout
from .rules import RULES, parallel_accesses
from .rules_block import declared_layouts
from .rules_parallel import loop_dims, sub_layout


def infer_layouts(state: KernelState) -> None:
    ctx = InferenceContext(state)
    nodes = [s for s in walk(state.kernel.body)
             if isinstance(s, ParallelLoop) or (isinstance(s, TileOp) and type(s) in RULES)]
    # the scan emitter needs a fragment's scanned rows in one thread: no narrowed vectors
    scanned = {r.buffer for s in walk(state.kernel.body) if isinstance(s, CumSum)
               for r in (s.src, s.dst)}
    declared_layouts(ctx, state.kernel.body)  # the user's (and the Tilus level's): first
    for level in ("strict", "common"):
        _fixpoint(ctx, nodes, level)
    # free, in program order: each op's unconstrained fragments get the free layout, then
    # common propagation runs again; loops touching no fragment come last.
    for node in nodes + [s for s in walk(state.kernel.body) if isinstance(s, Allocate)]:
        for buf in _fragments_of(node):
            if buf not in state.layouts:
                lay = free_layout(buf.static_shape, state.num_threads, _elem_bytes(node, buf),
                                  narrow=buf not in scanned)
                if isinstance(node, ParallelLoop):
                    lay = _consistent_loop_layout(state, node) or lay
                ctx.set(buf, lay, node, "free layout")
                _fixpoint(ctx, nodes, "common")
    for node in nodes:
        if isinstance(node, ParallelLoop) and node not in state.loop_layouts:
            shape = tuple(node.extents)
            if not all(isinstance(e, int) for e in shape):
                raise TilecraftError("TC502", span=node.span, detail="T.Parallel with "
                                     "dynamic extents", hint="use constant tile extents")
            bits = max([b.dtype.bits for b, _ in parallel_accesses(node)] or [32])
            state.loop_layouts[node] = free_layout(shape, state.num_threads, max(1, bits // 8))


def _consistent_loop_layout(state, loop):
    """A layout for `loop` that agrees with the fragments in it that already have one: the
    layout of a known fragment of the loop's shape, else a free layout for some element size."""
    shape = tuple(loop.extents)
    n = len(shape)
    known = [(b, loop_dims(loop, b, idx)) for b, idx in parallel_accesses(loop)
             if b.scope == "fragment" and b in state.layouts]
    cands = [lay for lay in state.layouts.values() if tuple(lay.shape) == shape]
    cands += [free_layout(shape, state.num_threads, e) for e in (2, 4, 1, 8)]
    for lay in cands:
        if all(sub_layout(lay, n, dims) == state.layouts[b] for b, dims in known):
            return lay
    return None


def _elem_bytes(node, buf) -> int:
    """The element size a free layout's vectors are sized for: the narrowest dtype a tile op
    moves (a float32 fragment loaded from float16 memory gets 8-element, 16-byte loads)."""
    bits = buf.dtype.bits
    if isinstance(node, TileOp):
        regions = list(node.reads()) + list(node.writes())
        bits = min([bits] + [r.buffer.dtype.bits for r in regions if hasattr(r, "buffer")])
    return max(1, bits // 8)


def _fragments_of(node):
    if isinstance(node, Allocate):
        return [node.buffer] if node.buffer.scope == "fragment" else []
    if isinstance(node, ParallelLoop):
        n = len(node.vars)
        return [b for b, idx in parallel_accesses(node)
                if b.scope == "fragment" and len(idx) == n and tuple(b.shape) == tuple(node.extents)][:1]
    regions = list(node.reads()) + list(node.writes())
    return [r.buffer for r in regions if hasattr(r, "buffer") and r.buffer.scope == "fragment"]


def _fixpoint(ctx: InferenceContext, nodes, level: str) -> None:
    for _ in range(1000):
        ctx.changed = False
        for node in nodes:
            RULES[type(node)](ctx, node, level)
        if not ctx.changed:
            return
    raise RuntimeError("layout inference did not converge")
