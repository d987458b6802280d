"""VM semantics of the instructions in parallel.py (registered with vm_ops.rule).

`parallel`: the loop variables are bound to [num_threads, local_size] arrays of the logical
indices of `layout` (element (t, e) is thread t's local element e), and the body runs as the
interpreter runs a T.Parallel body, vectorised over those elements (statement by statement,
`if` as a mask), except that register and shared tensors are addressed per thread:

* a register tensor element idx is read/written at thread t's own local slot holding idx in
  the tensor's layout (any replica); no such slot is TC610 at the statement;
* shared tensors are read/written through their layout (swizzles included);
* global and local buffers, lets and scalar expressions are the interpreter's.

A scalar atomic in the body acts once per logical element of the loop (the first thread of
each replica group), as the CUDA backend does and the interpreter's `ufunc.at` means; on a
shared tensor through its layout (`scalar_atomic`, also for block-level shared atomics).
"""

from __future__ import annotations

import functools

import numpy as np

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.interp.evaluate import Evaluator, compute_type
from tilecraft.interp.ops.copy import atomic_elements, write_prev
from tilecraft.interp.values import np_type, store_cast
from tilecraft.ir import (
    Atomic,
    BufferLoad,
    BufferRegion,
    BufferStore,
    CumSum,
    For,
    If,
    SeqStmt,
    Stmt,
)
from tilecraft.layout import Fragment

from .parallel import AtomicGlobal, CumSumRegister, ParallelCompute
from .tensors import SharedTensor
from .vm import BlockVM, layout_table, shared_offsets
from .vm_ops import _run_tile_op, _tile_index, rule


@functools.lru_cache(maxsize=256)
def slot_table(layout: Fragment) -> np.ndarray:
    """[num_threads, size]: the local slot of thread t holding flat logical index x, or -1."""
    table = np.full((layout.num_threads, layout.size), -1, dtype=np.int64)
    idx = layout.index_table()
    flat = np.ravel_multi_index(tuple(idx[..., d] for d in range(layout.ndim)), layout.shape)
    t = np.broadcast_to(np.arange(layout.num_threads)[:, None], flat.shape)
    e = np.broadcast_to(np.arange(layout.local_size)[None, :], flat.shape)
    table[t, flat] = e
    return table


@functools.lru_cache(maxsize=256)
def first_replica(layout: Fragment) -> np.ndarray:
    """[num_threads, local_size] bool: (t, e) is the lowest thread holding its element."""
    idx = layout_table(layout)
    flat = np.ravel_multi_index(idx, layout.shape).ravel()
    _, first = np.unique(flat, return_index=True)  # thread-major order: lowest thread first
    out = np.zeros(flat.shape, dtype=bool)
    out[first] = True
    return out.reshape(idx[0].shape)


