"""Block instructions that compute on register tensors: arithmetic, cast, view, dot, reduce, fill.

Each writes an explicit `out` register tensor (Tilus's in-place form; a "new tensor" is an
`AllocateRegister` followed by the instruction). Arithmetic means exactly what the Tile IR
expression means: `BinaryOp("+", a, b, out)` computes `a + b` as the Tile IR's `BinOp("+")` (its
result dtype, its rounding, its integer wrapping: interp/arith.py) element by element, and
`elementwise_expr` builds that expression. `out` must have the expression's dtype (a conversion
is a separate `Cast`) and, for register operands, the operands' layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft import dtypes as dt
from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import BinOp, Call, Const, Expr, Var, as_expr, cast

from .instructions import Instruction, SrcOut
from .tensors import RegisterTensor, user_span

BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod",
              "min": "min", "max": "max", "&": "bitwise_and", "|": "bitwise_or",
              "^": "bitwise_xor", "<<": "shift_left", ">>": "shift_right"}
UNARY_OPS = ("neg", "abs", "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh",
             "sigmoid", "sin", "cos", "tan", "erf", "floor", "ceil", "trunc", "round")
REDUCE_KINDS = ("sum", "abssum", "max", "absmax", "min")

Operand = RegisterTensor | Expr


def elementwise_expr(op: str, args: tuple[Expr, ...]) -> Expr:
    """The Tile IR expression of an element-wise op on scalar `args` (the language's rules:
    tilecraft/language/math.py): `neg` is `0 - x`, `abs` keeps the dtype, math functions compute
    in the float dtype of x (ints convert to float32), `fma` is `fused_fma`."""
    if op in BINARY_OPS:
        return BinOp.create(op, args[0], args[1])
    if op == "fma":
        return fused_fma(*args)
    x = args[0]
    if op == "neg":
        return BinOp.create("-", Const.create(0, x.dtype), x)
    if op == "abs":
        return Call.create("abs", (x,), x.dtype)
    t = x.dtype if x.dtype.is_float else dt.float32
    return Call.create(op, (cast(t, x),), t)


def fused_fma(a: Any, b: Any, c: Any) -> Expr:
    """`a * b + c` rounded once in the dtype of that expression (`Call("fma")`: CUDA's fma,
    fmaf, __hfma), for floats; on integers the expression itself (exact, wrapping)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):  # two Python numbers: folded
        return BinOp.create("+", a * b, c)  # (as `a * b + c` is: c's dtype)
    plain = BinOp.create("+", BinOp.create("*", a, b), c)
    t = plain.dtype
    if not t.is_float:
        return plain
    return Call.create("fma", tuple(cast(t, as_expr(x, like=t)) for x in (a, b, c)), t)


def operands(s: Any) -> tuple:
    """The operands of an element-wise instruction (BinaryOp, Fma, UnaryOp), in order."""
    return s.args() if isinstance(s, _Operands) else (s.src,)


def result_dtype(op: str, operands: tuple[Operand, ...]) -> dt.DataType:
    """The dtype of `op` on these operands (that of `elementwise_expr`)."""
    args = tuple(Var("x", o.dtype) if isinstance(o, RegisterTensor) else o for o in operands)
    return elementwise_expr(op, args).dtype


def _operand(x: Any, like: dt.DataType) -> Operand:
    return x if isinstance(x, RegisterTensor) else as_expr(x, like=like)


class _Operands:
    """reads / writes / exprs of an instruction whose operands (`args`) are register tensors
    or scalar expressions and whose result is `out`."""

    def reads(self):
        return tuple(x for x in self.args() if isinstance(x, RegisterTensor))

    def writes(self):
        return (self.out,)

    def exprs(self):
        return tuple(x for x in self.args() if isinstance(x, Expr))


@dataclass(frozen=True)
class BinaryOp(_Operands, Instruction):
    """`out = a <op> b` element-wise; a and b are register tensors or scalar expressions (at
    least one a tensor). `op` is a Tile IR operator: + - * / // % min max & | ^ << >>."""

    op: str
    a: Operand
    b: Operand
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "binary"

    @classmethod
    def create(cls, op: str, a: Any, b: Any, out: RegisterTensor,
               span: Span | None = None) -> BinaryOp:
        span = user_span(span)
        if op not in BINARY_OPS:
            raise TilecraftError("TC603", span, instr="binary",
                                 detail=f"unknown operator {op!r}; one of {sorted(BINARY_OPS)}")
        tensors = [x for x in (a, b) if isinstance(x, RegisterTensor)]
        like = tensors[0].dtype if tensors else None  # Python numbers take the tensor's dtype
        return cls(op, _operand(a, like), _operand(b, like), out, span)

    @property
    def name(self) -> str:
        return BINARY_OPS[self.op]

    def args(self) -> tuple:
        return (self.a, self.b)


