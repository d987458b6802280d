"""plan_shared_memory: place every shared buffer in one dynamic shared-memory arena, reusing the
bytes of buffers whose lifetimes do not overlap.

Requires: `pipelines` (stage counts) and `layouts` (reduction scratch sizes).  Guarantees
(`smem_plan`): state.shared[buf] = SharedSlot(offset, bytes per stage, stages), 128-byte aligned
(1024 for swizzled tiles: wgmma reads them through the hardware swizzle);
cross-warp reductions get a scratch slot (state.reduce_scratch); 16-bit 2-D buffers whose rows
hold >= 32 bytes in 16-byte chunks are XOR-swizzled (state.swizzled, see codegen/cuda/indexing.py);
state.smem_bytes is the arena size after reuse, TC503 when even that exceeds the target's
per-block limit; state.smem_arena lists every ArenaItem (uses, live range, offset).

Liveness: statements are numbered in pre-order (a T.Parallel nest is one statement). An item lives
from its first to its last use; a use inside a loop (serial, T.Pipelined or While) keeps it alive
for the whole loop, unless the loop body begins, at its top level, by overwriting the whole buffer
without reading it, and has no break (its value never goes around the loop). Pipelined buffers live for their whole
loop, a reduction scratch only at its statement.

Reuse: two items share bytes only if their live ranges are disjoint *and* a __syncthreads lies on
every path between their uses, either way around any loop holding both (`Program.separated`).
The barriers counted are those the CUDA emitter always places (after a statement that writes
shared memory, after a cross-warp reduction, after a pipelined loop and before the consumers of
each of its iterations, at the end of every iteration of a serial loop touching shared memory),
plus the one it puts before a shared write when a shared read was emitted since the last barrier,
where nothing in between can have emitted one. Placement: largest first (then by first use), at
the lowest aligned offset clear of every item it conflicts with.

    FlashMLA decode, dim 512 + 64, 64 x 64 tiles, 2 stages: 311296 B without reuse -> 229376 B
    KV_shared (x2) 0, Q_shared 131072, ...   O_shared 0 (after the loop's drain barrier)
    S_shared 221184, the reductions' scratch 221184 (S is rewritten before it is read)
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (
    Allocate,
    Buffer,
)

from .context import KernelState, SharedSlot
from .smem_liveness import Program

ALIGN = 128
SWIZZLE_ALIGN = 1024  # a swizzle period: wgmma and TMA apply the swizzle to address bits


def _align(x: int, to: int = ALIGN) -> int:
    return (x + to - 1) // to * to


def wants_swizzle(buf) -> bool:
    shape = buf.static_shape
    return (buf.dtype.bits == 16 and len(shape) == 2 and shape[1] % 8 == 0
            and shape[1] * 2 >= 32 and shape[0] % 8 == 0)


@dataclass
class ArenaItem:
    """One shared buffer (all its stages) or one reduction's scratch in the arena."""

    name: str
    key: object  # the Buffer, or id(Reduce) for a reduction scratch
    nbytes: int
    uses: tuple[int, ...]  # numbers of the statements that access it
    live: tuple[int, int]  # the first and last statement it must survive
    offset: int = 0
    align: int = ALIGN  # SWIZZLE_ALIGN for swizzled tiles

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


def aliases(state: KernelState) -> list[tuple[str, str]]:
    """Pairs of arena items that share bytes (for dumps and tests)."""
    return [(a.name, b.name) for a, b in combinations(state.smem_arena, 2)
            if a.offset < b.end and b.offset < a.end]


def _conflict(prog: Program, a: ArenaItem, b: ArenaItem) -> bool:
    if a.live[0] > b.live[0]:
        a, b = b, a
    return a.live[1] >= b.live[0] or not all(
        prog.separated(x, y) for x in a.uses for y in b.uses)


def _items(state: KernelState, prog: Program) -> tuple[list[ArenaItem], list[SharedSlot]]:
    stages = {b: plan.num_stages for plan in state.pipelines.values() for b in plan.buffers}
    items, slots = [], []
    for i, s in enumerate(prog.stmts):
        if isinstance(s, Allocate) and s.buffer.scope == "shared":
            b = s.buffer
            slots.append(SharedSlot(b, 0, _align(b.numel() * b.dtype.bits // 8), stages.get(b, 1)))
            loops = [q for q in prog.pipelined if b in state.pipelines[id(prog.stmts[q])].buffers]
            uses = sorted(set(prog.uses.get(b, [])) | set(loops))  # the prologue writes at q
            live = prog.live_range(b, uses) if uses else (0, len(prog.stmts) - 1)
            items.append(ArenaItem(b.name, b, slots[-1].nbytes * slots[-1].stages, tuple(uses),
                                   live, align=SWIZZLE_ALIGN if wants_swizzle(b) else ALIGN))
        elif i in prog.scratch:
            acc = max(4, s.src.dtype.bits // 8, s.dst.dtype.bits // 8)  # accumulator bytes
            size = _align(state.layouts[s.dst.buffer].local_size * state.num_threads * acc)
            line = s.span.line if s.span is not None else "?"
            items.append(ArenaItem(f"reduce_{s.kind} scratch (line {line})", id(s), size,
                                   (i,), (i, i)))
    return items, slots


def _place(items: list[ArenaItem], conflict) -> None:
    placed: list[ArenaItem] = []
    order = sorted(range(len(items)), key=lambda i: (-items[i].nbytes, items[i].live[0], i))
    for it in (items[i] for i in order):
        offset = 0
        for p in sorted((p for p in placed if conflict(p, it)), key=lambda p: p.offset):
            if _align(offset, it.align) + it.nbytes <= p.offset:
                break
            offset = max(offset, p.end)
        it.offset = _align(offset, it.align)
        placed.append(it)


def plan_shared_memory(state: KernelState) -> None:
    prog = Program(state)
    items, slots = _items(state, prog)
    _place(items, lambda a, b: _conflict(prog, a, b))
    need = max((it.end for it in items), default=0)
    limit = state.target.max_shared_memory_per_block
    if need > limit:
        big = sorted(items, key=lambda x: -x.nbytes)[:4]
        note = (f"that is after reusing the bytes of buffers whose lifetimes do not overlap "
                f"({sum(it.nbytes for it in items)} bytes without reuse); the largest: "
                + ", ".join(f"{it.name} {it.nbytes} B" for it in big))
        raise TilecraftError("TC503", span=state.kernel.span, need=need,
                             target=state.target.name, limit=limit, notes=((None, note),))
    offsets = {it.key: it.offset for it in items if isinstance(it.key, Buffer)}
    for slot in slots:
        slot.offset = offsets[slot.buffer]
        state.shared[slot.buffer] = slot
        if wants_swizzle(slot.buffer):
            state.swizzled.add(slot.buffer)
    for it in items:
        if not isinstance(it.key, Buffer):
            state.reduce_scratch[it.key] = it.offset
    state.smem_arena = items
    state.smem_bytes = need
