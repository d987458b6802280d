"""The language's arithmetic on numpy values (docs/language.md, "Semantics"); the CUDA printer
(codegen/cuda/cexpr.py + math.cuh) implements the same rules.

- Integers compute in their exact dtype and wrap modulo 2^bits (numpy's integer arithmetic);
  sub-byte integers wrap to their width.
- `//` and `%` of integers are floor division and modulo (Python); `/` of integers truncates
  toward zero (C). MIN / -1 and MIN // -1 wrap to MIN.
- `//` of floats is floor(a / b) and `%` is a - floor(a / b) * b, each step rounded in the
  dtype (16-bit floats: in float32, rounded once at the end) (TVM's floordiv/floormod: not
  Python's fmod-based float modulo).
- `min` / `max` propagate NaN (numpy.maximum).
- Shifts by a count outside [0, bits): `<<` gives 0, `>>` gives 0 or -1 (the sign).

    int_value(-1, uint8) -> 255        floor_div(-7, 2) -> -4        trunc_div(-7, 2) -> -3
"""

from __future__ import annotations

import numpy as np

from tilecraft import dtypes as dt
from tilecraft.ir.expr import promote

from .minmax import maximum, minimum


def int_value(value: int, t: dt.DataType):
    """The integer constant `value` as a numpy scalar of `t`, wrapped to its width."""
    bits = t.bits
    v = int(value) & ((1 << bits) - 1)
    if t.kind == "int" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return np.asarray(v, dtype=np.dtype(t.np_dtype))[()]


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero, exact in the operands' dtype (no float64 detour)."""
    q = np.floor_divide(a, b)
    r = a - q * b
    fix = (r != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + np.ones((), q.dtype), q).astype(q.dtype, copy=False)


def _in_float32(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """16-bit floats compute `fn` in float32 and round once (no overflow of its steps)."""
    dt = np.result_type(a, b)
    if dt.itemsize >= 4:
        return fn(a, b)
    return fn(np.asarray(a, np.float32), np.asarray(b, np.float32)).astype(dt)


def float_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _in_float32(lambda x, y: np.floor(x / y), a, b)


def float_floormod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _in_float32(lambda x, y: x - np.floor(x / y) * y, a, b)


def arith(op: str, a: np.ndarray, b: np.ndarray, is_float: bool) -> np.ndarray:
    """`a op b` for operands already converted to the compute dtype (errors silenced by the
    caller; integer division by zero is the caller's to report)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if is_float else trunc_div(a, b)
    if op == "//":
        return float_floordiv(a, b) if is_float else np.floor_divide(a, b)
    if op == "%":
        return float_floormod(a, b) if is_float else np.mod(a, b)
    if op == "min":
        return minimum(a, b)
    if op == "max":
        return maximum(a, b)
    return {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
            "<<": np.left_shift, ">>": np.right_shift}[op](a, b)


_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
        "==": np.equal, "!=": np.not_equal}


def value_type(a: dt.DataType, b: dt.DataType) -> dt.DataType | None:
    """The integer type that holds every value of `a` and `b` (None for uint64 with a signed
    type: compared by `compare`'s sign test)."""
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    u, s = (a, b) if a.kind == "uint" else (b, a)
    if u.bits < s.bits:
        return s
    return dt.resolve("int64") if u.bits < 64 else None


def compare(op: str, a, b, ta: dt.DataType, tb: dt.DataType, compute) -> np.ndarray:
    """`a op b`. Mixed integer types compare by value (uint32 7 > int32 -1); otherwise both sides
    convert like arithmetic operands (`compute(dtype)` is the numpy type a dtype computes in)."""
    a, b = np.asarray(a), np.asarray(b)
    if not (ta.is_integer and tb.is_integer and ta != tb):
        t = compute(promote(ta, tb))
        return _CMP[op](a.astype(t, copy=False), b.astype(t, copy=False))
    vt = value_type(ta, tb)
    if vt is not None:
        t = compute(vt)
        return _CMP[op](a.astype(t, copy=False), b.astype(t, copy=False))
    signed, flip = (b, False) if ta.kind == "uint" else (a, True)
    u64 = np.dtype(np.uint64)
    by_bits = _CMP[op](a.astype(u64), b.astype(u64))
    # a negative signed side is below every unsigned value
    if_negative = {"<": flip, "<=": flip, ">": not flip, ">=": not flip, "==": False,
                   "!=": True}[op]
    return np.where(signed < 0, if_negative, by_bits)
