"""The interpreter's machine: runs a PrimFunc's statements on numpy arrays.

Grid blocks run one after another. Inside a block, scalar code runs in Python; a `T.Parallel`
nest runs all its iterations at once: each loop variable is an index array along its own
axis, every expression broadcasts over them, and stores scatter (masked by enclosing `if`s).
Tile ops run as whole-array numpy operations (see interp/ops/).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import (
    Allocate,
    Atomic,
    Break,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    If,
    KernelLaunch,
    LetStmt,
    ParallelLoop,
    PrimFunc,
    SeqStmt,
    Stmt,
    TileOp,
    Var,
    While,
)
from tilecraft.ir.indices import check_parallel_fragments

from . import nan_check
from .evaluate import Evaluator
from .index_width import widen_indices
from .values import np_type, store_cast


class _BreakLoop(Exception):
    pass


@dataclass
class Machine:
    func: PrimFunc
    buffers: dict[Buffer, np.ndarray]
    scalars: dict[Var, object]
    env: dict[Var, object] = field(default_factory=dict)
    mask: np.ndarray | None = None
    par_axes: int = 0
    block_index: tuple[int, ...] = ()
    debug_nans: bool = False  # stop at the first NaN/inf made from finite values (nan_check.py)
    cluster_run: Any = None  # inside a thread-block cluster: its ClusterRun (cluster.py)
    rank: int = 0  # and this block's rank in it

    def __post_init__(self):
        self.ev = Evaluator(self)

    # ---- entry -------------------------------------------------------------------------
    def run(self) -> None:
        self.env.update(self.scalars)
        self.exec(widen_indices(self.func.body))  # 64-bit index arithmetic where needed

    def exec(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.exec(c)
            return
        with at_span(s.span):
            after = nan_check.before(self, s) if self.debug_nans else None
            handler = _HANDLERS.get(type(s))
            if handler is not None:
                handler(self, s)
            elif isinstance(s, TileOp):
                self.tile_op(s)
            else:
                raise TilecraftError("TC403", detail=type(s).__name__, hint="")
            if after is not None:
                after()

    # ---- statements --------------------------------------------------------------------
    def kernel(self, s: KernelLaunch) -> None:
        grid = [int(self.ev.scalar(g)) for g in s.grid]
        if s.cluster is not None:
            self.clusters(s, grid)
            return
        for idx in itertools.product(*(range(g) for g in reversed(grid))):
            idx = tuple(reversed(idx))
            saved = dict(self.env)
            self.block_index = idx
            for v, i in zip(s.block_vars, idx):
                self.env[v] = np.int32(i)
            for v in s.thread_vars:
                self.env[v] = _ThreadVar(v)
            self.exec(s.body)
            self.env = saved

    def clusters(self, s: KernelLaunch, grid: list[int]) -> None:
        """The grid cluster by cluster, each cluster's blocks in turn (cluster.py)."""
        from .cluster import ClusterRun, cluster_origins

        for blocks in cluster_origins(grid, s.cluster):
            run = ClusterRun(len(blocks))
            machines = [self.fork(run, rank, idx, s.block_vars) for rank, idx in
                        enumerate(blocks)]
            run.machines = machines
            run.run([functools.partial(m.run_block, s) for m in machines])

    def fork(self, run, rank: int, idx: tuple[int, ...], block_vars) -> Machine:
        """A machine for block `idx` of a cluster: the same global buffers and scalars, its
        own allocations."""
        m = Machine(self.func, dict(self.buffers), self.scalars, env=dict(self.env),
                    debug_nans=self.debug_nans, cluster_run=run, rank=rank)
        m.block_index = idx
        for v, i in zip(block_vars, idx):
            m.env[v] = np.int32(i)
        return m

    def run_block(self, s: KernelLaunch) -> None:
        for v in s.thread_vars:
            self.env[v] = _ThreadVar(v)
        self.exec(s.body)

    def shared_storage(self, buf: Buffer):
        """(key, array) of this block's shared buffer `buf` (T.remote reads it), or None before
        it is allocated; its elements are array[idx] at logical indices idx."""
        arr = self.buffers.get(buf)
        return None if arr is None else (buf, arr)

    @staticmethod
    def positions(key: Buffer, idx: list, arr) -> np.ndarray:
        """Flat positions in `arr` (buffer `key`'s storage) of logical indices `idx`; TC401
        outside it."""
        from .cluster import check_bounds

        check_bounds(key.name, idx, arr.shape)
        return np.ravel_multi_index(tuple(np.asarray(i, np.int64) for i in idx), arr.shape)

    def shared_arrays(self) -> dict:
        """Every shared buffer's storage (the cluster's snapshots of them, cluster.py)."""
        return {b: a for b, a in self.buffers.items() if b.scope == "shared"}

    def allocate(self, s: Allocate) -> None:
        b = s.buffer
        shape = tuple(int(self.ev.scalar(d)) for d in b.shape)
        arr = np.zeros(shape, dtype=np_type(b.dtype))
        if b.dtype.is_float:
            arr[...] = np.nan  # uninitialized registers/shared memory: reading them shows
        self.buffers[b] = arr

    def let(self, s: LetStmt) -> None:
        self.env[s.var] = self.ev.eval(s.value)

    def store(self, s: BufferStore) -> None:
        arr = self.buffers[s.buffer]
        value = self.ev.eval(s.value)
        idx = [self.ev.eval(i) for i in s.indices]
        if self.par_axes == 0 and all(np.ndim(i) == 0 for i in idx):
            ix = tuple(int(i) for i in idx)
            self.ev.check_bounds(s.buffer, ix)
            arr[ix] = store_cast(s.buffer.dtype, value)
            return
        arrays = np.broadcast_arrays(*idx, np.asarray(value),
                                     *([self.mask] if self.mask is not None else []))
        idx_b, val_b = arrays[: len(idx)], arrays[len(idx)]
        sel = arrays[-1] if self.mask is not None else np.ones(val_b.shape, bool)
        flat_idx = tuple(np.asarray(i)[sel].astype(np.int64) for i in idx_b)
        self.ev.check_bounds(s.buffer, flat_idx)
        arr[flat_idx] = store_cast(s.buffer.dtype, val_b[sel])

    def evaluate(self, s: Evaluate) -> None:
        self.ev.eval(s.value)

    def loop(self, s: For) -> None:
        start = self.ev.scalar(s.start)
        extent = self.ev.scalar(s.extent)
        try:
            for k in range(int(start), int(start) + int(extent)):
                self.env[s.var] = np.int32(k)
                try:
                    self.exec(s.body)
                except _BreakLoop:
                    break
        finally:
            self.env.pop(s.var, None)

    def parallel(self, s: ParallelLoop) -> None:
        extents = [int(self.ev.scalar(e)) for e in s.extents]
        check_parallel_fragments(s, extents)  # TC401 at the loop, as the CUDA backend says
        base, n = self.par_axes, len(extents)
        for k, (v, e) in enumerate(zip(s.vars, extents)):
            shape = [1] * (base + n)
            shape[base + k] = e
            self.env[v] = np.arange(e, dtype=np.int32).reshape(shape)
        saved_mask = self.mask
        self.par_axes = base + n
        try:
            self.exec(s.body)
        finally:
            self.par_axes, self.mask = base, saved_mask

    def branch(self, s: If) -> None:
        cond = self.ev.eval(s.cond)
        if np.ndim(cond) == 0 and self.mask is None:
            body = s.then_body if bool(cond) else s.else_body
            if body is not None:
                self.exec(body)
            return
        self.masked_branch(np.asarray(cond, dtype=bool), s, self.exec)

    def masked_branch(self, cond: np.ndarray, s: If, run) -> None:
        """`s`'s branches, each element running the one its `cond` picks (`run` executes a
        branch under the narrowed mask)."""
        saved = self.mask
        outer = saved if saved is not None else np.True_
        try:
            self.mask = outer & cond
            run(s.then_body)
            if s.else_body is not None:
                self.mask = outer & ~cond
                run(s.else_body)
        finally:
            self.mask = saved

    def while_(self, s: While) -> None:
        while True:
            c = self.ev.eval(s.cond)
            if np.ndim(c) != 0:
                raise TilecraftError("TC403", detail="`while` on a per-element condition",
                                     hint="use a serial loop with an if")
            if not bool(c):
                return
            try:
                self.exec(s.body)
            except _BreakLoop:
                return

    def brk(self, s: Break) -> None:
        if self.mask is not None:
            raise TilecraftError("TC403", detail="break under a per-element condition", hint="")
        raise _BreakLoop()

    def tile_op(self, s: TileOp) -> None:
        from .ops import run_tile_op

        element_wise = isinstance(s, Atomic) and not isinstance(s.src, BufferRegion)
        if (self.mask is not None or self.par_axes) and not element_wise:
            raise TilecraftError("TC108", detail=f"T.{s.op_name} inside T.Parallel or a "
                                 "per-element `if`", hint="tile operations run on whole tiles; "
                                 "move it out of the element-wise loop")
        run_tile_op(self, s)


class _ThreadVar:
    def __init__(self, var: Var):
        self.var = var


_HANDLERS = {
    KernelLaunch: Machine.kernel, Allocate: Machine.allocate, LetStmt: Machine.let,
    BufferStore: Machine.store, Evaluate: Machine.evaluate, For: Machine.loop,
    ParallelLoop: Machine.parallel, If: Machine.branch, While: Machine.while_, Break: Machine.brk,
}