class _Loop:
    """The state of one running `parallel` instruction."""

    def __init__(self, vm: BlockVM, s: ParallelCompute):
        self.vm, self.s = vm, s
        self.tensors = s.tensor_of()
        n = s.layout.local_size
        self.thread = np.broadcast_to(np.arange(vm.num_threads)[:, None], (vm.num_threads, n))

    def active(self) -> np.ndarray:
        mask = self.vm.mask
        return np.ones(self.thread.shape, bool) if mask is None else \
            np.broadcast_to(mask, self.thread.shape)

    def address(self, t, indices, for_store: bool):
        """(storage, positions, valid) of a register/shared element access: storage[positions]
        is the element; `valid` marks the active elements (TC610/TC401 checked on them)."""
        vm, active = self.vm, self.active()
        idx = np.broadcast_arrays(*[np.asarray(vm.ev.eval(i)) for i in indices], self.thread)
        idx = [np.asarray(i, dtype=np.int64) for i in idx[:-1]]
        lenient = vm.ev.lenient and not for_store
        inside = np.ones(self.thread.shape, bool)
        for i, n in zip(idx, t.shape):
            inside &= (i >= 0) & (i < n)
        if not lenient and not inside[active].all():
            d, bad = next((d, i[active & ~inside][0]) for d, i in enumerate(idx)
                          if (~((i >= 0) & (i < t.shape[d])))[active].any())
            raise TilecraftError("TC401", buffer=t.name, shape=list(t.shape),
                                 detail=f"index {int(bad)} in dimension {d} (size "
                                 f"{t.shape[d]}) at block {vm.block_index}")
        clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, t.shape))
        valid = active & inside
        if isinstance(t, SharedTensor):
            pos = shared_offsets(t.layout)[clipped]
            vm.check_pending(t, pos[valid], "written" if for_store else "read")
            return vm.shared(t), pos, valid
        slot = slot_table(t.layout)[self.thread, np.ravel_multi_index(clipped, t.shape)]
        missing = valid & (slot < 0)
        if missing.any() and not lenient:
            th, e = (int(x[0]) for x in np.nonzero(missing))
            where = tuple(int(i[th, e]) for i in idx)
            raise TilecraftError("TC610", tensor=t.name, index=list(where), thread=th,
                                 access="written" if for_store else "read",
                                 layout=repr(t.layout), loop=repr(self.s.layout))
        valid &= slot >= 0
        return vm.register(t), (self.thread, np.maximum(slot, 0)), valid

    def load(self, e: BufferLoad):
        t = self.tensors[e.buffer]
        store, pos, valid = self.address(t, e.indices, for_store=False)
        v = store[pos]
        if not valid.all():
            v = np.where(valid, v, np.zeros((), v.dtype))
        return v.astype(compute_type(t.dtype), copy=False)

    def store(self, s: BufferStore) -> None:
        t = self.tensors[s.buffer]
        value = np.broadcast_to(np.asarray(self.vm.ev.eval(s.value)), self.thread.shape)
        store, pos, valid = self.address(t, s.indices, for_store=True)
        sel = tuple(p[valid] for p in pos) if isinstance(pos, tuple) else pos[valid]
        store[sel] = store_cast(t.dtype, value[valid])

    def exec(self, s: Stmt) -> None:
        vm = self.vm
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.exec(c)
            return
        with at_span(s.span):
            if isinstance(s, BufferStore) and s.buffer in self.tensors:
                self.store(s)
            elif isinstance(s, If):
                self.branch(s)
            elif isinstance(s, For):
                self.loop(s)
            elif isinstance(s, Atomic) and not isinstance(s.src, BufferRegion):  # a scalar atomic
                saved = vm.mask
                vm.mask = self.active() & first_replica(self.s.layout)
                try:
                    scalar_atomic(vm, s, self.tensors.get(s.dst.buffer))
                finally:
                    vm.mask = saved
            else:  # lets, stores to global/local buffers, Evaluate: the interpreter's
                vm.exec(s)

    def branch(self, s: If) -> None:
        vm = self.vm
        cond = np.broadcast_to(np.asarray(vm.ev.eval(s.cond), dtype=bool), self.thread.shape)
        vm.masked_branch(cond, s, self.exec)

    def loop(self, s: For) -> None:
        vm = self.vm
        start, extent = int(vm.ev.scalar(s.start)), int(vm.ev.scalar(s.extent))
        try:
            for k in range(start, start + extent):
                vm.env[s.var] = np.int32(k)
                self.exec(s.body)
        finally:
            vm.env.pop(s.var, None)


class _LoopEvaluator(Evaluator):
    """The interpreter's evaluator, with register/shared tensors read per thread."""

    def __init__(self, loop: _Loop):
        super().__init__(loop.vm)
        self.loop = loop

    def load(self, e: BufferLoad):
        if e.buffer in self.loop.tensors:
            return self.loop.load(e)
        return super().load(e)


@rule(ParallelCompute)
def _parallel(vm: BlockVM, s: ParallelCompute) -> None:
    loop = _Loop(vm, s)
    table = layout_table(s.layout)
    saved_env = {v: vm.env[v] for v in s.vars if v in vm.env}
    saved = (vm.ev, vm.mask, vm.par_axes)
    for v, idx in zip(s.vars, table):
        vm.env[v] = idx.astype(np.int32)
    vm.ev, vm.mask, vm.par_axes = _LoopEvaluator(loop), None, saved[2] + 1
    try:
        loop.exec(s.body)
    finally:
        vm.ev, vm.mask, vm.par_axes = saved
        for v in s.vars:
            vm.env.pop(v, None)
        vm.env.update(saved_env)


