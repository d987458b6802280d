"""Evaluating expressions: Python values compute now, device values build IR.

`ExprEvaluator` is mixed into KernelParser (which provides `span`, `lookup` and `call`).
Operators on Python values are Python's; with a device value on either side they build IR
(`BinOp`, `Compare`, `Select`); `**` and `@` go through frontend/pycalls.py. A buffer
subscript must be indexed by integers (TC119 for a float index).

    A[i] * 2 + 1        -> BinOp(+, BinOp(*, A[i], 2), 1)
    2 ** 3              -> 8 (now)
    A[i * 0.5]          -> TC119 at the subscript
"""

from __future__ import annotations

import ast
import difflib
import operator

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import Atomic, Buffer, Expr, as_expr, index_buffer
from tilecraft.ir.expr import BinOp, Compare, Const, Not, Select

from .pycalls import matmul, power

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
          ast.RShift: ">>", ast.Pow: "**", ast.MatMult: "@"}
_PYBIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
          "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_PYCMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
          "==": operator.eq, "!=": operator.ne}
_IDENTITY = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
             ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def is_device(v) -> bool:
    """A value only the device knows (an IR expression that is not a constant)."""
    return isinstance(v, Expr) and not isinstance(v, Const)


def value_of(v):
    """A var buffer read as its value; anything else unchanged."""
    return as_expr(v) if isinstance(v, Buffer) and v.scope == "var" else v


def _register_tensor(v) -> bool:
    """A Tilus-level register tensor (tilecraft/block), without importing the block IR."""
    return type(v).__name__ == "RegisterTensor" and type(v).__module__ == "tilecraft.block.tensors"


def _block_tensor(v, kind: str) -> bool:
    """A Tilus-level tensor of class `kind` (tilecraft/block), without importing the block IR."""
    return type(v).__name__ == kind and type(v).__module__ == "tilecraft.block.tensors"


def tile_operand(v):
    """A Tilus register tensor used by a tile-level statement (a tile op's operand, an index in
    T.Parallel) is the fragment buffer it stores, whose layout is the tensor's: every block
    instruction naming it fixes that layout for inference (strict). A global tensor of
    `T.view_global` is the global buffer it names. Anything else unchanged."""
    return v.buffer if _register_tensor(v) or _block_tensor(v, "GlobalTensor") else v


def scalar_of(v):
    """Operands of arithmetic: a var buffer reads its value; another buffer is TC108."""
    return as_expr(v) if isinstance(v, Buffer) else v


def check_index(buf: Buffer, idx) -> None:
    """Buffer indices and slice bounds are integers (TC119 for floats)."""
    for i in idx if isinstance(idx, tuple) else (idx,):
        for x in (i.start, i.stop, i.step) if isinstance(i, slice) else (i,):
            x = value_of(x)
            if isinstance(x, float) or (isinstance(x, Expr) and x.dtype.is_float):
                raise TilecraftError("TC119", index=x, buffer=buf.name,
                                     dtype=x.dtype if isinstance(x, Expr) else "float")