@dataclass(frozen=True)
class Fma(_Operands, Instruction):
    """`out = fma(a, b, c)` element-wise: a * b + c rounded once (floats; `fused_fma`); a, b, c
    register tensors or scalar expressions (at least one a tensor), broadcast like BinaryOp's."""

    a: Operand
    b: Operand
    c: Operand
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "fma"
    op: ClassVar[str] = "fma"
    name: ClassVar[str] = "fma"

    @classmethod
    def create(cls, a: Any, b: Any, c: Any, out: RegisterTensor,
               span: Span | None = None) -> Fma:
        from functools import reduce

        from tilecraft.ir.expr import promote

        tensors = [x.dtype for x in (a, b, c) if isinstance(x, RegisterTensor)]
        like = reduce(promote, tensors) if tensors else None  # (Python numbers: the tensors')
        return cls(_operand(a, like), _operand(b, like), _operand(c, like), out, user_span(span))

    def args(self) -> tuple:
        return (self.a, self.b, self.c)


@dataclass(frozen=True)
class UnaryOp(SrcOut):
    """`out = op(src)` element-wise: neg, abs, exp, exp2, log, sqrt, rsqrt, tanh, sigmoid, ..."""

    op: str
    src: RegisterTensor
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "unary"

    @classmethod
    def create(cls, op: str, src: RegisterTensor, out: RegisterTensor,
               span: Span | None = None) -> UnaryOp:
        span = user_span(span)
        if op not in UNARY_OPS:
            raise TilecraftError("TC603", span, instr="unary",
                                 detail=f"unknown operator {op!r}; one of {list(UNARY_OPS)}")
        return cls(op, src, out, span)

    @property
    def name(self) -> str:
        return self.op


@dataclass(frozen=True)
class Cast(SrcOut):
    """`out = cast(src, dtype)`: convert every element as a GPU store does. `out.layout` is
    src's, or holds the same elements in each thread in another register order, the same in
    every thread (layout/permute.py: e.g. interleaved 4-bit words cast to the mma's order)."""

    src: RegisterTensor
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "cast"


@dataclass(frozen=True)
class CastPlanes(Instruction):
    """`out = cast_planes(hi, lo, dtype, scale)`: the float `dtype` whose codes are
    hi * 2^(lo's bits) + lo, element by element (its codes stored as two bit planes: the top
    bits and the low bits, each a register tensor of unsigned codes), times 2^scale, converted
    to out's type as a GPU store does. hi, lo and out hold the same elements (each layout may
    order a thread's registers its own way: quant/qmm.py stores 6-bit float weights so, cast by
    one `tc::fast_cast_float_planes`, fast_cast.cuh)."""

    hi: RegisterTensor
    lo: RegisterTensor
    out: RegisterTensor
    dtype: Any  # the float type of the codes (a DataType)
    scale: int = 0
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "cast_planes"

    @classmethod
    def create(cls, hi: RegisterTensor, lo: RegisterTensor, out: RegisterTensor, dtype: Any,
               scale: int = 0, span: Span | None = None) -> CastPlanes:
        span = user_span(span)
        if isinstance(scale, bool) or not isinstance(scale, int):
            raise TilecraftError("TC603", span, instr="cast_planes",
                                 detail=f"scale={scale!r}: a power of two's exponent, an int")
        return cls(hi, lo, out, dt.resolve(dtype), scale, span)

    def reads(self):
        return (self.hi, self.lo)

    def writes(self):
        return (self.out,)

    def script(self) -> str:
        scale = f", scale={self.scale}" if self.scale else ""
        return (f"cast_planes({self.hi.name}, {self.lo.name}, {self.dtype}{scale}, "
                f"out={self.out.name})")


