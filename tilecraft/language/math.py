"""Scalar math: intrinsics (exp2, rsqrt, ...), min/max, ceildiv, if_then_else, cast, infinity.

On Python numbers these compute at parse time (`T.ceildiv(1000, 128) == 8`); on device values
they build IR.
"""

from __future__ import annotations

import builtins
import math as _m

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import BinOp, Buffer, Call, Const, Expr, Select, as_expr
from tilecraft.ir import cast as _cast
from tilecraft.ir.expr import promote, wrap_int


def _is_py(x) -> bool:
    return isinstance(x, (int, float, bool))


def _val(x):
    return as_expr(x) if isinstance(x, Buffer) else x


def _unary(op: str, pyfn):
    def fn(x):
        from tilecraft.block import RegisterTensor

        if isinstance(x, RegisterTensor):  # the Tilus level: an element-wise instruction
            from .tilus import unary

            return unary(op, x)
        x = _val(x)
        if _is_py(x):
            return pyfn(x)
        x = as_expr(x)
        dtype = x.dtype if x.dtype.is_float else dt.float32
        return Call.create(op, (_cast(dtype, x),), dtype)

    fn.__name__ = op
    fn.__doc__ = f"`{op}(x)`, element-wise; float results (ints are converted to float32)."
    return fn


def _sigmoid(x):
    return 1.0 / (1.0 + _m.exp(-x))


exp = _unary("exp", _m.exp)
exp2 = _unary("exp2", lambda x: 2.0 ** x)
log = _unary("log", _m.log)
log2 = _unary("log2", _m.log2)
log10 = _unary("log10", _m.log10)
sqrt = _unary("sqrt", _m.sqrt)
rsqrt = _unary("rsqrt", lambda x: 1.0 / _m.sqrt(x))
tanh = _unary("tanh", _m.tanh)
sigmoid = _unary("sigmoid", _sigmoid)
sin = _unary("sin", _m.sin)
cos = _unary("cos", _m.cos)
tan = _unary("tan", _m.tan)
erf = _unary("erf", _m.erf)
floor = _unary("floor", _m.floor)
ceil = _unary("ceil", _m.ceil)
trunc = _unary("trunc", _m.trunc)
round = _unary("round", builtins.round)  # noqa: A001


def abs(x):  # noqa: A001
    """|x| (ints stay ints)."""
    x = _val(x)
    if _is_py(x):
        return builtins.abs(x)
    x = as_expr(x)
    return Call.create("abs", (x,), x.dtype)


def pow(x, y):  # noqa: A001
    """x ** y in floating point."""
    x, y = _val(x), _val(y)
    if _is_py(x) and _is_py(y):
        return x ** y
    t = promote(as_expr(x).dtype if isinstance(x, Expr) else dt.float32,
                as_expr(y).dtype if isinstance(y, Expr) else dt.float32)
    t = t if t.is_float else dt.float32
    return Call.create("pow", (_cast(t, x), _cast(t, y)), t)


def max(a, b, *rest):  # noqa: A001
    """The larger of two (or more) values."""
    out = _minmax("max", _val(a), _val(b))
    for r in rest:
        out = _minmax("max", out, _val(r))
    return out


def min(a, b, *rest):  # noqa: A001
    """The smaller of two (or more) values."""
    out = _minmax("min", _val(a), _val(b))
    for r in rest:
        out = _minmax("min", out, _val(r))
    return out


def _minmax(op, a, b):
    if _is_py(a) and _is_py(b):
        return builtins.max(a, b) if op == "max" else builtins.min(a, b)
    return BinOp.create(op, a, b)


def ceildiv(a, b):
    """(a + b - 1) // b for positive b."""
    a, b = _val(a), _val(b)
    if _is_py(a) and _is_py(b):
        return -(-a // b)
    return (a + b - 1) // b


def floordiv(a, b):
    return a // b


def floormod(a, b):
    return a % b


def if_then_else(cond, a, b):
    """`a` where `cond` holds, else `b` (both sides evaluated)."""
    cond = _val(cond)
    if _is_py(cond):
        return a if cond else b
    return Select.create(cond, _val(a), _val(b))


def cast(value, dtype, layout=None):
    """Convert `value` to `dtype` (accepts `T.cast(x, "float16")` and `T.cast("float16", x)`).
    `layout`: for a register tensor only, the result's layout (T.cast_register)."""
    if isinstance(value, str) and not isinstance(dtype, str):
        value, dtype = dtype, value
    from tilecraft.block import RegisterTensor
    from tilecraft.ir import Buffer

    if isinstance(value, Buffer) and value.scope == "fragment":  # a fragment with a layout
        from .tilus import as_register

        value = as_register(value, "cast")
    if isinstance(value, RegisterTensor):  # the Tilus level: a register tensor of another dtype
        from .tilus import cast_register

        return cast_register(value, dtype, layout)
    if layout is not None:
        from tilecraft.diagnostics import current_span

        raise TilecraftError("TC603", current_span(), instr="cast",
                             detail="`layout=` is for register tensors (T.load_shared, T.view, "
                             "...); a scalar or tile expression has no register layout")
    value, t = _val(value), dt.resolve(dtype)
    if isinstance(value, int) and not isinstance(value, bool) and t.is_integer:
        return Const.create(wrap_int(value, t), t)  # an explicit conversion wraps, as in C
    return _cast(t, value)


Cast = cast


def infinity(dtype="float32"):
    """+inf of a float dtype (negate it for -inf)."""
    t = dt.resolve(dtype)
    if not t.is_float:
        raise TilecraftError("TC108", detail=f"T.infinity({t}) of a non-float type", hint="")
    return Const.create(float("inf"), t)


def max_value(dtype):
    """The largest finite value of `dtype`."""
    t = dt.resolve(dtype)
    return Const.create(t.max, t)


def min_value(dtype):
    """The smallest finite value of `dtype`."""
    t = dt.resolve(dtype)
    return Const.create(t.min, t)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def fma(a, b, c):
    """a * b + c rounded once (a fused multiply-add: CUDA's fma / fmaf / __hfma) in the dtype of
    `a * b + c`; on integers that expression (exact, wrapping); on register tensors one
    element-wise instruction (Tilus level)."""
    from tilecraft.block import RegisterTensor
    from tilecraft.block.compute import fused_fma

    if any(isinstance(x, RegisterTensor) for x in (a, b, c)):
        from .tilus import fma as register_fma

        return register_fma(a, b, c)
    a, b, c = _val(a), _val(b), _val(c)
    if _is_py(a) and _is_py(b) and _is_py(c):
        return a * b + c
    return fused_fma(a, b, c)
