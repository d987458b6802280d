"""Scalar IR expressions -> CUDA C++ (arithmetic in the IR dtype, like the interpreter).

16-bit float arithmetic uses cuda_fp16/bf16 operators (correctly rounded, as the interpreter
rounds); math functions compute in float and round back. Python `//` and `%` become
tc::floordiv / tc::floormod unless both sides are known non-negative constants.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.dtypes import resolve
from tilecraft.ir import BinOp, BufferLoad, Call, Cast, Compare, Const, Not, Select, Var

CTYPES = {
    "float32": "float", "float64": "double", "float16": "half", "bfloat16": "__nv_bfloat16",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long", "bool": "bool",
    "float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2",
}

INT64 = resolve("int64")

# exp2 is the hardware ex2.approx.ftz (about 2 ulp; results below 2^-126 flush to 0), as in
# Triton and TileLang: it is the softmax workhorse. The others are CUDA's accurate functions.
MATH_F32 = {"exp": "expf", "exp2": "tc::exp2_approx", "log": "logf", "log2": "log2f",
            "log10": "log10f",
            "sqrt": "sqrtf", "rsqrt": "rsqrtf", "tanh": "tanhf", "sin": "sinf", "cos": "cosf",
            "tan": "tanf", "erf": "erff", "floor": "floorf", "ceil": "ceilf", "trunc": "truncf",
            "round": "rintf", "abs": "fabsf", "pow": "powf", "sigmoid": "tc::sigmoid"}


def ctype(dtype) -> str:
    try:
        return CTYPES[dtype.name]
    except KeyError:
        raise TilecraftError("TC502", detail=f"dtype {dtype}", hint="") from None


def zero(t: str) -> str:
    """Zero of C type `t` (`signed char(0)` is not C++: multi-word types take a C cast)."""
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


class ExprPrinter:
    """Prints expressions; `load` is called for BufferLoads (it knows where buffers live)."""

    def __init__(self, names, load):
        self.names = names  # Var -> C name
        self.load = load  # (BufferLoad) -> C expression
        # integer arithmetic in 64 bits (the index of a 1-D tensor of 2^31 elements or more):
        # variables are widened and 8-32-bit integer operations computed as `long long`
        self.wide = False

    def _t(self, dtype):
        """The C arithmetic type of `dtype` here: int64 for narrower integers when wide."""
        if self.wide and dtype.is_integer and dtype.bits < 64:
            return INT64
        return dtype

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
            return f"tc::cast<{ctype(self._t(e.dtype))}>({self.expr(e.value)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, Compare):
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
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
            return repr(float(e.value))
        if t.is_float:
            return f"tc::cast<{ctype(t)}>({float_literal(e.value)})"
        if t.name == "int64":
            return f"{int(e.value)}LL"
        if t.name.startswith("uint"):
            return f"{int(e.value)}u"
        return str(int(e.value))

    def binop(self, e: BinOp) -> str:
        a, b, op = self.expr(e.a), self.expr(e.b), e.op
        t = self._t(e.dtype)
        if op not in ("and", "or", "<<", ">>"):  # mixed operands: convert like the IR promotes
            if self._t(e.a.dtype) != t:
                a = f"tc::cast<{ctype(t)}>({a})"
            if self._t(e.b.dtype) != t:
                b = f"tc::cast<{ctype(t)}>({b})"

        if op in ("min", "max"):
            if t.name == "float32":
                return f"f{op}f({a}, {b})"
            if is_half(t):
                return f"__h{op}({a}, {b})"
            return f"{op}({a}, {b})"
        if op == "//" and not t.is_float:
            return f"tc::floordiv<{ctype(t)}>({a}, {b})" if not _nonneg(e) else f"({a} / {b})"
        if op == "%" and not t.is_float:
            return f"tc::floormod<{ctype(t)}>({a}, {b})" if not _nonneg(e) else f"({a} % {b})"
        if op == "//":
            return f"floorf({a} / {b})"
        if op == "and":
            return f"({a} && {b})"
        if op == "or":
            return f"({a} || {b})"
        return f"({a} {op} {b})"

    def call(self, e: Call) -> str:
        args = [self.expr(a) for a in e.args]
        if e.op in MATH_F32:
            fn = MATH_F32[e.op]
            if e.dtype.name == "float32":
                return f"{fn}({', '.join(args)})"
            if e.dtype.is_float:
                fargs = ", ".join(f"tc::cast<float>({a})" for a in args)
                return f"tc::cast<{ctype(e.dtype)}>({fn}({fargs}))"
            if e.op == "abs":
                return f"abs({args[0]})"
        if e.op == "fma":
            return f"fmaf({', '.join(args)})"
        if e.op == "infinity":
            return f"tc::infinity<{ctype(e.dtype)}>()"
        raise TilecraftError("TC502", detail=f"function `{e.op}`", hint="")


def _nonneg(e: BinOp) -> bool:
    return isinstance(e.b, Const) and e.b.value > 0 and _maybe_nonneg(e.a)


def _maybe_nonneg(e) -> bool:
    """Index arithmetic on block/loop variables is non-negative; subtraction is not assumed."""
    if isinstance(e, Const):
        return e.value >= 0
    if isinstance(e, Var):
        return True
    if isinstance(e, BinOp) and e.op in ("+", "*", "//", "%", "min", "max"):
        return _maybe_nonneg(e.a) and _maybe_nonneg(e.b)
    return False
