"""The VM semantics of bulk copies and barriers (block/mbarrier.py).

A barrier counts arrivals (`mbarrier_expect`: one; `mbarrier_arrive`: one per warp) and
completes a phase each time they reach its `mbarrier_init` count. `copy_async_bulk` reads its
tile when issued (like copy_async) and lands at the `mbarrier_wait` on its barrier: until then
touching its destination is TC605 (the per-element pending counts of vm.py). Waits take the
phases in order: a wait names the parity of the next phase not waited for (else TC603), and
that phase must have completed (a wait no arrival can satisfy would hang the GPU: TC603). With
warp roles each role takes the phases in order on its own.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError

from .mbarrier import CopyAsyncBulk, MbarrierArrive, MbarrierExpect, MbarrierInit, MbarrierWait
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
    vm.barriers[s.bars] = {"count": s.arrivals, "arrived": [0] * n, "completed": [0] * n,
                           "waited": {}, "copies": [[] for _ in range(n)]}


def _arrive(vm: BlockVM, bars, index, arrivals: int) -> bool:
    """Count the arrivals; whether they completed a phase."""
    i = _index(vm, bars, index)
    st = _state(vm, bars)
    st["arrived"][i] += arrivals
    done = False
    while st["arrived"][i] >= st["count"]:
        st["arrived"][i] -= st["count"]
        st["completed"][i] += 1
        done = True
    return done


@rule(MbarrierExpect)
def _expect(vm: BlockVM, s: MbarrierExpect) -> None:
    _arrive(vm, s.bars, s.index, 1)


@rule(MbarrierArrive)
def _arrive_warps(vm: BlockVM, s: MbarrierArrive) -> None:
    threads = vm.num_threads
    if vm.roles is not None and vm.roles.role() == "producer":
        threads = vm.roles.producer_threads
    if _arrive(vm, s.bars, s.index, threads // 32) and vm.roles is not None:
        vm.roles.wake()  # (not at an expect: its copies are issued after it)


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
    role = vm.roles.role() if vm.roles is not None else None  # (each role waits in order)
    waited = st["waited"].setdefault(role, [0] * len(st["arrived"]))
    phase, n = int(vm.ev.scalar(s.phase)), waited[i]
    if phase != n % 2:
        raise TilecraftError("TC603", s.span, instr=s.NAME,
                             detail=f"barrier {i} of `{s.bars.name}` is in phase {n % 2}, the "
                             f"wait names phase {phase}")
    if st["completed"][i] <= n and vm.roles is not None:  # the other role may complete it
        vm.roles.block(lambda: st["completed"][i] > n,
                       f"phase {n} of barrier {i} of `{s.bars.name}`")
    if st["completed"][i] <= n:
        raise TilecraftError("TC603", s.span, instr=s.NAME,
                             detail=f"no arrival completes phase {n} of barrier {i} of "
                             f"`{s.bars.name}` before this wait (it would never return)")
    vm.complete(st["copies"][i])
    st["copies"][i] = []
    waited[i] += 1

