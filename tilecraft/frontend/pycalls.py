"""Python built-ins, `math` functions and the `**` / `@` operators inside a kernel.

On Python values they run as Python, when the kernel is built. On device values (and
buffers), the ones with a tile-language equivalent become it; the others are TC117 at the
user's line, naming what to write instead:

    abs(x), math.fabs(x)          -> T.abs(x)
    min(a, b), max(a, b)          -> T.min, T.max
    x ** y, pow(x, y)             -> x * x / x * x * x for float x and y = 2 or 3; repeated
                                     multiplication for an integer x and a constant y >= 0;
                                     T.pow(x, y) (in floating point) otherwise
    round(x)                      -> T.round(x): ties to even, as Python; the result keeps x's
                                     float type (an integer x is returned unchanged)
    math.sqrt/exp/exp2/log/log2/log10/sin/cos/tan/tanh/erf/floor/ceil/trunc/pow -> T.*
    int(x), float(x), bool(x)     -> casts to int32, float32, bool
    print(x) -> T.print;  x @ y -> T.gemm;  sum, divmod, any, all, other math.* -> TC117
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, Const, Expr, as_expr, cast

NOT_HANDLED = object()  # python_call's answer for a function this module does not map

_MATH = {"sqrt", "exp", "exp2", "log2", "log10", "sin", "cos", "tan", "tanh", "erf", "floor",
         "ceil", "trunc"}
_REFUSED = {
    "print": "T.print(x, msg) prints a scalar or a tile from the device; print(...) of Python "
             "values runs once, when the kernel is built",
    "sum": "add the values with `+`, or reduce a tile with T.reduce_sum",
    "divmod": "use `//` and `%`",
    "len": "a buffer's dimensions are `buf.shape` (`buf.shape[0]` is its first)",
    "any": "combine device conditions with `or`",
    "all": "combine device conditions with `and`",
    "math.isnan": "`x != x` holds exactly for NaN",
    "math.isinf": "compare with T.infinity(dtype): `T.abs(x) == T.infinity(\"float32\")`",
    "math.isfinite": "`T.abs(x) < T.infinity(dtype)` (NaN compares false)",
}
_GENERIC = ("compute with the tile language's operators and T.* math functions "
            "(tilecraft.language); T.call_extern(dtype, \"name\", *args) calls a CUDA function")


def _python_names() -> dict[int, str]:
    names = {id(getattr(math, n)): f"math.{n}" for n in dir(math)
             if callable(getattr(math, n)) and not n.startswith("_")}
    for n in ("abs", "min", "max", "pow", "round", "int", "float", "bool", "print", "sum",
              "divmod", "any", "all", "sorted", "hash", "complex", "chr", "ord", "hex", "oct",
              "bin", "len"):
        names[id(getattr(builtins, n))] = n
    return names


_NAMES = _python_names()


def is_device(v) -> bool:
    """A device value or a buffer (something Python's functions cannot compute on)."""
    return isinstance(v, (Expr, Buffer))


def _value(v):
    return as_expr(v) if isinstance(v, Buffer) and v.scope == "var" else v


def _tm():
    from tilecraft.language import math as tm

    return tm


def refuse(func: str, instead: str) -> TilecraftError:
    return TilecraftError("TC117", func=func, instead=instead)


def python_call(fn: Callable, args: list, kwargs: dict):
    """`fn(*args, **kwargs)` for a Python built-in or `math` function given a device value;
    NOT_HANDLED for any other call (and for calls on Python values only)."""
    name = _NAMES.get(id(fn)) if callable(fn) else None
    if name is None or not any(is_device(a) for a in (*args, *kwargs.values())):
        if name in ("min", "max") and len(args) == 1 and isinstance(args[0], (list, tuple)) \
                and any(is_device(a) for a in args[0]):
            return python_call(fn, list(args[0]), kwargs)  # max([a, b]) is max(a, b)
        return NOT_HANDLED
    if any(isinstance(a, Buffer) and a.scope != "var" for a in (*args, *kwargs.values())):
        buf = next(a for a in (*args, *kwargs.values()) if isinstance(a, Buffer))
        raise refuse(name, _REFUSED.get(name, f"apply it to elements (`{buf.name}[i, j]`) "
                                        "inside T.Parallel, or use a tile op (T.reduce_*, "
                                        "T.copy, T.fill)"))
    args = [_value(a) for a in args]
    if name in _REFUSED:
        raise refuse(name, _REFUSED[name])
    if kwargs:
        raise refuse(name, "keyword arguments are Python-only here; " + _GENERIC)
    tm = _tm()
    if name.startswith("math.") and name[5:] in _MATH and len(args) == 1:
        return getattr(tm, name[5:])(args[0])
    if name in ("abs", "math.fabs") and len(args) == 1:
        return tm.abs(args[0]) if name == "abs" else tm.abs(cast("float32", args[0])
                                                             if not _is_float(args[0]) else args[0])
    if name in ("min", "max"):
        vals = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        if len(vals) >= 2:
            return (tm.min if name == "min" else tm.max)(*[_value(v) for v in vals])
    if name == "pow" and len(args) == 2:
        return power(args[0], args[1])
    if name == "math.pow" and len(args) == 2:
        return tm.pow(args[0], args[1])
    if name == "math.log" and len(args) in (1, 2):
        return tm.log(args[0]) if len(args) == 1 else tm.log(args[0]) / tm.log(args[1])
    if name == "round" and len(args) == 1:
        x = as_expr(args[0])
        return tm.round(x) if x.dtype.is_float else x
    if name == "round":
        raise refuse("round(x, ndigits)", "scale, round and scale back: "
                     "`T.round(x * 100.0) / 100.0`")
    if name in ("int", "float", "bool") and len(args) == 1:
        return cast({"int": "int32", "float": "float32", "bool": "bool"}[name], args[0])
    raise refuse(name, _GENERIC)


def _is_float(x) -> bool:
    return isinstance(x, float) or (isinstance(x, Expr) and x.dtype.is_float)


def power(a, b):
    """`a ** b` (Python values: Python's result)."""
    a, b = _value(a), _value(b)
    if not is_device(a) and not is_device(b):
        return a ** b
    e = b.value if isinstance(b, Const) else b
    if not isinstance(a, Expr) and not isinstance(e, Expr):
        return as_expr(a ** e, b.dtype)  # a constant exponent of a Python base
    const_int = isinstance(e, int) and not _is_float(b)
    if isinstance(a, Expr) and a.dtype.is_integer and const_int and e >= 0:
        return _multiply(a, e)
    if (isinstance(a, int) or (isinstance(a, Expr) and a.dtype.is_integer)) and not _is_float(b):
        raise refuse("**", "an integer to a device or negative power: compute it in floating "
                     "point (`T.pow(T.cast(x, \"float32\"), y)`), or write powers of two as "
                     "`1 << k`")
    if isinstance(a, Expr) and a.dtype.is_float and isinstance(e, (int, float)) and e in (1, 2, 3):
        return _multiply(a, int(e))
    return _tm().pow(a, b)


def _multiply(x: Expr, n: int) -> Expr:
    """x ** n for a constant n >= 0 by repeated squaring (exact for integers)."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return result if result is not None else Const.create(1, x.dtype)


def matmul(a, b):
    """`a @ b`: Python's on Python values; on buffers or device values TC117 (T.gemm)."""
    if is_device(a) or is_device(b):
        raise refuse("@", "multiply tiles with T.gemm(A, B, C) (C accumulates A @ B)")
    return operator.matmul(a, b)
