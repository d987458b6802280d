"""Scalar expressions shared by every IR level.

Expressions are frozen dataclasses with structural equality. Variables carry a unique id so two
loops that both call their index `i` stay distinct. Python numbers mixed into an expression are
weakly typed: `x * 0.5` keeps the dtype of a float16 `x`, like CUDA code written by hand would.

    i = Var.create("i")                      # int32
    e = (i * 4 + 2).dtype                    # int32
    BinOp.create("+", Const.create(1), Const.create(2))  ->  Const(3)   (folded)
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from tilecraft import dtypes as dt
from tilecraft.diagnostics import Span, TilecraftError, current_span

if TYPE_CHECKING:
    from .buffer import Buffer

_uid = itertools.count(1)

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "&", "|", "^", "<<", ">>", "and", "or")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")

_PY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "min": min, "max": max, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}


class Expr:
    """Base of scalar expressions. Operators build IR (except `==`, which is structural)."""

    dtype: dt.DataType

    def __add__(self, o): return BinOp.create("+", self, o)
    def __radd__(self, o): return BinOp.create("+", o, self)
    def __sub__(self, o): return BinOp.create("-", self, o)
    def __rsub__(self, o): return BinOp.create("-", o, self)
    def __mul__(self, o): return BinOp.create("*", self, o)
    def __rmul__(self, o): return BinOp.create("*", o, self)
    def __truediv__(self, o): return BinOp.create("/", self, o)
    def __rtruediv__(self, o): return BinOp.create("/", o, self)
    def __floordiv__(self, o): return BinOp.create("//", self, o)
    def __rfloordiv__(self, o): return BinOp.create("//", o, self)
    def __mod__(self, o): return BinOp.create("%", self, o)
    def __rmod__(self, o): return BinOp.create("%", o, self)
    def __neg__(self): return BinOp.create("-", Const.create(0, self.dtype), self)
    def __lt__(self, o): return Compare.create("<", self, o)
    def __le__(self, o): return Compare.create("<=", self, o)
    def __gt__(self, o): return Compare.create(">", self, o)
    def __ge__(self, o): return Compare.create(">=", self, o)

    def __bool__(self):
        raise TilecraftError("TC109", detail=f"`{self}` is only known on the device", hint="")

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)


def _weak_dtype(value) -> dt.DataType:
    if isinstance(value, bool):
        return dt.boolean
    if isinstance(value, int):
        return dt.int32 if -(2**31) <= value < 2**31 else dt.int64
    return dt.float32


def as_expr(value, like: dt.DataType | None = None) -> Expr:
    """Turn a Python number (typed after `like` when given) or an Expr into an Expr."""
    if isinstance(value, Expr):
        return value
    from .buffer import Buffer

    if isinstance(value, Buffer):
        if value.scope == "var":
            return BufferLoad.create(value, (Const.create(0),))
        raise TilecraftError("TC108", detail=f"buffer `{value.name}` used as a scalar value",
                             hint=f"index it: `{value.name}[i, ...]`")
    if isinstance(value, (bool, int, float)):
        if like is not None and not isinstance(value, bool):
            if like.is_float or (like.kind in ("int", "uint") and isinstance(value, int)):
                if not like.is_float and not like.min <= value <= like.max:
                    if like.name == "int32" and -(2**63) <= value < 2**63:
                        return Const.create(value, dt.int64)  # index arithmetic past 2^31
                    raise TilecraftError("TC118", value=value, dtype=like, wider=_holding(value))
                return Const.create(value, like)
        return Const.create(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return as_expr(value.item(), like)
    raise TilecraftError("TC108", detail=f"cannot use {type(value).__name__} `{value!r}` as a value",
                         hint="kernels compute on numbers, buffer elements and T.* expressions")


def _holding(value: int) -> str:
    """A standard integer type that holds `value` (for TC118's hint)."""
    for name in ("int32", "int64", "uint64"):
        t = dt.resolve(name)
        if t.min <= value <= t.max:
            return name
    return "int64"


def wrap_int(value, dtype: dt.DataType):
    """An integer `value` wrapped modulo 2^bits into `dtype`'s range (integer arithmetic wraps,
    docs/language.md); other values and types unchanged."""
    if dtype.kind not in ("int", "uint") or isinstance(value, bool) or not isinstance(value, int):
        return value
    value &= (1 << dtype.bits) - 1
    return value - (1 << dtype.bits) if dtype.kind == "int" and value > dtype.max else value


def promote(a: dt.DataType, b: dt.DataType) -> dt.DataType:
    """The dtype of a binary operation on `a` and `b` (C-like, without int->float surprises)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.kind == "bool":
        return b
    if b.kind == "bool":
        return a
    return a if a.bits >= b.bits else b


@dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool
    dtype: dt.DataType

    @classmethod
    def create(cls, value, dtype=None) -> "Const":
        dtype = dt.resolve(dtype) if dtype is not None else _weak_dtype(value)
        if dtype.kind == "bool":
            value = bool(value)
        elif dtype.is_float:
            value = float(value)
        else:
            if isinstance(value, float) and not value.is_integer():
                raise TilecraftError("TC108", detail=f"{value} is not an integer ({dtype})", hint="")
            value = int(value)
        return cls(value, dtype)


@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: dt.DataType
    uid: int = field(default=0)
    span: Span | None = field(default=None, compare=False)

    @classmethod
    def create(cls, name: str, dtype="int32", span: Span | None = None) -> "Var":
        return cls(name, dt.resolve(dtype), next(_uid), span or current_span())

    def __str__(self) -> str:
        return self.name


def _fold(op: str, a, b, bits: int = 64):
    if op in ("<<", ">>") and not 0 <= b < bits:  # a count outside the type: 0, or the sign
        return 0 if op == "<<" or a >= 0 else -1
    if op == "/":
        if isinstance(a, float) or isinstance(b, float):
            return a / b
        return int(a / b) if b else None  # integer division truncates, as in C
    if op in ("//", "%") and b == 0:
        return None
    if op == "and":
        return bool(a) and bool(b)
    if op == "or":
        return bool(a) or bool(b)
    return _PY[op](a, b)


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: dt.DataType

    @classmethod
    def create(cls, op: str, a, b) -> Expr:
        assert op in ARITH_OPS, op
        a_t = a.dtype if isinstance(a, Expr) else None
        b_t = b.dtype if isinstance(b, Expr) else None
        a, b = as_expr(a, b_t), as_expr(b, a_t)
        dtype = dt.boolean if op in ("and", "or") else promote(a.dtype, b.dtype)
        if isinstance(a, Const) and isinstance(b, Const):
            folded = _fold(op, a.value, b.value, dtype.bits)
            if folded is not None:
                return Const.create(wrap_int(folded, dtype), dtype)
        simple = _identity(op, a, b)
        if simple is not None and simple.dtype == dtype:
            return simple
        return cls(op, a, b, dtype)


def _identity(op: str, a: Expr, b: Expr) -> Expr | None:
    """x+0, x*1, x*0 (ints), x//1: keep the IR small without a full simplifier."""
    def is_c(e, v):
        return isinstance(e, Const) and e.value == v

    if op == "+":
        return a if is_c(b, 0) else b if is_c(a, 0) else None
    if op == "-":
        return a if is_c(b, 0) else None
    if op == "*":
        if is_c(b, 1):
            return a
        if is_c(a, 1):
            return b
        if not a.dtype.is_float and (is_c(a, 0) or is_c(b, 0)):
            return Const.create(0, promote(a.dtype, b.dtype))
    if op in ("//", "/") and is_c(b, 1) and not a.dtype.is_float:
        return a
    return None


@dataclass(frozen=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: dt.DataType = dt.boolean

    @classmethod
    def create(cls, op: str, a, b) -> Expr:
        assert op in COMPARE_OPS, op
        a_t = a.dtype if isinstance(a, Expr) else None
        b_t = b.dtype if isinstance(b, Expr) else None
        a, b = as_expr(a, b_t), as_expr(b, a_t)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const.create(_PY[op](a.value, b.value), dt.boolean)
        return cls(op, a, b)


@dataclass(frozen=True)
class Not(Expr):
    a: Expr
    dtype: dt.DataType = dt.boolean

    @classmethod
    def create(cls, a) -> Expr:
        a = as_expr(a)
        if isinstance(a, Const):
            return Const.create(not a.value, dt.boolean)
        return cls(a)


@dataclass(frozen=True)
class Select(Expr):
    """`cond ? a : b` (T.if_then_else)."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: dt.DataType

    @classmethod
    def create(cls, cond, a, b) -> Expr:
        cond = as_expr(cond)
        a_t = a.dtype if isinstance(a, Expr) else None
        b_t = b.dtype if isinstance(b, Expr) else None
        a, b = as_expr(a, b_t), as_expr(b, a_t)
        dtype = promote(a.dtype, b.dtype)
        if isinstance(cond, Const):
            return cast(dtype, a if cond.value else b)
        return cls(cond, cast(dtype, a), cast(dtype, b), dtype)


@dataclass(frozen=True)
class Cast(Expr):
    value: Expr
    dtype: dt.DataType


def cast(dtype, value) -> Expr:
    """Convert `value` to `dtype` (a no-op when it already has it; constants fold)."""
    dtype = dt.resolve(dtype)
    value = as_expr(value, dtype)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const):
        v = value.value
        if dtype.kind in ("int", "uint") and isinstance(v, float):
            if math.isinf(v) or math.isnan(v) or not dtype.min <= int(v) <= dtype.max:
                return Cast(value, dtype)  # out of range: what the conversion does at run time
            v = int(v)
        return Const.create(wrap_int(v, dtype), dtype)
    return Cast(value, dtype)


@dataclass(frozen=True)
class Call(Expr):
    """An intrinsic (`exp2`, `rsqrt`, ...) or an extern function call."""

    op: str
    args: tuple[Expr, ...]
    dtype: dt.DataType

    @classmethod
    def create(cls, op: str, args, dtype) -> "Call":
        return cls(op, tuple(as_expr(a) for a in args), dt.resolve(dtype))


@dataclass(frozen=True)
class BufferLoad(Expr):
    buffer: "Buffer"
    indices: tuple[Expr, ...]
    dtype: dt.DataType = field(default=None)  # type: ignore[assignment]

    @classmethod
    def create(cls, buffer: "Buffer", indices) -> "BufferLoad":
        return cls(buffer, tuple(as_expr(i) for i in indices), buffer.dtype)


ExprLike = Union[Expr, int, float, bool]


def const_value(e) -> int | float | bool | None:
    """The Python value of a constant expression (or number), else None."""
    if isinstance(e, (bool, int, float)):
        return e
    if isinstance(e, Const):
        return e.value
    return None


def const_int(e) -> int | None:
    v = const_value(e)
    return int(v) if isinstance(v, (int, bool)) or (isinstance(v, float) and v.is_integer()) else None
