"""Thread-block clusters on the CPU: the blocks of one cluster run in turn.

Each block of a cluster runs on its own machine (its own shared memory and registers) in a
Python thread, but only one runs at a time: block 0 runs up to its first `T.cluster_sync()`
(or its end), then block 1, ..., and when every block that has not ended has arrived, the
barrier opens and block 0 goes on. The order is fixed, so runs repeat exactly; a block that
has ended counts as arrived (as on the GPU). When the barrier opens, every block's shared
memory is kept (`snaps`): `T.remote(buf, r)` then reads block r's elements only if they still
hold those values (else block r wrote them after the barrier: a race on the GPU, TC411), and
at the next barrier the elements read must still hold them (else block r overwrote what
another block was reading: TC411). A read of a block that has ended is TC411 too, since its
shared memory is gone on the GPU. A block reads its own memory as it is.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from typing import Any, Callable

import numpy as np

from tilecraft.diagnostics import TilecraftError, current_span


class _Aborted(BaseException):
    """Another block of the cluster failed: this one stops where it waits."""


class ClusterRun:
    """The shared state of one cluster's blocks (`machines[rank]`)."""

    def __init__(self, size: int):
        self.size = size
        self.machines: list[Any] = [None] * size
        self.ended = [False] * size
        self.arrived = [False] * size
        self.turn = 0
        self.cv = threading.Condition()
        self.error: BaseException | None = None
        # per rank, its shared memory as the last barrier opened (what others may read now)
        self.snaps: list[dict] = [{} for _ in range(size)]
        self.reads: list[tuple] = []  # (rank, key, positions, reader, name, span) since then

    # ---- scheduling ------------------------------------------------------------------
    def run(self, blocks: list[Callable[[], None]]) -> None:
        """Run `blocks[rank]()` for every rank, in turn; re-raises the first error."""
        threads = []
        for rank, fn in enumerate(blocks):
            ctx = contextvars.copy_context()
            t = threading.Thread(target=ctx.run, args=(self._block, rank, fn), daemon=True)
            threads.append(t)
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        self._check_reads()  # (the last barrier's reads against the writes after them)

    def _block(self, rank: int, fn: Callable[[], None]) -> None:
        try:
            self._wait_turn(rank)
            fn()
        except _Aborted:
            pass
        except BaseException as err:  # noqa: BLE001 (handed to the caller's thread)
            with self.cv:
                if self.error is None:
                    self.error = err
        finally:
            with self.cv:
                self.ended[rank] = True
                self._pass_turn(rank)

    def _wait_turn(self, rank: int) -> None:
        with self.cv:
            while self.turn != rank and self.error is None:
                self.cv.wait()
            if self.error is not None:
                raise _Aborted()

    def _pass_turn(self, rank: int) -> None:
        """After `rank` arrived or ended: the next block that still runs before the barrier,
        else (all arrived) the barrier opens for the first block still running."""
        for r in itertools.chain(range(rank + 1, self.size), range(rank + 1)):
            if not self.ended[r] and not self.arrived[r]:
                self.turn = r
                break
        else:
            self.arrived = [False] * self.size
            self.turn = next((r for r in range(self.size) if not self.ended[r]), -1)
            if self.error is None and self.turn >= 0:  # the barrier opens
                try:
                    self._check_reads()
                except TilecraftError as err:
                    self.error = err
                self.snaps = [{k: a.copy() for k, a in m.shared_arrays().items()}
                              for m in self.machines]
                self.reads = []
        self.cv.notify_all()

    def sync(self, rank: int) -> None:
        """`T.cluster_sync()` by block `rank`."""
        with self.cv:
            self.arrived[rank] = True
            self._pass_turn(rank)
        self._wait_turn(rank)

    # ---- distributed shared memory -----------------------------------------------------
    def read(self, m, rank: int, buf, idx: list) -> np.ndarray:
        """Elements `idx` of block `rank`'s `buf`, read by machine `m`: TC411 unless they hold
        what they held when the last barrier opened (a write since then races the read), and
        at the next barrier if they changed since (the read raced that write). A block's own
        memory is read as it is."""
        peer = self.peer(rank, buf.name, m.rank)
        st = peer.shared_storage(buf)
        if st is None:
            raise TilecraftError("TC411", detail=f"block rank {m.rank} reads `{buf.name}` of "
                                 f"block rank {rank} before that block allocated it",
                                 hint="T.cluster_sync() between the writes and the reads")
        key, arr = st
        pos = np.asarray(peer.positions(key, idx, arr))
        flat = arr.reshape(-1)
        if rank == m.rank:  # its own memory: ordered by the block's barriers
            return flat[pos]
        snap = self.snaps[rank].get(key)
        if snap is None or _changed(snap.reshape(-1)[pos], flat[pos]).any():
            raise TilecraftError("TC411", detail=f"block rank {m.rank} reads `{buf.name}` of "
                                 f"block rank {rank}, which that block wrote after the last "
                                 "T.cluster_sync()", hint="T.cluster_sync() between the writes "
                                 "and the reads")
        self.reads.append((rank, key, pos, m.rank, buf.name, current_span()))
        return flat[pos]

    def _check_reads(self) -> None:
        """TC411 when a block overwrote elements another read since the last barrier."""
        for rank, key, pos, reader, name, span in self.reads:
            cur = self.machines[rank].shared_arrays().get(key)
            snap = self.snaps[rank][key]
            if cur is None or _changed(snap.reshape(-1)[pos], cur.reshape(-1)[pos]).any():
                raise TilecraftError("TC411", span, detail=f"block rank {rank} wrote `{name}` "
                                     f"elements that block rank {reader} read before the next "
                                     "T.cluster_sync()", hint="T.cluster_sync() between the "
                                     "reads and the writes")

    def peer(self, rank, buffer_name: str, reader: int):
        """The machine of block `rank` (a scalar) for a read of `buffer_name`; TC411 when no
        such block runs."""
        r = int(rank)
        if not 0 <= r < self.size:
            raise TilecraftError("TC411", detail=f"T.remote({buffer_name}, {r}) in block rank "
                                 f"{reader}: the cluster has ranks 0 to {self.size - 1}",
                                 hint="a rank of this cluster")
        if self.ended[r]:
            raise TilecraftError("TC411", detail=f"block rank {reader} reads `{buffer_name}` of "
                                 f"block rank {r}, which has ended", hint="its shared memory is "
                                 "gone: end every block with T.cluster_sync() after the last "
                                 "T.remote read")
        return self.machines[r]


