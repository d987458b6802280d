"""copy, fill, atomics."""

from __future__ import annotations

import numpy as np

from tilecraft.ir import Atomic, BufferRegion, Copy, Fill

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


@rule(Atomic)
def atomic(m, op: Atomic) -> None:
    old = read(m, op.dst, squeeze=False).astype(np.float64)
    if isinstance(op.src, BufferRegion):
        src = read(m, op.src).astype(np.float64).reshape(old.shape)
    else:
        src = np.asarray(m.ev.eval(op.src), dtype=np.float64)
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[op.kind]
    write(m, op.dst, fn(old, src))
