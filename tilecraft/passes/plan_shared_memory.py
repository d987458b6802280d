"""plan_shared_memory: place every shared buffer in one dynamic shared-memory arena.

Requires: `pipelines` (stage counts) and `layouts` (reduction scratch sizes).  Guarantees
(`smem_plan`): state.shared[buf] = SharedSlot(offset, bytes per stage, stages), 128-byte
aligned; 16-bit 2-D buffers whose rows hold >= 32 bytes in 16-byte chunks are XOR-swizzled
(state.swizzled, see codegen/cuda/indexing.py) so 16-byte cp.async stores and ldmatrix loads
hit distinct banks; cross-warp reductions get a scratch slot; state.smem_bytes is the total,
TC503 when it exceeds the target's per-block limit.

    A_s (128x32 f16, 3 stages) -> offset 0, 8192 B x 3;  B_s (32x128 f16, 3 stages) -> 24576
Not done yet: liveness-based reuse (every buffer has its own slot).
"""

from __future__ import annotations

import math

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Allocate, Reduce
from tilecraft.ir.visitor import walk

from .context import KernelState, SharedSlot

ALIGN = 128


def _align(x: int) -> int:
    return (x + ALIGN - 1) // ALIGN * ALIGN


def cross_warp_modes(layout, dim: int) -> list[tuple[int, int]]:
    """(thread stride, size) of the spatial modes of `dim` (replications excluded)."""
    out = []
    sizes = layout.spatial_sizes
    for k, m in enumerate(layout.spatial_modes):
        if m >= 0 and m in layout.dim_modes[dim]:
            out.append((math.prod(sizes[k + 1:]), sizes[k]))
    return out


def wants_swizzle(buf) -> bool:
    shape = buf.static_shape
    return (buf.dtype.bits == 16 and len(shape) == 2 and shape[1] % 8 == 0
            and shape[1] * 2 >= 32 and shape[0] % 8 == 0)


def plan_shared_memory(state: KernelState) -> None:
    stages = {}
    for plan in state.pipelines.values():
        for b in plan.buffers:
            stages[b] = plan.num_stages
    offset = 0
    for s in walk(state.kernel.body):
        if isinstance(s, Allocate) and s.buffer.scope == "shared":
            b = s.buffer
            nbytes = _align(b.numel() * b.dtype.bits // 8)
            slot = SharedSlot(b, offset, nbytes, stages.get(b, 1))
            state.shared[b] = slot
            offset += nbytes * slot.stages
            if wants_swizzle(b):
                state.swizzled.add(b)
        elif isinstance(s, Reduce) and s.src.buffer.scope == "fragment":
            lay = state.layouts[s.src.buffer]
            if any(st * sz > 32 for st, sz in cross_warp_modes(lay, s.dim)):
                dst = state.layouts[s.dst.buffer]
                state.reduce_scratch[id(s)] = offset
                offset += _align(dst.local_size * state.num_threads * 4)
    state.smem_bytes = offset
    limit = state.target.max_shared_memory_per_block
    if offset > limit:
        raise TilecraftError("TC503", span=state.kernel.span, need=offset,
                             target=state.target.name, limit=limit)
