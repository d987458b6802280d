"""Expression evaluation on numpy values (0-d for scalar code, broadcast arrays in T.Parallel)."""

from __future__ import annotations

import math

import numpy as np

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (
    BinOp,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Not,
    Select,
    Var,
)

from .arith import arith, compare, int_value
from .values import np_type, store_cast

_erf = np.vectorize(math.erf, otypes=[np.float64])

_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "erf": _erf, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint,
}


def fused_multiply_add(a, b, c, dtype: dt.DataType) -> np.ndarray:
    """a * b + c rounded once to `dtype`, as the GPU's fmaf / fma / __hfma (fp8 and custom
    floats: fmaf, whose float32 result their store rounds, as their arithmetic does). The
    product is exact in float64 and the sum is rounded to odd there (TwoSum's error nudges an
    even result one ulp toward it), then to float32 by round-to-nearest (53 >= 24 + 2 bits:
    correct), or for f16 and bf16 to odd once more at 24 bits, which their store then rounds
    correctly (24 >= 11 + 2). float64: exactly, by fractions (the product needs 106 bits)."""
    from fractions import Fraction

    if dtype.name == "float64":
        def exact(x, y, z):
            if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
                return x * y + z
            v = Fraction(x) * Fraction(y) + Fraction(z)
            if v == 0:  # IEEE's sign: negative only for a negative zero product plus -0
                return -0.0 if math.copysign(1, x * y) < 0 and math.copysign(1, z) < 0 \
                    and x * y == 0 else 0.0
            try:
                return float(v)  # (rounded to nearest even)
            except OverflowError:
                return math.inf if v > 0 else -math.inf

        r = np.frompyfunc(exact, 3, 1)(np.float64(a), np.float64(b), np.float64(c))
        return np.asarray(r, dtype=np.float64)
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        p = a * b
        s = _to_odd(p + c, (p - ((p + c) - ((p + c) - p))) + (c - ((p + c) - p)))
        r = s.astype(np.float32)
        if dtype.name in ("float16", "bfloat16"):  # to odd at 24 bits as well
            r = _to_odd(r, s - r.astype(np.float64))
    return r


