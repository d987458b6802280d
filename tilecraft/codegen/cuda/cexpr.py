"""Scalar IR expressions -> CUDA C++ with the language's semantics (docs/language.md, "Semantics").

Arithmetic happens in the IR dtype, like the interpreter: 16-bit float arithmetic uses the
cuda_fp16/bf16 operators (correctly rounded); math functions compute in float (double for
float64) and round back. Integer arithmetic wraps modulo 2^bits: where the interval analysis
(`ir/ranges.py` over the emitter's proven ranges) cannot show that a result fits its type, it goes
through `tc::wrap_*` (unsigned arithmetic: C's signed overflow is undefined and NVRTC folds
`x + 1 > x` to true), else it prints as plain C. `//` and `%` are floor division and modulo:
plain `/` and `%` where both operands are proven non-negative, `tc::floordiv`/`floormod`
otherwise. `T.max`/`T.min` propagate NaN (`tc::maximum`: PTX max.NaN).

    x // 4  (x in [0, 127])      ->  (x_ / 4)
    x // 4  (x a loaded value)   ->  tc::floordiv<int>(x_, 4)
    a + b   (int8 values)        ->  tc::wrap_add<signed char>(a_, b_)

Packed types (sub-byte ints, custom floats: every type CTYPES lacks; docs/dtypes.md "On the
GPU") have value types `tc::SubInt<B, Signed>` / `tc::SubFloat<E, M>` (lowbit.cuh, one code
each) and compute like the interpreter: custom floats in float, rounded back after every
operation (as fp8); sub-byte ints in int, wrapped to their width by the cast back.

    a + b   (int4 values)        ->  tc::cast<tc::SubInt<4, true>>(tc::cast<int>(a_) + ...)
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes import resolve
from tilecraft.ir import BinOp, BufferLoad, Call, Cast, Compare, Const, Not, Select, Var
from tilecraft.ir.expr import promote
from tilecraft.ir.ranges import bound

CTYPES = {
    "float32": "float", "float64": "double", "float16": "half", "bfloat16": "__nv_bfloat16",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long", "bool": "bool",
    "float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2",
}

INT64 = resolve("int64")
FLOAT32 = resolve("float32")

# exp2 is the hardware ex2.approx.ftz (about 2 ulp; results below 2^-126 flush to 0), as in
# Triton and TileLang: it is the softmax workhorse. The others are CUDA's accurate functions.
MATH_F32 = {"exp": "expf", "exp2": "tc::exp2_approx", "log": "logf", "log2": "log2f",
            "log10": "log10f",
            "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf", "sin": "sinf", "cos": "cosf",
            "tan": "tanf", "erf": "erff", "floor": "floorf", "ceil": "ceilf", "trunc": "truncf",
            "round": "rintf", "abs": "fabsf", "pow": "powf", "sigmoid": "tc::sigmoid"}
# float64 computes in double (CUDA's accurate functions; exp2 too)
MATH_F64 = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
            "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
            "tan": "tan", "erf": "erf", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
            "round": "rint", "abs": "fabs", "pow": "pow", "sigmoid": "tc::sigmoid"}

_WRAP = {"+": "tc::wrap_add", "-": "tc::wrap_sub", "*": "tc::wrap_mul"}


def is_packed(dtype) -> bool:
    """A type memory holds packed, LSB first (sub-byte ints, custom floats): no C type of its
    own; values are lowbit.cuh's code types, storage `unsigned char` / `tc::u32` words."""
    return dtype.name not in CTYPES and dtype.bits <= 8 and dtype.kind in ("int", "uint", "float")


def ctype(dtype) -> str:
    """The C type of a value of `dtype` (of a packed type: its lowbit.cuh code type). Raises a
    TC502 at the statement being printed (the current span) for a type with none."""
    t = CTYPES.get(dtype.name)
    if t is not None:
        return t
    if is_packed(dtype) and dtype.is_float:
        return f"tc::SubFloat<{dtype.exponent_bits}, {dtype.mantissa_bits}>"
    if is_packed(dtype):
        return f"tc::SubInt<{dtype.bits}, {'true' if dtype.kind == 'int' else 'false'}>"
    raise TilecraftError("TC502", detail=f"dtype {dtype}", hint="")


def storage_ctype(dtype) -> str:
    """The C type of an element of `dtype` in global or shared memory (bytes for packed
    types: element i is bits [i*b, (i+1)*b) of the byte string)."""
    return "unsigned char" if is_packed(dtype) else ctype(dtype)


