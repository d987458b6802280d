"""The block virtual machine: runs a `BlockProgram` on numpy arrays (Tilus section 6).

Execution model: grid blocks run one after another (x fastest, as the Tile IR interpreter);
inside a block, each instruction runs for the whole block before the next starts
(block-synchronous, so `synchronize` is a no-op). Control flow, scalar expressions and
`LetStmt`s are the Tile IR interpreter's (this machine extends `interp.machine.Machine`).

State of a block:
* register tensors are stored PER THREAD: an array [num_threads, local_size] filled through the
  layout's map (replicas included), so a wrong layout gives a wrong answer and `view` is a
  per-thread bit reinterpretation. Register values leave registers (stores, dot, reduce, print)
  through `to_logical`, which checks that replicas agree (TC607);
* shared tensors are flat arrays of `layout.cosize` elements addressed through the layout
  (swizzles included);
* global tensors are the caller's arrays (kernel parameters, views of them) and zeroed
  workspaces that all blocks share;
* async copies: `copy_async` reads global memory when issued and joins the open group;
  `copy_async_commit_group` closes it; `copy_async_wait_group(n)` completes (writes to shared
  memory) all but the newest n committed groups. Touching shared elements a pending copy writes
  is TC605.

The semantics of each instruction are in vm_ops.py, registered per instruction class.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilecraft.diagnostics import Span, TilecraftError, at_span
from tilecraft.interp.machine import Machine
from tilecraft.interp.packed import PackedArray, is_packed, wrap_argument
from tilecraft.interp.values import np_type
from tilecraft.ir import BufferStore, Stmt, Var
from tilecraft.layout import Fragment, SharedLayout

from .instructions import Instruction
from .program import BlockProgram
from .roles import WarpRoles
from .tensors import RegisterTensor, SharedTensor


class ExitBlock(Exception):
    """Raised by `exit()`: the current block stops."""


@functools.lru_cache(maxsize=256)
def layout_table(layout: Fragment) -> tuple[np.ndarray, ...]:
    """Per dimension, the [num_threads, local_size] array of logical indices."""
    table = layout.index_table()
    return tuple(table[..., d] for d in range(layout.ndim))


@functools.lru_cache(maxsize=256)
def shared_offsets(layout: SharedLayout) -> np.ndarray:
    """The element offset of every logical index (an array of the layout's shape)."""
    return layout.offsets()


@dataclass
class PendingCopy:
    tensor: SharedTensor
    positions: np.ndarray  # flat element offsets in the shared tensor
    data: np.ndarray
    span: Span | None
    store: np.ndarray  # the tensor's elements and pending counts when the copy was issued (a
    counts: np.ndarray  # shared_slice's name may mean another stage by the time it lands)


@dataclass
class BlockVM(Machine):
    """The interpreter's machine plus a block's register, shared and async-copy state."""

    program: BlockProgram | None = None
    regs: dict[RegisterTensor, np.ndarray] = field(default_factory=dict)
    smem: dict[SharedTensor, np.ndarray] = field(default_factory=dict)
    pending: dict[SharedTensor, np.ndarray] = field(default_factory=dict)  # counts per element
    open_group: list[PendingCopy] = field(default_factory=list)
    committed: list[list[PendingCopy]] = field(default_factory=list)
    cache: dict[int, Any] = field(default_factory=dict)  # per-instruction prepared state
    barriers: dict = field(default_factory=dict)  # mbarrier state (vm_mbarrier.py)
    arena_plan: Any = None  # with `run(..., arena=True)`: shared tensors' byte offsets
    arena: Any = None  # and their bytes
    dot_groups: list = field(default_factory=list)  # pending dot_shared (vm_dot_shared.py)
    roles: Any = None  # inside warp_roles: the two roles' scheduler (vm_roles.py)

    def __post_init__(self):
        from .vm_scalar import ScalarEvaluator

        super().__post_init__()
        self.ev = ScalarEvaluator(self)  # scalar code reads shared tensors too (vm_scalar.py)

    def exec(self, s: Stmt) -> None:
        if isinstance(s, BufferStore) and s.buffer.scope == "shared" and self.par_axes == 0:
            from .vm_scalar import store_shared_scalar

            with at_span(s.span):
                store_shared_scalar(self, s)
            return
        if isinstance(s, Instruction):
            from .vm_ops import run_instruction

            with at_span(s.span):
                if self.dot_groups:
                    from .vm_dot_shared import check_dot_pending

                    check_dot_pending(self, s)
                run_instruction(self, s)
            return
        if isinstance(s, WarpRoles):
            from .vm_roles import run_roles

            run_roles(self, s)
            return
        super().exec(s)

    def tile_op(self, s) -> None:
        from .vm_parallel import block_atomic

        if not block_atomic(self, s):  # (shared memory through its layout)
            super().tile_op(s)

    # ---- registers ----------------------------------------------------------------------
    @property
    def num_threads(self) -> int:
        return self.program.num_threads

    def to_threads(self, tensor: RegisterTensor, logical: np.ndarray) -> np.ndarray:
        """Per-thread storage [T, N] of a logical tile (each thread gets its elements)."""
        logical = np.broadcast_to(np.asarray(logical, dtype=np_type(tensor.dtype)), tensor.shape)
        return np.ascontiguousarray(logical[layout_table(tensor.layout)])

    def to_logical(self, tensor: RegisterTensor) -> np.ndarray:
        """The logical tile held by `tensor`'s threads; TC607 when replicas disagree."""
        store = self.register(tensor)
        idx = layout_table(tensor.layout)
        out = np.empty(tensor.shape, dtype=store.dtype)
        out[idx] = store
        if tensor.layout.is_replicated:
            back = np.ascontiguousarray(out[idx])
            if back.tobytes() != np.ascontiguousarray(store).tobytes():
                t, i = _first_difference(back, store)
                raise TilecraftError("TC607", tensor=tensor.name,
                                     detail=f"thread {t} local {i} holds {store[t, i]}, another "
                                     f"thread {back[t, i]} for element "
                                     f"{tuple(int(x[t, i]) for x in idx)}")
        return out

    def register(self, tensor: RegisterTensor) -> np.ndarray:
        try:
            return self.regs[tensor]
        except KeyError:
            raise TilecraftError("TC606", tensor=tensor.name) from None

    # ---- shared memory ------------------------------------------------------------------
    def shared(self, tensor: SharedTensor) -> np.ndarray:
        try:
            return self.smem[tensor]
        except KeyError:
            raise TilecraftError("TC606", tensor=tensor.name) from None

    def check_pending(self, tensor: SharedTensor, positions: np.ndarray, access: str) -> None:
        """TC605 when a pending copy_async writes any of `positions` of `tensor`."""
        counts = self.pending.get(tensor)
        if counts is None or not counts[positions].any():
            return
        hit = set(np.asarray(positions).ravel().tolist())
        line = "?"
        bulk = (c for st in self.barriers.values() for c in itertools.chain(*st["copies"]))
        for copy in itertools.chain(self.open_group, *self.committed, bulk):
            if np.shares_memory(copy.counts, counts) and \
                    hit.intersection(copy.positions.ravel().tolist()):
                line = copy.span.line if copy.span is not None else "?"
                break
        raise TilecraftError("TC605", tensor=tensor.name, access=access, line=line)

    def complete(self, group: list[PendingCopy]) -> None:
        for copy in group:
            copy.store[copy.positions] = copy.data
            copy.counts[copy.positions] -= 1

    def fork(self, run, rank: int, idx: tuple[int, ...], block_vars) -> BlockVM:
        """A machine for block `idx` of a cluster: the same global buffers and scalars, its
        own registers, shared memory (arena) and copies in flight."""
        m = BlockVM(self.func, dict(self.buffers), self.scalars, env=dict(self.env),
                    program=self.program, arena_plan=self.arena_plan,
                    arena=None if self.arena is None else self.arena.copy(),
                    cluster_run=run, rank=rank)
        m.block_index = idx
        for v, i in zip(block_vars, idx):
            m.env[v] = np.int32(i)
        return m

    def shared_storage(self, buf):
        """(shared tensor, its flat storage) of `buf` (T.remote; elements through the layout:
        `positions`), or None before it is allocated."""
        t = next((t for t in self.smem if t.buffer is buf), None)
        return None if t is None else (t, self.smem[t])

    @staticmethod
    def positions(key, idx, arr):
        from tilecraft.interp.cluster import check_bounds

        check_bounds(key.name, idx, key.shape)
        return shared_offsets(key.layout)[tuple(np.asarray(i, np.int64) for i in idx)]

    def shared_arrays(self) -> dict:
        return dict(self.smem)

    def reset_block(self) -> None:
        self.regs.clear()
        self.smem.clear()
        self.pending.clear()
        self.open_group = []
        self.committed = []
        self.dot_groups = []
        self.barriers.clear()


def _first_difference(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    ab = a.view(np.uint8).reshape(a.shape + (-1,))
    bb = b.view(np.uint8).reshape(b.shape + (-1,))
    t, i = np.argwhere((ab != bb).any(-1))[0]
    return int(t), int(i)


def _bind(program: BlockProgram, args: list[Any]) -> tuple[dict, dict]:
    """The VM's global arrays and scalars for `args`. A packed type's tensor (sub-byte ints,
    custom floats) comes as its bytes (uint8/int8 of `packed_nbytes` bytes, any shape; float8 may
    come so too) and is held as a `PackedArray` over them; its dims must be static or bound by
    another argument."""
    if len(args) != len(program.params):
        raise TilecraftError("TC609", program.span, param="*", program=program.name,
                             detail=f"{len(args)} argument(s) for {len(program.params)} "
                             "parameter(s)")
    buffers, scalars, later = {}, {}, []

    def bad(p, detail: str) -> TilecraftError:
        return TilecraftError("TC609", program.span, param=p.name, program=program.name,
                              detail=detail)

    for p, a in zip(program.params, args):
        if isinstance(p, Var):
            scalars[p] = np.asarray(a, dtype=np_type(p.dtype))[()]
            continue
        if _as_bytes(p.dtype, a):
            later.append((p, a))
            continue
        arr = a if isinstance(a, np.ndarray) else None
        if arr is None or arr.dtype != np_type(p.dtype) or arr.ndim != p.ndim:
            got = f"{arr.dtype}{list(arr.shape)}" if arr is not None else type(a).__name__
            want = "uint8 bytes (any shape)" if is_packed(p.dtype) else \
                f"{p.dtype} array of rank {p.ndim}"
            raise bad(p, f"expected a {want}, got {got}")
        for d, (want, n) in enumerate(zip(p.shape, arr.shape)):
            if isinstance(want, Var):
                scalars[want] = np.int32(n)
            elif isinstance(want, int) and want != n:
                raise bad(p, f"dimension {d} is {n}, expected {want}")
        buffers[p.buffer] = arr
    for p, a in later:  # bytes: the shape comes from the parameter
        shape = [scalars.get(n, n) if isinstance(n, Var) else n for n in p.shape]
        if not all(isinstance(n, (int, np.integer)) for n in shape):
            raise bad(p, f"the dims {list(p.shape)} of the packed {p.dtype} tensor cannot be "
                      "read from a byte count: make them static or bound by another argument")
        try:
            buffers[p.buffer] = wrap_argument(a, tuple(int(n) for n in shape), p.dtype)
        except ValueError as err:
            raise bad(p, str(err)) from None
    return buffers, scalars


def _as_bytes(dtype, a: Any) -> bool:
    """`a` is the bytes of a packed tensor of `dtype` (or of a float8 one)."""
    if isinstance(a, PackedArray):
        return True
    return isinstance(a, np.ndarray) and a.dtype in (np.uint8, np.int8) and (
        is_packed(dtype) or (dtype.is_float and dtype.bits == 8))


def run(program: BlockProgram, args: list[Any], arena: bool = False) -> BlockVM:
    """Verify `program`, then run every block on `args` (numpy arrays written in place, and
    numbers for scalar parameters). Returns the machine, holding the last block's state.
    `arena`: shared tensors live in one byte arena at the offsets block/smem_plan.py gives them
    (as on the GPU), so a tensor that reuses bytes another still needs clobbers them and the
    results show it."""
    from .smem_plan import plan_shared
    from .verifier import verify

    verify(program)
    buffers, scalars = _bind(program, args)
    vm = BlockVM(None, buffers, scalars, program=program)  # type: ignore[arg-type]
    if arena:
        vm.arena_plan = plan_shared(program.body)
        vm.arena = np.full(max(vm.arena_plan.size, 1), 0xFF, np.uint8)  # NaN in f16 and f32
    vm.env.update(scalars)
    grid = [int(vm.ev.scalar(g)) for g in program.grid]
    if program.cluster is not None:
        _run_clusters(vm, program, grid)
        return vm
    for idx in itertools.product(*(range(g) for g in reversed(grid))):
        idx = tuple(reversed(idx))
        saved = dict(vm.env)
        vm.block_index = idx
        for v, i in zip(program.block_vars, idx):
            vm.env[v] = np.int32(i)
        vm.reset_block()
        try:
            vm.exec(program.body)
        except ExitBlock:
            pass
        vm.env = saved
    return vm


def _run_clusters(vm: BlockVM, program: BlockProgram, grid: list[int]) -> None:
    """The grid cluster by cluster, each cluster's blocks in turn on machines of their own
    (interp/cluster.py)."""
    from tilecraft.interp.cluster import ClusterRun, cluster_origins

    def block(m: BlockVM) -> None:
        try:
            m.exec(program.body)
        except ExitBlock:
            pass

    for blocks in cluster_origins(grid, program.cluster):
        run = ClusterRun(len(blocks))
        run.machines = [vm.fork(run, rank, idx, program.block_vars)
                        for rank, idx in enumerate(blocks)]
        run.run([functools.partial(block, m) for m in run.machines])


__all__ = ["BlockVM", "ExitBlock", "run"]
