"""Python AST -> Tile IR.

The parser walks the kernel's AST and evaluates it: Python values (closure constants, ints,
shapes) are computed at parse time; anything that depends on a device value becomes IR.
  * `if` on a Python constant picks a branch now; on a device value it becomes an IR `If`;
  * `v = expr` with a device value is a `LetStmt`; with a Python value it is a parse-time binding;
  * `with T.Kernel(...) as (bx, by)` and `for ... in T.Parallel/T.Pipelined/range(...)` open
    IR blocks; calls such as `T.copy(...)` append their statements to the innermost block.
Every statement is processed under its span, so errors point at the user's line.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import operator
from typing import Any

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import (Break, Buffer, BufferLoad, BufferRegion, BufferStore, Const, Evaluate,
                          Expr, For, If, KernelLaunch, LetStmt, ParallelLoop, PrimFunc, Var, While,
                          as_expr, cast, index_buffer)
from tilecraft.ir.expr import BinOp, Compare, Not, Select

from tilecraft.language.surface import check_call

from .builder import Builder, KernelFrameInfo, building, seq
from .frames import KernelFrame, LoopFrame, TensorSpec
from .source import SourceInfo, parse_function_source

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
           ast.RShift: ">>"}
_PYBIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
          "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_PYCMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
          "==": operator.eq, "!=": operator.ne}

_UNSUPPORTED = {
    ast.FunctionDef: ("def", "define helper functions outside the kernel and call them from Python"),
    ast.Lambda: ("lambda", "define the function outside the kernel"),
    ast.ClassDef: ("class", "define classes outside the kernel"),
    ast.Try: ("try", "kernels cannot catch exceptions; check conditions with `if`"),
    ast.Raise: ("raise", "use T.device_assert(cond, msg) for device checks"),
    ast.Import: ("import", "import modules at the top of the file"),
    ast.ImportFrom: ("import", "import modules at the top of the file"),
    ast.Global: ("global", "read module-level values directly; they are constants"),
    ast.Nonlocal: ("nonlocal", "kernel values cannot be rebound from outside"),
    ast.Delete: ("del", "buffers live until the kernel ends"),
    ast.Continue: ("continue", "wrap the rest of the loop body in an `if`"),
    ast.ListComp: ("list comprehension", "compute the list outside the kernel"),
    ast.DictComp: ("dict comprehension", "compute the dict outside the kernel"),
    ast.SetComp: ("set comprehension", "compute the set outside the kernel"),
    ast.GeneratorExp: ("generator expression", "use T.Parallel or a loop"),
    ast.Await: ("await", "kernels are not coroutines"),
    ast.Yield: ("yield", "kernels are not generators"),
    ast.AsyncFor: ("async for", "use T.Pipelined for overlapped loops"),
    ast.AsyncWith: ("async with", "use `with T.Kernel(...)`"),
    ast.NamedExpr: ("walrus `:=`", "assign on its own line"),
    ast.Starred: ("*unpacking", "pass arguments explicitly"),
}
if hasattr(ast, "Match"):
    _UNSUPPORTED[ast.Match] = ("match", "use if/elif")


def is_device(v) -> bool:
    return isinstance(v, Expr) and not isinstance(v, Const)


def _unsupported(node: ast.AST) -> TilecraftError:
    construct, instead = _UNSUPPORTED.get(type(node), (type(node).__name__, "rewrite it with the "
                                                       "constructs in tilecraft.language"))
    return TilecraftError("TC103", construct=construct, instead=instead)


class _Scope(dict):
    pass


class KernelParser:
    """Evaluates one kernel function's AST into a PrimFunc."""

    def __init__(self, fn, src: SourceInfo):
        self.fn = fn
        self.src = src
        self.builder = Builder()
        self.scopes: list[_Scope] = [_Scope()]
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    closure[name] = cell.cell_contents
                except ValueError:  # empty cell: a name assigned after the def
                    pass
        self.closure = closure
        self.globals = fn.__globals__

    # ---- names -------------------------------------------------------------------------
    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise TilecraftError("TC104", name=name)

    def bind(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def _local_binding(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # ---- entry -------------------------------------------------------------------------
    def parse(self) -> PrimFunc:
        fdef = self.src.tree
        params = []
        dynamic: dict[int, Var] = {}
        with building(self.builder):
            for arg in fdef.args.args:
                with at_span(self.src.span(arg)):
                    params.append(self._param(arg, dynamic))
            body = self.block(fdef.body)
        return PrimFunc(fdef.name, tuple(params), body, tuple(dynamic.values()),
                        self.src.span(fdef))

    def _param(self, arg: ast.arg, dynamic: dict[int, Var]):
        if arg.annotation is None:
            raise TilecraftError("TC108", detail=f"parameter `{arg.arg}` has no annotation",
                                 hint="annotate it: `A: T.Tensor((M, K), 'float16')`")
        ann = self.annotation(arg)
        if isinstance(ann, TensorSpec):
            named = [d for d in ann.shape if isinstance(d, str)]
            if named:
                raise TilecraftError("TC108", detail=f"`{arg.arg}` has named dimensions {named}",
                                     hint="only @tilecraft.jit on a kernel function binds names "
                                     "from the call's shapes; use ints or T.dynamic dims here")
            for d in ann.shape:
                if isinstance(d, Var):
                    dynamic.setdefault(d.uid, d)
            buf = Buffer.create(arg.arg, ann.shape, ann.dtype, "global")
            self.bind(arg.arg, buf)
            return buf
        try:
            var = Var.create(arg.arg, ann)
        except (ValueError, TypeError, KeyError) as err:
            if isinstance(ann, str) and isinstance(err, TilecraftError):
                raise  # a misspelled dtype name: TC210 naming the closest ones
            raise TilecraftError("TC108", detail=f"annotation of `{arg.arg}` is not a tensor or "
                                 "a scalar dtype", hint="use T.Tensor(shape, dtype) or T.int32")
        self.bind(arg.arg, var)
        return var

    def annotation(self, arg: ast.arg):
        """The parameter's annotation as Python evaluated it at `def` time: names used only in
        annotations (`shape = (B, S, H, D)`; `Q: T.Tensor(shape, dtype)`) are not in the kernel's
        closure. Under `from __future__ import annotations` it is a string: evaluate the AST."""
        ann = getattr(self.fn, "__annotations__", {}).get(arg.arg)
        if ann is None or type(ann) is str:
            ann = self.eval(arg.annotation)
        return ann

    # ---- statements --------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], new_scope: bool = True):
        if new_scope:
            self.scopes.append(_Scope())
        try:
            with self.builder.frame() as out:
                for s in stmts:
                    with at_span(self.src.span(s)):
                        self.stmt(s)
            return seq(out) if out else seq([Evaluate(Const.create(0))])
        finally:
            if new_scope:
                self.scopes.pop()

    def stmt(self, s: ast.stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise _unsupported(s)
        method(s)

    def span(self, node):
        return self.src.span(node)

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        v = self.eval(s.value)
        if is_device(v):
            self.builder.emit(Evaluate(v, self.span(s)))

    def stmt_Pass(self, s) -> None:
        pass

    def stmt_Return(self, s: ast.Return) -> None:
        if s.value is not None:
            raise TilecraftError("TC103", construct="return <value>",
                                 instead="kernels write results into output tensors")

    def stmt_Break(self, s) -> None:
        self.builder.emit(Break(self.span(s)))

    def stmt_Assert(self, s: ast.Assert) -> None:
        cond = self.eval(s.test)
        msg = self.eval(s.msg) if s.msg is not None else ""
        if is_device(cond):
            from tilecraft.ir import DeviceAssert

            self.builder.emit(DeviceAssert(cond, str(msg), self.span(s)))
        elif not cond:
            raise AssertionError(msg or f"assertion failed at {self.span(s)}")

    def stmt_Assign(self, s: ast.Assign) -> None:
        if len(s.targets) != 1:
            raise TilecraftError("TC103", construct="chained assignment `a = b = ...`",
                                 instead="assign each name on its own line")
        self.assign(s.targets[0], s.value)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is None:
            return
        self.assign(s.target, s.value, annotation=self.eval(s.annotation))

    def assign(self, target: ast.expr, value_node: ast.expr, annotation=None) -> None:
        if isinstance(target, ast.Name):
            self.builder.pending_name = target.id
        try:
            value = self.eval(value_node)
        finally:
            self.builder.pending_name = None
        if annotation is not None and is_device(value):
            value = cast(annotation, value)
        self.store(target, value)

    def store(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            current = self._local_binding(target.id)
            if isinstance(current, Buffer) and current.scope == "var" and not isinstance(value, Buffer):
                self.builder.emit(BufferStore(current, (Const.create(0),),
                                              cast(current.dtype, value), self.span(target)))
            elif is_device(value):
                var = Var.create(self.builder.unique_name(target.id), value.dtype,
                                 self.span(target))
                self.builder.emit(LetStmt(var, value, self.span(target)))
                self.bind(target.id, var)
            else:
                self.bind(target.id, value)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            idx = self.eval_index(target.slice)
            if not isinstance(obj, Buffer):
                raise TilecraftError("TC103", construct="item assignment on a Python value",
                                     instead="assign to buffer elements: `buf[i, j] = v`")
            ref = index_buffer(obj, idx)
            if isinstance(ref, BufferRegion):
                raise TilecraftError("TC103", construct="assignment to a slice",
                                     instead="use T.copy(src, dst[...]) or T.fill(dst[...], v)")
            self.builder.emit(BufferStore(obj, ref.indices, cast(obj.dtype, value),
                                          self.span(target)))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if is_device(value) or not hasattr(value, "__len__") or len(value) != len(target.elts):
                raise TilecraftError("TC103", construct="tuple unpacking of this value",
                                     instead="unpack Python tuples of matching length only")
            for t, v in zip(target.elts, value):
                self.store(t, v)
        else:
            raise _unsupported(target)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        op = _BINOPS[type(s.op)]
        t = s.target
        if isinstance(t, ast.Subscript):
            cur = self.eval(t)
            self.store(t, self.binop(op, cur, self.eval(s.value)))
        elif isinstance(t, ast.Name):
            cur = self.lookup(t.id)
            if isinstance(cur, Var) and self._local_binding(t.id) is cur:
                raise TilecraftError("TC106", name=t.id)
            self.store(t, self.binop(op, cur, self.eval(s.value)))
        else:
            raise _unsupported(t)

    def stmt_If(self, s: ast.If) -> None:
        cond = self.eval(s.test)
        if isinstance(cond, Buffer):
            cond = as_expr(cond)
        if is_device(cond):
            then = self.block(s.body)
            other = self.block(s.orelse) if s.orelse else None
            self.builder.emit(If(cond, then, other, self.span(s)))
            return
        if isinstance(cond, Const):
            cond = cond.value
        for st in (s.body if cond else s.orelse):
            with at_span(self.span(st)):
                self.stmt(st)

    def stmt_While(self, s: ast.While) -> None:
        cond = self.eval(s.test)
        if not is_device(cond):
            raise TilecraftError("TC103", construct="while on a Python value",
                                 instead="use `for i in range(n)` or T.serial(n)")
        if s.orelse:
            raise TilecraftError("TC103", construct="while ... else", instead="drop the else")
        self.builder.emit(While(cond, self.block(s.body), self.span(s)))

    def stmt_With(self, s: ast.With) -> None:
        if len(s.items) != 1:
            raise TilecraftError("TC103", construct="with several items",
                                 instead="use one `with T.Kernel(...) as ...:`")
        item = s.items[0]
        frame = self.eval(item.context_expr)
        if not isinstance(frame, KernelFrame):
            raise TilecraftError("TC103", construct="with on this object",
                                 instead="the only `with` in a kernel is `with T.Kernel(...)`")
        self.kernel(s, frame, item.optional_vars)

    def kernel(self, s: ast.With, frame: KernelFrame, target) -> None:
        if self.builder.kernel is not None:
            raise TilecraftError("TC103", construct="nested T.Kernel", instead="use one T.Kernel")
        names = _target_names(target)
        if names is not None and len(names) != len(frame.grid):
            raise TilecraftError("TC102", grid=len(frame.grid), bound=len(names))
        default = ("bx", "by", "bz")
        names = names or list(default[: len(frame.grid)])
        bvars = tuple(Var.create(self.builder.unique_name(n), "int32", self.span(s)) for n in names)
        tvars = tuple(Var.create(self.builder.unique_name(n), "int32", self.span(s))
                      for n in ("tx", "ty", "tz")[: len(frame.threads)])
        self.builder.kernel = KernelFrameInfo(frame.threads, tvars, bvars)
        self.scopes.append(_Scope())
        try:
            for n, v in zip(names, bvars):
                self.bind(n, v)
            body = self.block(s.body, new_scope=False)
        finally:
            self.scopes.pop()
            self.builder.kernel = None
        grid = tuple(as_expr(g) for g in frame.grid)
        self.builder.emit(KernelLaunch(grid, bvars, frame.threads, tvars, body, self.span(s)))

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse:
            raise TilecraftError("TC103", construct="for ... else", instead="drop the else")
        it = s.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                self.lookup(it.func.id) is builtins.range:
            args = [self.eval(a) for a in it.args]
            from tilecraft.language.loops import serial

            frame = serial(*args)
        else:
            frame = self.eval(it)
        if isinstance(frame, LoopFrame):
            return self.device_loop(s, frame)
        if is_device(frame):
            raise TilecraftError("TC103", construct="for over a device value",
                                 instead="use T.serial(n) / T.Parallel(n) / range(n)")
        try:
            items = list(frame)
        except TypeError:
            raise TilecraftError("TC103", construct=f"for over {type(frame).__name__}",
                                 instead="loop with T.Parallel, T.Pipelined, T.serial or range")
        for v in items:  # a Python-level loop: unrolled at parse time
            self.store(s.target, v)
            for st in s.body:
                with at_span(self.span(st)):
                    self.stmt(st)

    def device_loop(self, s: ast.For, frame: LoopFrame) -> None:
        names = _target_names(s.target) or []
        dims = len(frame.extents)
        if len(names) != dims:
            raise TilecraftError("TC107", what=f"T.{_FRAME_NAMES[frame.kind]}", bound=len(names),
                                 dims=dims)
        self.scopes.append(_Scope())
        try:
            vars_ = tuple(Var.create(self.builder.unique_name(n), "int32", self.span(s.target))
                          for n in names)
            if frame.kind != "parallel" and frame.step != 1:
                # i = start + k * step, with k the IR loop variable
                inner = Var.create(self.builder.unique_name(names[0] + "_k"), "int32")
                self.bind(names[0], vars_[0])
                with self.builder.frame() as out:
                    self.builder.emit(LetStmt(vars_[0], as_expr(frame.start) + inner * frame.step,
                                              self.span(s)))
                    for st in s.body:
                        with at_span(self.span(st)):
                            self.stmt(st)
                body = seq(out)
                vars_ = (inner,)
            else:
                for n, v in zip(names, vars_):
                    self.bind(n, v)
                body = self.block(s.body, new_scope=False)
        finally:
            self.scopes.pop()
        if frame.kind == "parallel":
            self.builder.emit(ParallelLoop(vars_, tuple(frame.extents), body, self.span(s)))
        else:
            self.builder.emit(For(vars_[0], as_expr(0 if frame.step != 1 else frame.start),
                                  as_expr(frame.extents[0]), frame.kind, body, frame.pipeline,
                                  self.span(s)))

    # ---- expressions -------------------------------------------------------------------
    def eval(self, node: ast.expr):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            with at_span(self.span(node)):
                raise _unsupported(node)
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
                    suggest = f"; did you mean {', '.join('T.' + c for c in close)}?" if close else ""
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

    def expr_Subscript(self, n: ast.Subscript):
        obj = self.eval(n.value)
        idx = self.eval_index(n.slice)
        with at_span(self.span(n)):
            if isinstance(obj, Buffer):
                return index_buffer(obj, idx)
            if is_device(idx):
                raise TilecraftError("TC109", detail="indexing a Python sequence with a device "
                                     "value", hint="; store the values in a buffer")
            return obj[idx]

    def binop(self, op: str, a, b):
        if isinstance(a, Buffer) and a.scope == "var":
            a = as_expr(a)
        if isinstance(b, Buffer) and b.scope == "var":
            b = as_expr(b)
        if isinstance(a, Expr) or isinstance(b, Expr):
            return BinOp.create(op, a, b)
        return _PYBIN[op](a, b)

    def expr_BinOp(self, n: ast.BinOp):
        a, b = self.eval(n.left), self.eval(n.right)
        with at_span(self.span(n)):
            return self.binop(_BINOPS[type(n.op)], a, b)

    def expr_UnaryOp(self, n: ast.UnaryOp):
        v = self.eval(n.operand)
        if isinstance(v, Buffer) and v.scope == "var":
            v = as_expr(v)
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

    def expr_BoolOp(self, n: ast.BoolOp):
        op = "and" if isinstance(n.op, ast.And) else "or"
        result = None
        for node in n.values:
            v = self.eval(node)
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
            if type(op_node) in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                fn = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                      ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
                part = fn[type(op_node)](left, right)
            else:
                op = _CMPOPS[type(op_node)]
                la = as_expr(left) if isinstance(left, Buffer) else left
                rb = as_expr(right) if isinstance(right, Buffer) else right
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
        cond = self.eval(n.test)
        if is_device(cond):
            return Select.create(cond, self.eval(n.body), self.eval(n.orelse))
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

    def call(self, fn, args, kwargs):
        if fn in (builtins.min, builtins.max) and any(isinstance(a, (Expr, Buffer)) for a in args):
            from tilecraft.language import math as tmath

            return (tmath.min if fn is builtins.min else tmath.max)(*args)
        if fn in (builtins.float, builtins.int, builtins.bool) and args and \
                isinstance(args[0], Expr) and not isinstance(args[0], Const):
            return cast({builtins.float: "float32", builtins.int: "int32",
                         builtins.bool: "bool"}[fn], args[0])
        if fn is builtins.range:
            from tilecraft.language.loops import serial

            return serial(*args)
        args = [as_expr(a) if isinstance(a, BufferLoad) else a for a in args]
        check_call(fn, args, kwargs)  # TC111/TC112 at this line, not Python's TypeError
        return fn(*args, **kwargs)


_FRAME_NAMES = {"parallel": "Parallel", "pipelined": "Pipelined", "serial": "serial",
                "unrolled": "unroll", "vectorized": "vectorized"}


def _target_names(target) -> list[str] | None:
    if target is None:
        return None
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]
    raise TilecraftError("TC103", construct="this binding target",
                         instead="bind plain names: `as (bx, by)` / `for i, j in ...`")


def parse_prim_func(fn) -> PrimFunc:
    """Parse a Python function into a PrimFunc (the work behind `@T.prim_func`)."""
    return KernelParser(fn, parse_function_source(fn)).parse()
