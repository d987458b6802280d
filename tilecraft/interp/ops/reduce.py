"""reduce_{sum,max,min,abssum,absmax} and cumsum.

A reduction computes in its accumulator dtype (the CUDA emitter's rule, emit_reduce.py):
integers exactly in the wider of src and dst, sums wrapping modulo 2^bits like the GPU's, and
abs wrapping too (abs(-128) is -128 in int8); floats in float32 (float64 when either side is),
with sums added in float64 and rounded once (the GPU's order of additions is unspecified).
max/min propagate NaN and order signed zeros (-0.0 < +0.0, as PTX max/min); their
identities are the type's lowest/highest (-inf/+inf).
"""

from __future__ import annotations

import numpy as np

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import CumSum, Reduce

from ..minmax import max_along, maximum, min_along, minimum
from ..values import np_type, store_cast
from . import rule
from .common import read, write

_BASE = {"sum": np.sum, "abssum": np.sum, "max": max_along, "absmax": max_along,
         "min": min_along}
_COMBINE = {"sum": np.add, "abssum": np.add, "max": maximum, "absmax": maximum, "min": minimum}


def accumulator_dtype(src: dt.DataType, dst: dt.DataType) -> dt.DataType:
    """Integers: the wider of `src` and `dst`; floats: float32, float64 when either side is."""
    if src.is_integer and dst.is_integer:
        return dst if dst.bits >= src.bits else src
    return dt.resolve("float64") if "float64" in (src.name, dst.name) else dt.resolve("float32")


@rule(Reduce)
def reduce(m, op: Reduce) -> None:
    if op.kind not in _BASE:
        raise TilecraftError("TC403", detail=f"reduce kind {op.kind!r}", hint="")
    acc = accumulator_dtype(op.src.dtype, op.dst.dtype)
    exact = np_type(acc) if acc.is_integer else np.dtype(np.float64)
    src = _to(acc, exact, read(m, op.src, squeeze=False))
    with np.errstate(all="ignore"):
        if op.kind.startswith("abs"):
            src = np.abs(src)
        kw = {"dtype": exact} if op.kind in ("sum", "abssum") else {}
        out = _BASE[op.kind](src, axis=op.dim, **kw)
        if not op.clear:
            old = _to(acc, exact, read(m, op.dst, squeeze=False)).reshape(out.shape)
            out = _COMBINE[op.kind](old, out)
    write(m, op.dst, out if acc.is_integer else store_cast(acc, out))


def _to(acc: dt.DataType, exact: np.dtype, values: np.ndarray) -> np.ndarray:
    """Values converted to the accumulator (ints wrap), held exactly in `exact`."""
    return np.asarray(store_cast(acc, values)).astype(exact)


@rule(CumSum)
def cumsum(m, op: CumSum) -> None:
    """Sums in float64 (one rounding per stored element), int64 for integer tiles (as the GPU)."""
    wide = np.int64 if op.src.dtype.is_integer else np.float64
    src = read(m, op.src, squeeze=False).astype(wide)
    with np.errstate(all="ignore"):
        if op.reverse:
            out = np.flip(np.cumsum(np.flip(src, op.dim), axis=op.dim), op.dim)
        else:
            out = np.cumsum(src, axis=op.dim)
    narrow = op.dst.dtype.is_float and op.dst.dtype.name != "float64"
    write(m, op.dst, out.astype(np.float32) if narrow else out)
