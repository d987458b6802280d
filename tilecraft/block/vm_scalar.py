"""Scalar code on the block VM touching shared memory: `S[i] = v` and loads of `S[i]` outside
`parallel` (the interpreter's block-level statements). The element lives in the shared tensor
allocated for the buffer, at its layout's offset (swizzles included); touching an element a
pending copy_async writes is TC605, as for instructions. Every other scalar access is the
interpreter's (global, local and var buffers live in `vm.buffers`).
"""

from __future__ import annotations

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.interp.evaluate import Evaluator, compute_type
from tilecraft.interp.values import store_cast
from tilecraft.ir import Buffer, BufferLoad, BufferStore

from .tensors import SharedTensor


def _element(vm, buf: Buffer, indices, access: str):
    """(storage, flat offset) of the shared element `buf[indices]`; None outside the tensor
    when `lenient` (an unused if_then_else branch reads 0)."""
    from .vm import shared_offsets

    t = next((t for t in vm.smem if isinstance(t, SharedTensor) and t.buffer is buf), None)
    if t is None:
        raise TilecraftError("TC606", tensor=buf.name)
    ix = [np.asarray(vm.ev.eval(i)) for i in indices]
    if any(np.ndim(i) for i in ix):
        raise TilecraftError("TC108", detail=f"`{buf.name}` indexed per element outside a "
                             "parallel loop", hint="use a T.Parallel loop")
    ix = tuple(int(i) for i in ix)
    if not all(0 <= i < n for i, n in zip(ix, t.shape)):
        if access == "read" and vm.ev.lenient:
            return None
        d = next(d for d, (i, n) in enumerate(zip(ix, t.shape)) if not 0 <= i < n)
        raise TilecraftError("TC401", buffer=buf.name, shape=list(t.shape),
                             detail=f"index {ix[d]} in dimension {d} (size {t.shape[d]}) at "
                             f"block {vm.block_index}")
    pos = int(shared_offsets(t.layout)[ix])
    vm.check_pending(t, np.asarray([pos]), access)
    return vm.shared(t), pos, t


def store_shared_scalar(vm, s: BufferStore) -> None:
    """A block-level scalar store to shared memory."""
    value = vm.ev.eval(s.value)
    store, pos, t = _element(vm, s.buffer, s.indices, "written")
    store[pos] = store_cast(t.dtype, value)


class ScalarEvaluator(Evaluator):
    """The interpreter's evaluator, with shared elements read from the block's shared tensors."""

    def load(self, e: BufferLoad):
        if e.buffer.scope != "shared":
            return super().load(e)
        hit = _element(self.m, e.buffer, e.indices, "read")
        if hit is None:
            return np.zeros((), compute_type(e.buffer.dtype))[()]
        store, pos, _ = hit
        return np.asarray(store[pos]).astype(compute_type(e.buffer.dtype))[()]


__all__ = ["ScalarEvaluator", "store_shared_scalar"]