def scalar_atomic(vm: BlockVM, s: Atomic, tensor=None) -> None:
    """`T.atomic_<kind>(dst[idx], value)` on every active element (vm.mask): the interpreter's
    `atomic_elements` for global memory; for a shared tensor (`tensor`) the same computation on
    the elements its layout places (exact in a wide type, rounded once, all hits counted)."""
    if not isinstance(tensor, SharedTensor):
        atomic_elements(vm, s)
        return
    mask = vm.mask if vm.mask is not None else np.True_
    idx = [np.asarray(vm.ev.eval(i)) for i in s.dst.starts]
    *idx, value, active = np.broadcast_arrays(*idx, np.asarray(vm.ev.eval(s.src)), mask)
    idx = [np.asarray(i)[active].astype(np.int64) for i in idx]
    for d, (i, n) in enumerate(zip(idx, tensor.shape)):
        if i.size and (i.min() < 0 or i.max() >= n):
            bad = int(i.min()) if i.min() < 0 else int(i.max())
            raise TilecraftError("TC401", buffer=tensor.name, shape=list(tensor.shape),
                                 detail=f"index {bad} in dimension {d} (size {n}) at block "
                                 f"{vm.block_index}")
    pos = shared_offsets(tensor.layout)[tuple(idx)]
    vm.check_pending(tensor, pos, "written")
    store, t = vm.shared(tensor), tensor.dtype
    wide = np.float64 if t.is_float else np.uint64 if t.name == "uint64" else np.int64
    flat, inverse = np.unique(pos, return_inverse=True)
    acc = store[flat].astype(wide)
    old = acc.copy()
    with np.errstate(all="ignore"):
        _UFUNC[s.kind].at(acc, inverse.reshape(-1), store_cast(t, value[active]).astype(wide))
    store[flat] = store_cast(t, acc)
    write_prev(vm, s, old)


def block_atomic(vm: BlockVM, s) -> bool:
    """Run `s` if it is a block-level scalar atomic on a shared tensor (once per block); False
    for anything else (the interpreter's tile ops, global atomics included)."""
    if not isinstance(s, Atomic) or isinstance(s.src, BufferRegion) or \
            s.dst.buffer.scope != "shared":
        return False
    tensor = next((t for t in vm.smem if t.buffer == s.dst.buffer), None)
    if tensor is None:
        raise TilecraftError("TC606", s.span, tensor=s.dst.buffer.name)
    scalar_atomic(vm, s, tensor)
    return True


_UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum}


@rule(CumSumRegister)
def _cumsum(vm: BlockVM, s: CumSumRegister) -> None:
    inputs = [(s.src, vm.to_logical(s.src)), (s.out, np.zeros(s.out.shape, np_type(s.out.dtype)))]
    _, result = _run_tile_op(vm, lambda a, b: CumSum(a, b, s.dim, s.reverse), inputs)
    vm.regs[s.out] = vm.to_threads(s.out, result)


@rule(AtomicGlobal)
def _atomic_global(vm: BlockVM, s: AtomicGlobal) -> None:
    """dst = dst <kind> src per element inside dst, as the interpreter's tile atomic computes
    (interp/ops/misc.py): exact in a wide type, rounded once to dst's dtype."""
    tile = vm.to_logical(s.src)
    arr = vm.buffers[s.dst.buffer]
    idx, inside = _tile_index(vm, s, arr.shape, s.src.shape)
    at = tuple(i[inside] for i in idx)
    wide = np.float64 if s.dst.dtype.is_float else \
        np.uint64 if s.dst.dtype.name == "uint64" else np.int64
    ufunc = _UFUNC[s.kind]
    with np.errstate(all="ignore"):
        value = ufunc(arr[at].astype(wide), tile[inside].astype(wide))
    arr[at] = store_cast(s.dst.dtype, value)


__all__ = ["block_atomic", "first_replica", "scalar_atomic", "slot_table"]