def _to_odd(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """`s` (a rounding of s + err, |err| below its ulp) rounded to odd instead: an even `s`
    with err != 0 moves one ulp toward err."""
    bits = np.int64 if s.dtype == np.float64 else np.int32
    even = (np.asarray(s).view(bits) & 1) == 0
    toward = np.where(err > 0, np.inf, -np.inf).astype(s.dtype)
    return np.where(np.isfinite(s) & (err != 0) & even, np.nextafter(s, toward), s)


def compute_type(t: dt.DataType) -> np.dtype:
    """Arithmetic happens in the IR dtype; sub-byte and 8-bit floats compute in float32."""
    if t.is_float and (not t.is_standard or t.bits <= 8):
        return np.dtype(np.float32)
    return np_type(t)


class Evaluator:
    def __init__(self, machine):
        self.m = machine
        self.lenient = 0  # >0 inside if_then_else: out-of-range loads read 0 (the branch is unused)

    def scalar(self, e):
        v = self.eval(e) if isinstance(e, Expr) else e
        if np.ndim(v) != 0:
            raise TilecraftError("TC108", detail=f"`{e}` varies per element here", hint="")
        return v.item() if hasattr(v, "item") else v

    def eval(self, e: Expr):
        if isinstance(e, Const):
            t = compute_type(e.dtype)
            if e.dtype.is_integer:  # wrapped to the type's width, like the C literal's value
                return int_value(e.value, e.dtype)
            if e.dtype.is_float and (not e.dtype.is_standard or t != np_type(e.dtype)):
                return np.asarray(store_cast(e.dtype, np.float64(e.value))).astype(t)[()]
            return np.asarray(e.value, dtype=t)[()]
        if isinstance(e, Var):
            try:
                v = self.m.env[e]
            except KeyError:
                raise TilecraftError("TC403", detail=f"variable `{e.name}` has no value here",
                                     hint="") from None
            if type(v).__name__ == "_ThreadVar":
                raise TilecraftError("TC403", detail="thread indices (T.get_thread_binding)",
                                     hint="write the computation with T.Parallel and tile ops")
            return v
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Compare):
            return compare(e.op, self.eval(e.a), self.eval(e.b), e.a.dtype, e.b.dtype,
                           compute_type)
        if isinstance(e, Not):
            return np.logical_not(self.eval(e.a))
        if isinstance(e, Select):
            c = self.eval(e.cond)
            self.lenient += 1
            try:
                a, b = self.eval(e.a), self.eval(e.b)
            finally:
                self.lenient -= 1
            return np.where(c, a, b).astype(compute_type(e.dtype))
        if isinstance(e, Cast):
            v = self.eval(e.value)
            return store_cast(e.dtype, v).astype(compute_type(e.dtype))
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, BufferLoad):
            return self.load(e)
        raise TilecraftError("TC403", detail=type(e).__name__, hint="")

    def binop(self, e: BinOp):
        a, b = self.eval(e.a), self.eval(e.b)
        t = compute_type(e.dtype)
        op = e.op
        if op in ("and", "or"):
            return (np.logical_and if op == "and" else np.logical_or)(a, b)
        a, b = np.asarray(a).astype(t, copy=False), np.asarray(b).astype(t, copy=False)
        if op in ("/", "//", "%") and not e.dtype.is_float:
            b = self._nonzero_divisor(e, b)
        with np.errstate(all="ignore"):
            r = np.asarray(arith(op, a, b, e.dtype.is_float))
        if not e.dtype.is_standard or np.dtype(t) != np_type(e.dtype):
            r = store_cast(e.dtype, r)  # fp8 and sub-byte floats round, sub-byte ints wrap
        return r.astype(t, copy=False)[()] if r.ndim == 0 else r.astype(t, copy=False)

    def _nonzero_divisor(self, e: BinOp, b: np.ndarray) -> np.ndarray:
        """Integer division by zero is an error (TC410; undefined on the GPU), reported where
        it happens: not in elements masked off by an `if`, nor in the unused side of
        T.if_then_else. Returns `b` with zeros replaced (those results are never used)."""
        zero = b == 0
        if not np.any(zero):
            return b
        hit = zero if self.m.mask is None else zero & self.m.mask
        if not self.lenient and np.any(hit):
            raise TilecraftError("TC410", expr=str(e), detail=f"at block {self.m.block_index}")
        return np.where(zero, np.ones((), b.dtype), b)

    def call(self, e: Call):
        if e.op == "cluster_sync":  # (T.cluster_sync: block level, language/cluster.py)
            self.m.cluster_run.sync(self.m.rank)
            return np.int32(0)
        if e.op == "remote_load":
            return self.remote_load(e)
        args = [self.eval(a) for a in e.args]
        t = compute_type(e.dtype)
        if e.op == "abs":  # (a sub-byte int wraps like the GPU's: abs(int4 -8) is -8)
            r = np.abs(args[0])
            return store_cast(e.dtype, r) if e.dtype.is_integer and not e.dtype.is_standard else r
        if e.op == "fma":
            r = fused_multiply_add(*args, e.dtype)
            return np.asarray(store_cast(e.dtype, r)).astype(t)
        ft = np.float64 if e.dtype.name == "float64" else np.float32  # as the GPU computes
        if e.op == "pow":
            with np.errstate(all="ignore"):
                r = np.power(np.asarray(args[0], ft), np.asarray(args[1], ft))
            return store_cast(e.dtype, r).astype(t)
        fn = _UNARY.get(e.op)
        if fn is None:
            raise TilecraftError("TC403", detail=f"call to `{e.op}`",
                                 hint="extern calls run only on the GPU")
        with np.errstate(all="ignore"):
            r = fn(np.asarray(args[0], dtype=ft))
        return np.asarray(store_cast(e.dtype, r)).astype(t)

    def remote_load(self, e: Call):
        """`T.remote(buf, rank)[idx]`: the rank and the indices evaluated here (the reader's
        memory), the element read from block rank's `buf`; elements an enclosing `if` masks off
        read nothing (0), and so do the unused side of T.if_then_else's bad ranks."""
        from .cluster import read_remote

        load = e.args[1]
        if not isinstance(load, BufferLoad) or load.buffer.scope != "shared":
            raise TilecraftError("TC403", detail=f"T.remote of `{load}`, which is no shared "
                                 "buffer element here", hint="a compiler pass moved it")
        rank = np.asarray(self.eval(e.args[0]))
        idx = [np.asarray(self.eval(i)) for i in load.indices]
        return read_remote(self.m, load.buffer, rank, idx, compute_type(load.buffer.dtype),
                           self.lenient)

    def load(self, e: BufferLoad):
        buf = e.buffer
        arr = self.m.buffers.get(buf)
        if arr is None:
            raise TilecraftError("TC403", detail=f"buffer `{buf.name}` used before allocation",
                                 hint="")
        idx = [self.eval(i) for i in e.indices]
        if all(np.ndim(i) == 0 for i in idx):
            ix = tuple(int(i) for i in idx)
            if self.lenient and not _inside(ix, arr.shape):
                return np.zeros((), arr.dtype)[()].astype(compute_type(buf.dtype))
            self.check_bounds(buf, ix)
            v = arr[ix]
        else:
            idx = np.broadcast_arrays(*idx)
            if self.lenient:
                ok = np.ones(idx[0].shape, bool)
                for i, n in zip(idx, arr.shape):
                    ok &= (i >= 0) & (i < n)
                clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, arr.shape))
                v = np.where(ok, arr[clipped], np.zeros((), arr.dtype))
            else:
                mask = self.m.mask
                if mask is not None:
                    *idx, active = np.broadcast_arrays(*idx, mask)
                    self.check_bounds(buf, tuple(i[active] for i in idx))
                else:
                    self.check_bounds(buf, tuple(idx))
                clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, arr.shape))
                v = arr[clipped]
        return np.asarray(v).astype(compute_type(buf.dtype), copy=False)[()] if np.ndim(v) == 0 \
            else np.asarray(v).astype(compute_type(buf.dtype), copy=False)

    def check_bounds(self, buf: Buffer, idx) -> None:
        arr = self.m.buffers[buf]
        for d, (i, n) in enumerate(zip(idx, arr.shape)):
            i = np.asarray(i)
            if i.size and (i.min() < 0 or i.max() >= n):
                bad = int(i.min()) if i.min() < 0 else int(i.max())
                raise TilecraftError("TC401", buffer=buf.name, shape=list(arr.shape),
                                     detail=f"index {bad} in dimension {d} (size {n}) at block "
                                     f"{self.m.block_index}")


def _inside(ix, shape) -> bool:
    return all(0 <= i < n for i, n in zip(ix, shape))