def zero(t: str) -> str:
    """Zero of C type `t` (`signed char(0)` is not C++: multi-word types take a C cast; code
    types are zero-initialized: code 0 is 0 and +0.0)."""
    if t.startswith("tc::Sub"):
        return f"{t}{{}}"
    return f"({t})0" if " " in t else f"{t}(0)"


def is_half(dtype) -> bool:
    return dtype.name in ("float16", "bfloat16")


def float_literal(v: float) -> str:
    if v != v:
        return "__int_as_float(0x7fc00000)"
    if v in (float("inf"), float("-inf")):
        return ("-" if v < 0 else "") + "__int_as_float(0x7f800000)"
    r = repr(float(v))
    return (r if ("e" in r or "." in r) else r + ".0") + "f"


def double_literal(v: float) -> str:
    if v != v:
        return "__longlong_as_double(0x7ff8000000000000ll)"
    if v in (float("inf"), float("-inf")):
        return ("-" if v < 0 else "") + "tc::infinity<double>()"
    r = repr(float(v))
    return r if ("e" in r or "." in r) else r + ".0"


def int_literal(v: int, dtype) -> str:
    """An integer constant of `dtype` in C (the type's minimum cannot be written as a literal)."""
    if dtype.kind == "uint":
        return f"{v}ull" if dtype.bits == 64 else f"{v}u"
    if dtype.bits == 64:
        return "(-9223372036854775807LL - 1)" if v == -(1 << 63) else f"{v}LL"
    return "(-2147483647 - 1)" if v == -(1 << 31) else str(v)


def _via_float(t) -> bool:
    """fp8 and custom float values compute in float (cuda_fp8 has no arithmetic), like the
    interpreter."""
    return t.is_float and t.bits <= 8


def _via_int(t) -> bool:
    """Sub-byte ints compute in int and wrap to their width (the interpreter's rule)."""
    return t.is_integer and is_packed(t)


INT32 = resolve("int32")


def value_type(a, b):
    """The integer type holding every value of integer types `a` and `b`; None for uint64 with a
    signed type (the interpreter's rule, interp/arith.py)."""
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    u, s = (a, b) if a.kind == "uint" else (b, a)
    if u.bits < s.bits:
        return s
    return INT64 if u.bits < 64 else None


