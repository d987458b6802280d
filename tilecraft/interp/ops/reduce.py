"""reduce_{sum,max,min,abssum,absmax} and cumsum."""

from __future__ import annotations

import numpy as np

from tilecraft.ir import CumSum, Reduce

from . import rule
from .common import read, write

_COMBINE = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
            "min": np.minimum}


@rule(Reduce)
def reduce(m, op: Reduce) -> None:
    src = read(m, op.src, squeeze=False).astype(np.float64)
    if op.kind.startswith("abs"):
        src = np.abs(src)
    base = {"sum": np.sum, "abssum": np.sum, "max": np.max, "absmax": np.max, "min": np.min}
    out = base[op.kind](src, axis=op.dim)
    if not op.clear:
        old = read(m, op.dst, squeeze=False).astype(np.float64).reshape(out.shape)
        out = _COMBINE[op.kind](old, out)
    write(m, op.dst, out.astype(np.float32) if op.dst.dtype.is_float else out)


@rule(CumSum)
def cumsum(m, op: CumSum) -> None:
    src = read(m, op.src, squeeze=False).astype(np.float64)
    if op.reverse:
        out = np.flip(np.cumsum(np.flip(src, op.dim), axis=op.dim), op.dim)
    else:
        out = np.cumsum(src, axis=op.dim)
    write(m, op.dst, out.astype(np.float32) if op.dst.dtype.is_float else out)
