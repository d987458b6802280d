"""Model values: a value per element, an absolute error bound and a don't-care mask.

`V(t, v, e, dc)`: `v` is the exact result of the operations (Python ints, object arrays, for
integer types; float64 for floats; bool for conditions), `e` bounds how far any correct
execution may be from `v` (float rounding: each float operation may round once, at most a unit
roundoff), and `dc` marks elements whose value the semantics do not pin down within that bound
(a comparison of two floats closer than their error, a possible float overflow, a truncation
near an integer). Integer results are exact: e = 0, and they wrap at every operation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as D


def _obj(x) -> np.ndarray:
    return np.asarray(x, dtype=object)


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@dataclass
class V:
    t: D.DType
    v: np.ndarray
    e: np.ndarray
    dc: np.ndarray

    @property
    def shape(self):
        return np.broadcast_shapes(np.shape(self.v), np.shape(self.e), np.shape(self.dc))

    def full(self, shape) -> "V":
        def b(x):
            return np.broadcast_to(x, shape).copy()
        return V(self.t, b(self.v), b(self.e), b(self.dc))

    def __getitem__(self, idx) -> "V":
        w = self.full(self.shape)
        return V(self.t, w.v[idx], w.e[idx], w.dc[idx])


def exact(values, t: D.DType) -> V:
    """Values known exactly (loads of inputs, constants)."""
    v = _f(values) if t.is_float else (np.asarray(values, bool) if t is D.BOOL else _obj(values))
    return V(t, v, np.zeros(np.shape(v)), np.zeros(np.shape(v), bool))


def _float_result(t: D.DType, r, e, dc) -> V:
    r, e = _f(r), _f(e)
    with np.errstate(all="ignore"):
        dc = dc | ~np.isfinite(r) | ~np.isfinite(e) | (np.abs(r) + e > t.fmax)
    return V(t, np.where(np.isfinite(r), r, 0.0), np.where(np.isfinite(e), e, 0.0), dc)


def _truncdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_tdiv = np.frompyfunc(_truncdiv, 2, 1)
# shifts by a count outside [0, bits): x << n is 0, x >> n is 0 or -1 (the sign)
_shl = np.frompyfunc(lambda a, n, bits: a << n if 0 <= n < bits else 0, 3, 1)
_shr = np.frompyfunc(lambda a, n, bits: a >> n if 0 <= n < bits else (-1 if a < 0 else 0), 3, 1)


def binop(op: str, a: V, b: V) -> V:
    t = a.t
    assert a.t == b.t, (op, a.t, b.t)
    dc = a.dc | b.dc
    if not t.is_float:
        x, y = a.v, b.v
        if op in ("//", "%", "/"):  # never generated; a shrunk program may divide by zero
            zero = np.asarray(y == 0, dtype=bool)
            dc = dc | zero
            y = np.where(zero, 1, y) if zero.any() else y
        r = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
             "//": lambda: np.floor_divide(x, y), "%": lambda: np.mod(x, y),
             "/": lambda: _tdiv(x, y), "min": lambda: np.minimum(x, y),
             "max": lambda: np.maximum(x, y), "&": lambda: x & y, "|": lambda: x | y,
             "^": lambda: x ^ y, "<<": lambda: _shl(x, y, t.bits),
             ">>": lambda: _shr(x, y, t.bits)}[op]()
        r = _obj(D.wrap(_obj(r), t))
        return V(t, r, np.zeros(np.shape(r)), np.broadcast_to(dc, np.shape(r)) | False)
    x, y, ex, ey, u = a.v, b.v, a.e, b.e, t.u
    with np.errstate(all="ignore"):
        if op in ("+", "-"):
            r = x + y if op == "+" else x - y
            e = ex + ey + u * np.abs(r) + t.tiny
        elif op == "*":
            r = x * y
            e = np.abs(x) * ey + np.abs(y) * ex + ex * ey + u * np.abs(r) + t.tiny
        elif op in ("min", "max"):
            r = np.minimum(x, y) if op == "min" else np.maximum(x, y)
            e = np.maximum(ex, ey)
        else:  # / // %: the divisor is guarded away from zero by construction
            den = np.abs(y) - ey
            dc = dc | (den <= 0)
            den = np.where(den > 0, den, 1.0)
            q = x / y
            eq = (ex + np.abs(q) * ey) / den + 2 * u * np.abs(q) + t.tiny
            if op == "/":
                r, e = q, eq
            else:
                fq = np.floor(q)
                dc = dc | (np.floor(q - eq) != np.floor(q + eq)) | (np.abs(fq) > 2.0 ** t.prec)
                if op == "//":
                    r, e = fq, np.zeros(np.shape(fq))
                else:
                    r = x - fq * y
                    e = ex + np.abs(fq) * ey + 2 * u * (np.abs(x) + np.abs(r)) + t.tiny
    return _float_result(t, r, e, dc)


def fma(a: V, b: V, c: V) -> V:
    """T.fma: a * b + c rounded once (floats); on integers the wrapped a * b + c."""
    if not a.t.is_float:
        return binop("+", binop("*", a, b), c)
    assert a.t == b.t == c.t
    t, x, y, z = a.t, a.v, b.v, c.v
    with np.errstate(all="ignore"):
        r = x * y + z
        e = np.abs(x) * b.e + np.abs(y) * a.e + a.e * b.e + c.e + t.u * np.abs(r) + t.tiny
    return _float_result(t, r, e, a.dc | b.dc | c.dc)


def unary(op: str, a: V) -> V:
    if a.t.is_float:
        r = -a.v if op == "neg" else np.abs(a.v)
        return V(a.t, _f(r), a.e, a.dc)
    r = -a.v if op == "neg" else np.abs(a.v)
    return V(a.t, _obj(D.wrap(_obj(r), a.t)), a.e, a.dc)


def compare(op: str, a: V, b: V) -> V:
    """Same types, or two integer types (compared by value, not by C's conversions)."""
    assert a.t == b.t or not (a.t.is_float or b.t.is_float), (op, a.t, b.t)
    fn = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
          "==": np.equal, "!=": np.not_equal}[op]
    r = np.asarray(fn(a.v, b.v), dtype=bool)
    dc = a.dc | b.dc
    if a.t.is_float:
        m = a.e + b.e
        dc = dc | ((np.abs(a.v - b.v) <= m) & (m > 0))
    return V(D.BOOL, r, np.zeros(np.shape(r)), np.broadcast_to(dc, np.shape(r)) | False)