@dataclass(frozen=True)
class CastBytes(Instruction):
    """`out = cast_bytes(parts, dtype, offset, scale)`: codes of `dtype` (3-, 6- or 7-bit unsigned
    ints, or 6- or 7-bit floats whose every code is finite) stored 32 in 4 * bits bytes
    (dtypes/packing.py `pack_bytes`: 4 * bits codes in the bytes' low bits, the rest spread
    over their top bits; 3-bit codes in nibbles likewise; a float's bytes with `sign_at_top`),
    as values: an int's code minus the whole number
    `offset`, a float's value times 2^scale; converted to out's type as a GPU store does.
    `parts` are uint8 register tensors; each thread's elements of out form groups of 32, and
    group g's bytes are, in order, group g of each part's bytes (a part's local bytes split
    into as many equal groups). quant/qmm.py stores 6- and 7-bit integer weights and
    float6_e3m2 so, loaded in parts of 16, 8 (and 4) bytes a thread and tile, cast by one
    `tc::fast_cast_bytes` / `tc::fast_cast_bytes_float`."""

    parts: tuple[RegisterTensor, ...]
    out: RegisterTensor
    dtype: Any  # the codes' type (a DataType)
    offset: int = 0
    scale: int = 0
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "cast_bytes"

    @classmethod
    def create(cls, parts: Sequence[RegisterTensor], out: RegisterTensor, dtype: Any,
               offset: int = 0, scale: int = 0, span: Span | None = None) -> CastBytes:
        span = user_span(span)
        t = dt.resolve(dtype)
        for name, v in (("offset", offset), ("scale", scale)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TilecraftError("TC603", span, instr="cast_bytes",
                                     detail=f"{name}={v!r}: a whole number, an int")
        if not ((t.kind == "uint" and t.bits in dt.packing.BYTES_BITS) or (
                t.is_float and t.bits in (6, 7) and not t.has_nan and not t.has_inf)):
            raise TilecraftError("TC603", span, instr="cast_bytes",
                                 detail=f"{t}: codes in bytes are 3-, 6- or 7-bit unsigned ints "
                                 "or 6- or 7-bit floats with every code finite")
        if (offset and t.is_float) or (scale and not t.is_float):
            raise TilecraftError("TC603", span, instr="cast_bytes",
                                 detail="an offset is for ints, a scale for floats")
        return cls(tuple(parts), out, t, offset, scale, span)

    def reads(self):
        return self.parts

    def writes(self):
        return (self.out,)

    def script(self) -> str:
        extra = f", offset={self.offset}" if self.offset else ""
        extra += f", scale={self.scale}" if self.scale else ""
        names = ", ".join(x.name for x in self.parts)
        return f"cast_bytes([{names}], {self.dtype}{extra}, out={self.out.name})"


@dataclass(frozen=True)
class View(SrcOut):
    """`out = view(src, dtype, layout)`: reinterpret every thread's bits (free on the GPU): both
    layouts span the block's threads and each thread holds the same number of bits; thread t's
    elements, in local order, are one bit string (element i in bits [i*b, (i+1)*b))."""

    src: RegisterTensor
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "view"


@dataclass(frozen=True)
class Dot(Instruction):
    """`out = dot(a, b) + c`: a[M, K] @ b[K, N] + c[M, N], products exact and accumulated as the
    Tile IR's gemm does (float64, rounded to float32 for float accumulators)."""

    a: RegisterTensor
    b: RegisterTensor
    c: RegisterTensor
    out: RegisterTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "dot"

    @classmethod
    def create(cls, a: RegisterTensor, b: RegisterTensor, c: RegisterTensor,
               out: RegisterTensor | None = None, span: Span | None = None) -> Dot:
        return cls(a, b, c, c if out is None else out, user_span(span))

    def reads(self):
        return (self.a, self.b, self.c)

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class Fill(Instruction):
    """`fill(out, value)`: every element of `out` becomes `value` (converted to out's dtype)."""

    out: RegisterTensor
    value: Expr
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "fill"

    @classmethod
    def create(cls, out: RegisterTensor, value: Any, span: Span | None = None) -> Fill:
        return cls(out, as_expr(value, like=out.dtype), user_span(span))

    def writes(self):
        return (self.out,)

    def exprs(self):
        return (self.value,)


@dataclass(frozen=True)
class ReduceRegister(Instruction):
    """`reduce_<kind>(src, out, dim)`: sum/abssum/max/absmax/min of `src` along `dim` (out has
    src's shape without `dim`, or with it of size 1), in T.reduce_<kind>'s accumulator dtype;
    with `clear=False` the result also combines out's old values."""

    src: RegisterTensor
    out: RegisterTensor
    dim: int
    kind: str
    clear: bool = True
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "reduce"

    @classmethod
    def create(cls, src: RegisterTensor, out: RegisterTensor, dim: int, kind: str,
               clear: bool = True, span: Span | None = None) -> ReduceRegister:
        span = user_span(span)
        if kind not in REDUCE_KINDS:
            raise TilecraftError("TC603", span, instr="reduce",
                                 detail=f"unknown kind {kind!r}; one of {list(REDUCE_KINDS)}")
        return cls(src, out, int(dim), kind, bool(clear), span)

    def reads(self):
        return (self.src,) if self.clear else (self.src, self.out)

    def writes(self):
        return (self.out,)
