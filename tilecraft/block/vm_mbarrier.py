"""The VM semantics of bulk copies and barriers (block/mbarrier.py).

`copy_async_bulk` reads its tile when issued (like copy_async) and lands at the `mbarrier_wait`
on its barrier: until then touching its destination is TC605 (the per-element pending counts of
vm.py). Phases are checked: a barrier's phase completes at each wait, so a wait must name the
phase the barrier is in (0, 1, 0, ...); another is TC603 at the wait.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError

from .mbarrier import CopyAsyncBulk, MbarrierExpect, MbarrierInit, MbarrierWait
from .vm import BlockVM, PendingCopy, shared_offsets
from .vm_ops import _read_global, rule


def _index(vm: BlockVM, bars, index) -> int:
    i = int(vm.ev.scalar(index))
    n = int(bars.shape[0])
    if not 0 <= i < n:
        raise TilecraftError("TC401", buffer=bars.name, shape=[n],
                             detail=f"barrier {i} of block {vm.block_index}")
    return i


def _state(vm: BlockVM, bars) -> dict:
    st = vm.barriers.get(bars)
    if st is None:
        raise TilecraftError("TC606", tensor=bars.name)
    return st


@rule(MbarrierInit)
def _init(vm: BlockVM, s: MbarrierInit) -> None:
    n = int(s.bars.shape[0])
    vm.barriers[s.bars] = {"phase": [0] * n, "copies": [[] for _ in range(n)]}


@rule(MbarrierExpect)
def _expect(vm: BlockVM, s: MbarrierExpect) -> None:
    _index(vm, s.bars, s.index)
    _state(vm, s.bars)


@rule(CopyAsyncBulk)
def _copy_bulk(vm: BlockVM, s: CopyAsyncBulk) -> None:
    data = _read_global(vm, s, s.src, s.dst.shape)
    pos = shared_offsets(s.dst.layout)
    store = vm.shared(s.dst)
    vm.check_pending(s.dst, pos, "written by another copy")
    vm.pending[s.dst][pos] += 1
    i = _index(vm, s.bars, s.index)
    _state(vm, s.bars)["copies"][i].append(
        PendingCopy(s.dst, pos, data, s.span, store, vm.pending[s.dst]))


@rule(MbarrierWait)
def _wait(vm: BlockVM, s: MbarrierWait) -> None:
    i = _index(vm, s.bars, s.index)
    st = _state(vm, s.bars)
    phase = int(vm.ev.scalar(s.phase))
    if phase != st["phase"][i]:
        raise TilecraftError("TC603", s.span, instr=s.NAME,
                             detail=f"barrier {i} of `{s.bars.name}` is in phase "
                             f"{st['phase'][i]}, the wait names phase {phase}")
    vm.complete(st["copies"][i])
    st["copies"][i] = []
    st["phase"][i] ^= 1