def logic(op: str, a: V, b: V | None = None) -> V:
    if op == "not":
        return V(D.BOOL, ~a.v, a.e, a.dc)
    r = (a.v & b.v) if op == "and" else (a.v | b.v)
    return V(D.BOOL, np.asarray(r, bool), np.zeros(np.shape(r)), a.dc | b.dc)


def select(c: V, a: V, b: V) -> V:
    assert a.t == b.t
    v = np.where(c.v, a.v, b.v)
    v = _obj(v) if not a.t.is_float and a.t is not D.BOOL else v
    return V(a.t, v, _f(np.where(c.v, a.e, b.e)), np.where(c.v, a.dc, b.dc) | c.dc)


def where(mask, new: V, old: V) -> V:
    """Masked update (stores under an element-wise `if`); `mask` is a plain bool array."""
    return select(V(D.BOOL, mask, 0.0, False), new, old)


def cast(a: V, t: D.DType) -> V:
    """Conversion (also what every store does): rounding, truncation, wrapping."""
    s = a.t
    if t is s:
        return a
    if t is D.BOOL:
        return V(t, np.asarray(a.v != 0, bool), np.zeros(np.shape(a.v)), a.dc)
    if s is D.BOOL:
        r = cast(exact(np.where(a.v, 1, 0), D.ALL["int32"]), t)
        return V(t, r.v, r.e, a.dc | r.dc)
    if t.is_float and s.is_float:
        rv = D.round_float(a.v, t)
        with np.errstate(all="ignore"):
            up = D.round_float(a.v + a.e, t) - rv
            down = rv - D.round_float(a.v - a.e, t)
            e = np.where(a.e > 0, np.maximum(up, down), 0.0)
            dc = a.dc | ~np.isfinite(e) | (~np.isfinite(rv) & (a.e > 0))
        return V(t, rv, np.where(np.isfinite(e), e, 0.0), dc)
    if t.is_float:
        return V(t, D.int_to_float(a.v, t), np.zeros(np.shape(a.v)), a.dc)
    if s.is_float:
        iv = D.float_to_int(a.v, t)
        lo, hi = D.float_to_int(a.v - a.e, t), D.float_to_int(a.v + a.e, t)
        dc = a.dc | np.asarray(lo != hi, bool)
        return V(t, iv, np.zeros(np.shape(iv)), dc)
    r = _obj(D.wrap(_obj(a.v), t))
    return V(t, r, np.zeros(np.shape(r)), a.dc)