class ExprEvaluator:
    """The `expr_*` half of the parser."""

    def eval(self, node: ast.expr):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            from .parser import unsupported

            with at_span(self.span(node)):
                raise unsupported(node)
        return method(node)

    def expr_Constant(self, n: ast.Constant):
        return n.value

    def expr_Name(self, n: ast.Name):
        with at_span(self.span(n)):
            return self.lookup(n.id)

    def expr_Attribute(self, n: ast.Attribute):
        obj = self.eval(n.value)
        try:
            return getattr(obj, n.attr)
        except AttributeError:
            with at_span(self.span(n)):
                if getattr(obj, "__name__", "").startswith("tilecraft.language"):
                    close = difflib.get_close_matches(n.attr, [a for a in dir(obj) if
                                                               not a.startswith("_")], n=3)
                    suggest = (f"; did you mean {', '.join('T.' + c for c in close)}?"
                               if close else "")
                    raise TilecraftError("TC101", name=n.attr, suggest=suggest) from None
                raise TilecraftError("TC108", detail=f"`{type(obj).__name__}` has no attribute "
                                     f"`{n.attr}`", hint="") from None

    def expr_Tuple(self, n):
        return tuple(self.eval(e) for e in n.elts)

    def expr_List(self, n):
        return [self.eval(e) for e in n.elts]

    def expr_Dict(self, n):
        return {self.eval(k): self.eval(v) for k, v in zip(n.keys, n.values)}

    def expr_JoinedStr(self, n: ast.JoinedStr):
        parts = []
        for v in n.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                x = self.eval(v.value)
                spec = self.eval(v.format_spec) if v.format_spec else ""
                parts.append(format(x, spec) if not isinstance(x, Expr) else str(x))
        return "".join(parts)

    def expr_Slice(self, n: ast.Slice):
        return slice(*(self.eval(x) if x is not None else None for x in (n.lower, n.upper, n.step)))

    def eval_index(self, node):
        return self.eval(node)

    def subscript(self, obj: Buffer, idx):
        """`obj[idx]` of a buffer: a load or a region (at the caller's span)."""
        check_index(obj, idx)
        return index_buffer(obj, idx)

    def expr_Subscript(self, n: ast.Subscript):
        obj = tile_operand(self.eval(n.value))
        idx = self.eval_index(n.slice)
        with at_span(self.span(n)):
            if isinstance(obj, Buffer):
                return self.subscript(obj, idx)
            if type(obj).__name__ == "RemoteBuffer":  # T.remote(buf, rank)[i, j]
                check_index(obj.buffer, idx)
                return obj.load(idx)
            if isinstance(idx, Expr) and not isinstance(idx, Const):
                raise TilecraftError("TC109", detail="indexing a Python sequence with a device "
                                     "value", hint="; store the values in a buffer")
            return obj[idx]

    def binop(self, op: str, a, b):
        if op == "@":
            return matmul(a, b)
        if _register_tensor(a) or _register_tensor(b):  # the Tilus level: a new register tensor
            from tilecraft.language.tilus import binary

            return binary(op, a, b)
        a, b = scalar_of(a), scalar_of(b)
        if op == "**":
            return power(a, b)
        if isinstance(a, Expr) or isinstance(b, Expr):
            return BinOp.create(op, a, b)
        try:
            return _PYBIN[op](a, b)
        except (ArithmeticError, TypeError, ValueError) as e:
            raise TilecraftError("TC108", detail=f"`{a!r} {op} {b!r}` on Python values: {e}",
                                 hint="") from None

    def expr_BinOp(self, n: ast.BinOp):
        a, b = self.eval(n.left), self.eval(n.right)
        with at_span(self.span(n)):
            return self.binop(BINOPS[type(n.op)], a, b)

    def expr_UnaryOp(self, n: ast.UnaryOp):
        v = self.eval(n.operand)
        if _register_tensor(v) and isinstance(n.op, ast.USub):
            from tilecraft.language.tilus import neg

            with at_span(self.span(n)):
                return neg(v)
        v = scalar_of(v)
        with at_span(self.span(n)):
            if isinstance(n.op, ast.Not):
                return Not.create(v) if isinstance(v, Expr) else not v
            if isinstance(n.op, ast.USub):
                return -v
            if isinstance(n.op, ast.UAdd):
                return v
            if isinstance(v, Expr):
                return BinOp.create("^", v, -1)
            return ~v

    def eval_once(self, n: ast.expr, where: str):
        """`n` evaluated where Python would run it not at all, or more than once (a `while`
        condition, the right of `and`/`or`, a conditional expression's branches): an atomic
        there (a statement the kernel runs once, here and now) is TC103 at its line."""
        frame = self.builder.frames[-1]
        start = len(frame)
        value = self.eval(n)
        if any(isinstance(x, Atomic) for x in frame[start:]):
            raise TilecraftError(
                "TC103", construct=f"T.atomic_* in {where}",
                instead="call the atomic in a statement of its own before it and use its "
                "result (`old = T.atomic_add(..., return_prev=True)`)")
        return value

    def expr_BoolOp(self, n: ast.BoolOp):
        op = "and" if isinstance(n.op, ast.And) else "or"
        result = None
        for k, node in enumerate(n.values):
            v = self.eval(node) if k == 0 else self.eval_once(node, f"the right of `{op}`")
            if isinstance(v, Buffer):
                v = as_expr(v)
            if result is None:
                result = v
            elif isinstance(result, Expr) or isinstance(v, Expr):
                result = BinOp.create(op, result, v)
            else:
                result = (result and v) if op == "and" else (result or v)
        return result

    def expr_Compare(self, n: ast.Compare):
        left = self.eval(n.left)
        result = None
        for op_node, right_node in zip(n.ops, n.comparators):
            right = self.eval(right_node)
            with at_span(self.span(n)):
                if type(op_node) in _IDENTITY:
                    part = _IDENTITY[type(op_node)](left, right)
                else:
                    op = _CMPOPS[type(op_node)]
                    la, rb = scalar_of(left), scalar_of(right)
                    if isinstance(la, Expr) or isinstance(rb, Expr):
                        part = Compare.create(op, la, rb)
                    else:
                        part = _PYCMP[op](la, rb)
                if result is None:
                    result = part
                elif isinstance(result, Expr) or isinstance(part, Expr):
                    result = BinOp.create("and", result, part)
                else:
                    result = result and part
            left = right
        return result

    def expr_IfExp(self, n: ast.IfExp):
        cond = value_of(self.eval(n.test))
        if isinstance(cond, Expr) and not isinstance(cond, Const):
            return Select.create(cond, value_of(self.eval_once(n.body, "`x if c else y`")),
                                 value_of(self.eval_once(n.orelse, "`x if c else y`")))
        if isinstance(cond, Const):
            cond = cond.value
        return self.eval(n.body) if cond else self.eval(n.orelse)

    def expr_Call(self, n: ast.Call):
        fn = self.eval(n.func)
        args, kwargs = [], {}
        for a in n.args:
            if isinstance(a, ast.Starred):
                args.extend(self.eval(a.value))
            else:
                args.append(self.eval(a))
        for k in n.keywords:
            if k.arg is None:
                kwargs.update(self.eval(k.value))
            else:
                kwargs[k.arg] = self.eval(k.value)
        with at_span(self.span(n)):
            return self.call(fn, args, kwargs)
