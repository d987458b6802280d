"""copy, fill, atomics."""

from __future__ import annotations

import numpy as np

from tilecraft.ir import Atomic, BufferRegion, BufferStore, Const, Copy, Fill

from ..values import store_cast
from . import rule
from .common import bounds, read, write


@rule(Copy)
def copy(m, op: Copy) -> None:
    values = read(m, op.src)
    write(m, op.dst, values.astype(np.float64) if op.src.dtype.is_float else values)


@rule(Fill)
def fill(m, op: Fill) -> None:
    _, extents = bounds(m, op.dst)
    write(m, op.dst, np.full(extents, m.ev.eval(op.value)))


_UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum}


def _wide(t) -> type:
    """The numpy type an atomic computes in: exact for integers (wrapping like the GPU's once
    converted back), float64 for floats (rounded once when stored)."""
    return np.float64 if t.is_float else np.uint64 if t.name == "uint64" else np.int64


@rule(Atomic)
def atomic(m, op: Atomic) -> None:
    """Tile form: dst[...] = dst[...] <op> src element by element. Scalar form: once per logical
    element of the enclosing T.Parallel (once per block outside one), see `atomic_elements`."""
    if not isinstance(op.src, BufferRegion):
        atomic_elements(m, op)
        return
    t, w = op.dst.dtype, _wide(op.dst.dtype)
    old = read(m, op.dst, squeeze=False)
    src = store_cast(t, read(m, op.src)).reshape(old.shape)  # converted first, as on the GPU
    write(m, op.dst, _UFUNC[op.kind](old.astype(w), src.astype(w)))


def atomic_elements(m, op: Atomic) -> None:
    """`T.atomic_<kind>(dst[idx], value)` for every active element of the enclosing T.Parallel
    loops (indices and value broadcast over them, masked by enclosing `if`s): elements that hit
    the same address all count. The value converts to dst's dtype first, as on the GPU; integer
    results are exact (wrapping like the GPU's), float sums exact and rounded once."""
    buf = op.dst.buffer
    arr, w = m.buffers[buf], _wide(buf.dtype)
    idx = [m.ev.eval(i) for i in op.dst.starts]
    mask = m.mask if m.mask is not None else np.True_
    *idx, value, active = np.broadcast_arrays(*idx, np.asarray(m.ev.eval(op.src)), mask)
    idx = tuple(np.asarray(i)[active].astype(np.int64) for i in idx)
    m.ev.check_bounds(buf, idx)
    flat, inverse = np.unique(np.ravel_multi_index(idx, arr.shape), return_inverse=True)
    at = np.unravel_index(flat, arr.shape)
    acc = np.asarray(arr[at]).astype(w)
    old = acc.copy()
    _UFUNC[op.kind].at(acc, inverse.reshape(-1), store_cast(buf.dtype, value[active]).astype(w))
    arr[at] = store_cast(buf.dtype, acc)
    write_prev(m, op, old)


def write_prev(m, op: Atomic, old: np.ndarray) -> None:
    """`return_prev`: the element's value before a block-level atomic, into op.prev (a shared
    element every thread reads after it), stored as scalar code stores it on this machine."""
    if op.prev is None:
        return
    value = Const.create(old.reshape(-1)[0].item(), op.dst.dtype)
    m.exec(BufferStore(op.prev.buffer, op.prev.starts, value, op.span))