def read_remote(m, buf, rank: np.ndarray, idx: list, ctype, lenient: bool):
    """`T.remote(buf, rank)[idx]` on machine `m` (rank and indices evaluated there, scalars
    or per-element arrays): elements an enclosing `if` masks off read nothing (0); in a
    lenient evaluation (an unused T.if_then_else side) a bad read gives 0."""
    run = m.cluster_run
    shape = np.broadcast_shapes(rank.shape, *(i.shape for i in idx))
    if m.mask is not None:
        shape = np.broadcast_shapes(shape, np.shape(m.mask))
    active = np.ones(shape, bool) if m.mask is None else \
        np.broadcast_to(np.asarray(m.mask, bool), shape)
    ranks = np.broadcast_to(rank, shape)
    idx = [np.broadcast_to(i, shape) for i in idx]
    out = np.zeros(shape, ctype)
    for r in np.unique(ranks[active]):
        sel = active & (ranks == r)
        try:
            out[sel] = np.asarray(run.read(m, int(r), buf, [i[sel] for i in idx])).astype(ctype)
        except TilecraftError:
            if not lenient:
                raise
    return out[()] if out.ndim == 0 else out


def check_bounds(name: str, idx: list, shape: tuple) -> None:
    """TC401 when logical indices `idx` of another block's `name` (of `shape`) fall outside."""
    for d, (i, n) in enumerate(zip(idx, shape)):
        if np.size(i) and (np.min(i) < 0 or np.max(i) >= n):
            bad = int(np.min(i)) if np.min(i) < 0 else int(np.max(i))
            raise TilecraftError("TC401", buffer=name, shape=list(shape),
                                 detail=f"index {bad} in dimension {d} (size {n}) of "
                                 "another block's copy (T.remote)")


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, whether the bits of a and b differ."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return np.ones(max(a.size, 1), bool)
    return (a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)).any(1)


def cluster_origins(grid: list[int], cluster: tuple[int, ...]):
    """Every cluster's blocks, cluster by cluster (x fastest), each list in rank order."""
    per = [range(0, g, c) for g, c in zip(grid, cluster)]
    for origin in itertools.product(*reversed(per)):
        origin = tuple(reversed(origin))
        inner = itertools.product(*(range(c) for c in reversed(cluster)))
        yield [tuple(o + i for o, i in zip(origin, reversed(idx))) for idx in inner]


__all__ = ["ClusterRun", "check_bounds", "cluster_origins", "read_remote"]