class ExprPrinter:
    """Prints expressions; `load` is called for BufferLoads (it knows where buffers live) and
    `ranges` holds the emitter's proven intervals of variables (a live dict, read at print time)."""

    def __init__(self, names, load, ranges: dict | None = None):
        self.names = names  # Var -> C name
        self.load = load  # (BufferLoad) -> C expression
        self.ranges = ranges if ranges is not None else {}
        # integer arithmetic in 64 bits (the index of a tensor of 2^31 elements or more):
        # variables are widened and 8-32-bit integer operations computed as `long long`
        self.wide = False

    def _t(self, dtype):
        """The C arithmetic type of `dtype` here: int64 for narrower integers when wide."""
        if self.wide and dtype.is_integer and dtype.bits < 64 and not is_packed(dtype):
            return INT64
        return dtype

    def value_ctype(self, dtype) -> str:
        """The C type an expression of `dtype` prints as here."""
        return ctype(self._t(dtype))

    def __call__(self, e) -> str:
        return self.expr(e)

    def expr(self, e) -> str:
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            name = self.names(e)
            return f"(long long){name}" if self._t(e.dtype) is not e.dtype else name
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, Cast):
            if self._t(e.value.dtype) == self._t(e.dtype):
                return self.expr(e.value)
            return f"tc::cast<{ctype(self._t(e.dtype))}>({self.expr(e.value)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, Compare):
            return self.compare(e)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Call):
            return self.call(e)
        raise TilecraftError("TC502", detail=f"expression {type(e).__name__}", hint="")

    def const(self, e: Const) -> str:
        t = e.dtype
        if t.name == "bool":
            return "true" if e.value else "false"
        if t.name == "float32":
            return float_literal(e.value)
        if t.name == "float64":
            return double_literal(e.value)
        if t.is_float:
            return f"tc::cast<{ctype(t)}>({float_literal(e.value)})"
        if is_packed(t):  # (the literal wrapped to the type's width)
            return f"tc::cast<{ctype(t)}>({int(e.value)})"
        return int_literal(int(e.value), t)

    def _operand(self, x, t) -> str:
        """`x` printed and converted to `t` where its dtype differs (as the IR promotes)."""
        s = self.expr(x)
        return s if self._t(x.dtype) == t else f"tc::cast<{ctype(t)}>({s})"

    def compare(self, e: Compare) -> str:
        """Mixed integer types compare by value (uint32 7 > int32 -1, unlike C); otherwise both
        sides convert like arithmetic operands."""
        ta, tb = e.a.dtype, e.b.dtype
        if not (ta.is_integer and tb.is_integer and ta != tb):
            t = compute_type(self._t(promote(ta, tb)))
            return f"({self._operand(e.a, t)} {e.op} {self._operand(e.b, t)})"
        vt = value_type(ta, tb)
        if vt is not None:
            t = compute_type(self._t(vt))
            return f"({self._operand(e.a, t)} {e.op} {self._operand(e.b, t)})"
        u64 = resolve("uint64")  # uint64 against a signed type: test the sign first
        a, b = self._operand(e.a, u64), self._operand(e.b, u64)
        neg, flip = (self.expr(e.b), False) if ta.kind == "uint" else (self.expr(e.a), True)
        if_negative = {"<": flip, "<=": flip, ">": not flip, ">=": not flip, "==": False,
                       "!=": True}[e.op]
        return f"({neg} < 0 ? {'true' if if_negative else 'false'} : ({a} {e.op} {b}))"

    def binop(self, e: BinOp) -> str:
        op = e.op
        if op in ("and", "or"):
            return f"({self.expr(e.a)} {'&&' if op == 'and' else '||'} {self.expr(e.b)})"
        t = self._t(e.dtype)
        if _via_float(t):  # fp8 has no C arithmetic: compute in float, round once per operation
            a, b = self._operand(e.a, FLOAT32), self._operand(e.b, FLOAT32)
            return f"tc::cast<{ctype(t)}>({self._arith(e, FLOAT32, a, b)})"
        if _via_int(t):  # sub-byte ints: in int (no overflow: operands below 2^8), then wrap
            a, b = self._operand(e.a, INT32), self._operand(e.b, INT32)
            return f"tc::cast<{ctype(t)}>({_int_arith(op, a, b)})"
        return self._arith(e, t, self._operand(e.a, t), self._operand(e.b, t))

    def _arith(self, e: BinOp, t, a: str, b: str) -> str:
        op, c = e.op, ctype(t)
        if op in ("min", "max"):
            return f"tc::{op}imum<{c}>({a}, {b})"
        if t.is_float:
            if op in ("//", "%"):
                return f"tc::{'floordiv' if op == '//' else 'floormod'}<{c}>({a}, {b})"
            if op == "*" and is_half(t):  # rounded on its own: never contracted into an fma
                return f"__hmul_rn({a}, {b})"  # (fp16/bf16 round after every operation)
            return f"({a} {op} {b})"
        if op in ("//", "%"):
            if self._nonneg(e.a) and self._positive(e.b):
                return f"({a} {'/' if op == '//' else '%'} {b})"
            return f"tc::{'floordiv' if op == '//' else 'floormod'}<{c}>({a}, {b})"
        if op == "/":
            return f"({a} / {b})" if self._safe_divisor(e.b) else f"tc::truncdiv<{c}>({a}, {b})"
        if op in _WRAP:
            if self.wide or self._in_range(e) or (t.kind == "uint" and t.bits >= 32):
                return f"({a} {op} {b})"
            return f"{_WRAP[op]}<{c}>({a}, {b})"
        if op in ("<<", ">>"):
            return self.shift(e, t, a)
        return f"({a} {op} {b})"  # & | ^: results stay in range

    def shift(self, e: BinOp, t, a: str) -> str:
        """Counts outside [0, bits) give 0 (<<) or the sign (>>), like numpy and PTX."""
        n = e.b.value if isinstance(e.b, Const) else None
        width = max(t.bits, 32)
        plain = n is not None and 0 <= n < width
        if e.op == ">>" and plain:
            return f"({a} >> {n})"
        if e.op == "<<" and plain and (self.wide or self._in_range(e)
                                       or (t.kind == "uint" and t.bits >= 32)):
            return f"({a} << {n})"
        return f"tc::{'shl' if e.op == '<<' else 'shr'}<{ctype(t)}>({a}, {self.expr(e.b)})"

    # ---- what the interval analysis proves ---------------------------------------------
    def _range(self, x):
        return bound(x, self.ranges)

    def _in_range(self, e) -> bool:
        return self._range(e) is not None  # bound() is None where the result may not fit

    def _nonneg(self, x) -> bool:
        r = self._range(x)
        return r is not None and r[0] >= 0

    def _positive(self, x) -> bool:
        r = self._range(x)
        return r is not None and r[0] > 0

    def _safe_divisor(self, x) -> bool:
        """C's `/` is exact unless the divisor may be -1 (MIN / -1 overflows) or the type is
        narrower than int (the quotient is promoted to int and must wrap)."""
        if x.dtype.kind == "uint" and x.dtype.bits >= 32:
            return True
        r = self._range(x)
        return r is not None and (r[0] > 0 or r[1] < -1) and x.dtype.bits >= 32

    def call(self, e: Call) -> str:
        if e.op == "cluster_sync":  # (T.cluster_sync, an Evaluate at block level)
            return "tc::cluster_sync()"
        args = [self.expr(a) for a in e.args]
        if e.op == "remote_load":  # T.remote(buf, rank)[idx]: the element's twin in block rank
            if is_packed(e.dtype):
                raise TilecraftError("TC502", detail=f"T.remote of a {e.dtype} buffer",
                                     hint="read a buffer of a standard type (or of bytes)")
            load = e.args[1]
            if not isinstance(load, BufferLoad) or load.buffer.scope != "shared":
                raise TilecraftError("TC502", detail=f"T.remote of `{load}`, which is no "
                                     "shared buffer element here", hint="a compiler pass moved "
                                     "it: report this")
            return f"tc::ld_remote({args[1]}, {args[0]})"
        if e.op == "abs" and _via_int(e.dtype):
            return f"tc::cast<{ctype(e.dtype)}>(abs({self._operand(e.args[0], INT32)}))"
        if e.op == "infinity" and is_packed(e.dtype):  # no inf: saturates to the maximum
            return f"tc::cast<{ctype(e.dtype)}>({float_literal(float('inf'))})"
        if e.op == "abs" and e.dtype.is_integer:
            if e.dtype.kind == "uint":
                return args[0]
            return f"tc::wrap_abs<{ctype(e.dtype)}>({args[0]})"
        if e.op == "abs" and is_half(e.dtype):
            return f"__habs({args[0]})"
        if e.op in MATH_F32 and e.dtype.name == "float64":
            return f"{MATH_F64[e.op]}({', '.join(args)})"
        if e.op in MATH_F32:
            fn = MATH_F32[e.op]
            if e.dtype.name == "float32":
                return f"{fn}({', '.join(args)})"
            if e.dtype.is_float:
                fargs = ", ".join(f"tc::cast<float>({a})" for a in args)
                return f"tc::cast<{ctype(e.dtype)}>({fn}({fargs}))"
        if e.op == "fma":  # rounded once (interp/evaluate.py fused_multiply_add)
            t = e.dtype
            if t.name in ("float32", "float64"):
                return f"{'fmaf' if t.name == 'float32' else 'fma'}({', '.join(args)})"
            if is_half(t):
                return f"__hfma({', '.join(args)})"
            fargs = ", ".join(f"tc::cast<float>({a})" for a in args)
            return f"tc::cast<{ctype(t)}>(fmaf({fargs}))"
        if e.op == "infinity":
            return f"tc::infinity<{ctype(e.dtype)}>()"
        if e.op.startswith("extern:"):  # T.call_extern: the name was checked by the language
            return f"{e.op[len('extern:'):]}({', '.join(args)})"
        raise TilecraftError("TC502", detail=f"function `{e.op}`", hint="")


def compute_type(t):
    """The type arithmetic and comparisons of `t` happen in: float for fp8 and custom floats,
    int for sub-byte ints, else `t`."""
    if _via_float(t):
        return FLOAT32
    return INT32 if _via_int(t) else t


def _int_arith(op: str, a: str, b: str) -> str:
    """`a op b` on int operands holding sub-byte values (|a|, |b| < 2^8: + - * never overflow)."""
    if op in ("min", "max"):
        return f"tc::{op}imum<int>({a}, {b})"
    if op in ("//", "%"):
        return f"tc::{'floordiv' if op == '//' else 'floormod'}<int>({a}, {b})"
    if op == "/":
        return f"tc::truncdiv<int>({a}, {b})"
    if op in ("<<", ">>"):  # counts outside [0, 32): 0 or the sign, as numpy
        return f"tc::{'shl' if op == '<<' else 'shr'}<int>({a}, {b})"
    return f"({a} {op} {b})"
