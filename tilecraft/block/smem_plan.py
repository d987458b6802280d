"""plan_shared: where each shared tensor of a block program lives in the arena (byte offsets),
tensors whose lifetimes do not overlap sharing bytes.

Lifetimes are smem_lifetimes.py's: from a tensor's first to its last access (and the wait
that lands an async copy into it), over the loops it is allocated outside of unless each of
their iterations begins by overwriting all of it. Two tensors may share bytes when one's
lifetime ends before the other's begins, except that
- a tensor holding mbarriers shares only with tensors used before it (its bytes are not
  reusable without an mbarrier.inval);
- a tensor a bulk copy (TMA) writes shares only with tensors used after it (the async proxy
  would write bytes the generic proxy used before it);
the stages of a pipelined tile (the slices of a `stacked` tensor) share with tensors used only
before or after the pipeline (after its last copy landed, at the final wait). Placement:
largest first, at the lowest aligned offset clear of every tensor it may not share with.

`scratch` (the printer's: bytes an instruction stages through shared memory, e.g. the partials
of a reduction across warps) reserves dead bytes of the arena for each such instruction, where
a hole big enough exists (the arena never grows for it; the printer puts the rest after the
arena, see codegen/block_cuda/compute.py).

`groups` gives every tensor (and slice, and staged instruction) whose bytes meet another's a
`Bytes` key: insert_barriers treats accesses whose keys meet as accesses of the same memory,
so the first write of the later tensor waits for the other threads' last accesses of the
earlier one.

    Q_s  [--------------------]                 Q_s and O_s share bytes (Q_s's last read,
    K_s  [----------------------------]         a barrier, then O_s's first write)
    O_s                          [--------]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tilecraft.ir import Buffer, Stmt
from tilecraft.ir.visitor import walk

from .instructions import Instruction
from .smem_lifetimes import Lifetimes, Root
from .tensors import SharedTensor

_Lifetimes = Lifetimes  # (the name tests/passes knows)


@dataclass(frozen=True)
class Bytes:
    """The memory a shared tensor sharing bytes (or an instruction's scratch) is accessed as:
    bytes [start, end) of the arena. Two keys meet where their bytes do, but the accesses of
    two stages of one pipelined tile (`part`: the slice accessed) do not: pipeline_copies
    orders the reuse of a stage itself."""

    start: int
    end: int
    root: object  # the allocated tensor's buffer, or the staging instruction's token
    part: object = None

    def meets(self, other: object) -> bool:
        if not isinstance(other, Bytes):
            return False
        if self.root == other.root:
            return self.part is None or other.part is None or self.part == other.part
        return self.start < other.end and other.start < self.end


@dataclass
class SharedPlan:
    offsets: dict[Buffer, int] = field(default_factory=dict)  # root tensor -> byte offset
    size: int = 0  # bytes of the arena the tensors take
    groups: dict[Buffer, Bytes] = field(default_factory=dict)  # tensor sharing bytes -> key
    staged: dict[int, tuple[Instruction, int, int, Bytes]] = field(default_factory=dict)
    trailing: int = 0  # the largest staging not reserved in dead bytes (after the arena)

    def scratch_at(self, s: Stmt) -> tuple[int, int] | None:
        """(offset, bytes) of the dead bytes reserved for instruction `s` to stage through."""
        got = self.staged.get(id(s))
        return (got[1], got[2]) if got is not None and got[0] is s else None

    def scratch_key(self, s: Stmt) -> Bytes | None:
        """The memory key of the bytes `s` stages through (insert_barriers), if reserved."""
        got = self.staged.get(id(s))
        return got[3] if got is not None and got[0] is s else None


def _align(t: SharedTensor) -> int:
    return 1024 if t.layout.swizzle is not None else 128  # (TMA, wgmma: whole swizzle periods)


def _nbytes(t: SharedTensor) -> int:
    return -(-t.layout.cosize * t.dtype.bits // 8 // 16) * 16


def may_share(a: Root, b: Root) -> bool:
    """Tensors `a` and `b` may take the same bytes (see the module docstring)."""
    (a0, a1), (b0, b1) = a.span(), b.span()
    if a1 < b0:
        return _after(a, b)
    if b1 < a0:
        return _after(b, a)
    return False


def _after(first: Root, then: Root) -> bool:
    """`then`, used after `first` is dead, may take its bytes."""
    return not first.barrier and not then.bulk


def _taken_at(r: Root, pos: int) -> bool:
    """The bytes of `r` are not free for scratch written and read at statement `pos`."""
    first, last = r.span()
    return first <= pos <= last or (r.barrier and last < pos) or (r.bulk and pos < first)


def _lowest(size: int, align: int, taken: list[tuple[int, int]]) -> int:
    offset = 0
    while True:
        offset = -(-offset // align) * align
        clash = [end for start, end in taken if start < offset + size and offset < end]
        if not clash:
            return offset
        offset = max(clash)


def plan_shared(body: Stmt, scratch: Callable[[Instruction], int] | None = None) -> SharedPlan:
    """The arena of the program body `body` (`scratch`: the bytes each instruction stages
    through when printed, reserved in dead bytes where they fit)."""
    lives = Lifetimes(scratch)
    lives.visit(body)
    plan = SharedPlan()
    placed: list[tuple[int, int, Root]] = []
    for r in sorted(lives.roots.values(), key=lambda r: -_nbytes(r.tensor)):
        size = _nbytes(r.tensor)
        offset = _lowest(size, _align(r.tensor),
                         [(s, e) for s, e, p in placed if not may_share(r, p)])
        placed.append((offset, offset + size, r))
        plan.offsets[r.tensor.buffer] = offset
        plan.size = max(plan.size, offset + size)
    keys: list[tuple[object, int, int]] = [(r.tensor.buffer, s, e) for s, e, r in placed]
    at: dict[int, list[int]] = {}  # (an instruction object may stand in several places)
    for s, pos, _ in lives.staged:
        at.setdefault(id(s), []).append(pos)
    for s, _, n in lives.staged:  # scratch: in bytes no tensor needs where `s` runs
        if id(s) in plan.staged:
            continue
        taken = [(a, e) for a, e, r in placed if any(_taken_at(r, p) for p in at[id(s)])]
        offset = _lowest(n, 128, taken)
        if offset + n <= plan.size:
            token = object()
            plan.staged[id(s)] = (s, offset, n, Bytes(offset, offset + n, token))
            keys.append((token, offset, offset + n))
    shared = {k for k, s, e in keys if any(k2 is not k and s < e2 and s2 < e
                                           for k2, s2, e2 in keys)}
    for k, s, e in keys:
        if k in shared and isinstance(k, Buffer):
            plan.groups[k] = Bytes(s, e, k)
    for part, b in lives.alias.items():  # the stages of a pipelined tile
        if b in plan.groups:
            plan.groups[part] = Bytes(plan.groups[b].start, plan.groups[b].end, b, part)
    plan.trailing = max((n for s, _, n in lives.staged if id(s) not in plan.staged), default=0)
    return plan


def plan_program_arena(body: Stmt, num_threads: int, target=None) -> SharedPlan:
    """The arena of a block program for `target` (a Target, or None), its reductions staged as
    the printer does (codegen/block_cuda/compute.py `reduction_scratch`). Dead bytes hold a
    staged tile where they fit. The partials of a shuffle reduction go to the two scratch areas
    after the arena instead (the printer alternates them, so no barrier precedes their writes)
    unless that leaves fewer blocks on an SM or passes a block's maximum, where dead bytes
    that fit hold them too (each write then waits for the bytes' earlier readers)."""
    from tilecraft.codegen.block_cuda.compute import reduction_scratch

    need = reduction_scratch(num_threads)
    reserved = plan_shared(body, need)
    if target is None or not reserved.staged:
        return reserved
    tiles = plan_shared(body, reduction_scratch(num_threads, partials=False))
    tiles.trailing = max([tiles.trailing] + [need(s) for s in walk(body)
                                             if id(s) not in tiles.staged])
    if arena_blocks(tiles, target, num_threads) >= arena_blocks(reserved, target,
                                                                 num_threads) > 0:
        return tiles
    return reserved


def arena_blocks(plan: SharedPlan, target, num_threads: int) -> int:
    """Blocks an SM holds by shared memory (the arena, two scratch areas after it, and the
    1 KB the driver keeps per block) and threads; 0 past a block's maximum."""
    size = -(-plan.size // 128) * 128 + 2 * -(-plan.trailing // 16) * 16
    if size > target.max_shared_memory_per_block:
        return 0
    return min(target.shared_memory_per_sm // (size + 1024), target.max_blocks_per_sm,
               target.max_threads_per_sm // max(num_threads, 1))
