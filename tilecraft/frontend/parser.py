"""Python AST -> Tile IR.

The parser walks the kernel's AST and evaluates it: Python values (closure constants, ints,
shapes) are computed at parse time; anything that depends on a device value becomes IR.
  * `if` on a Python constant picks a branch now; on a device value it becomes an IR `If`;
  * `v = expr` with a device value is a `LetStmt`; with a Python value it is a parse-time binding;
    a name rebound inside a device `if` or loop is a mutable local (frontend/mutable.py);
  * `with T.Kernel(...) as (bx, by)` and `for ... in T.Parallel/T.Pipelined/range(...)` open
    IR blocks (frontend/control.py); calls such as `T.copy(...)` append their statements to the
    innermost block; expressions are evaluated by frontend/expressions.py, Python built-ins on
    device values mapped by frontend/pycalls.py.
Every statement is processed under its span, so errors point at the user's line.
"""

from __future__ import annotations

import ast
import builtins
import sys

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import (
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Const,
    Evaluate,
    KernelLaunch,
    LetStmt,
    PrimFunc,
    Var,
    as_expr,
    cast,
)
from tilecraft.language.surface import check_call

from .builder import Builder, KernelFrameInfo, building, seq
from .control import LoopStatements, _target_names
from .expressions import ExprEvaluator, is_device, tile_operand, value_of
from .frames import KernelFrame, TensorSpec
from .mutable import MutableLocals, Scope, is_var
from .pycalls import NOT_HANDLED, python_call
from .source import SourceInfo, parse_function_source

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


def _unsupported(node: ast.AST) -> TilecraftError:
    construct, instead = _UNSUPPORTED.get(type(node), (type(node).__name__, "rewrite it with the "
                                                       "constructs in tilecraft.language"))
    return TilecraftError("TC103", construct=construct, instead=instead)


unsupported = _unsupported


class KernelParser(ExprEvaluator, LoopStatements, MutableLocals):
    """Evaluates one kernel function's AST into a PrimFunc."""

    def __init__(self, fn, src: SourceInfo):
        self.fn = fn
        self.src = src
        self.builder = Builder()
        self.scopes: list[Scope] = [Scope()]
        self.auto_vars = {}  # mutable locals the parser made -> where their first value was
        self.loops = []  # enclosing loops (control.py)
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    closure[name] = cell.cell_contents
                except ValueError:  # empty cell: a name assigned after the def
                    pass
        self.closure = closure
        self.globals = fn.__globals__
        #: the defining function's locals: names a kernel reads only in string annotations
        #: (`from __future__ import annotations`) are in no closure cell
        self.enclosing = _enclosing_locals(fn)

    # ---- names -------------------------------------------------------------------------
    def lookup(self, name: str):
        idx, value = self.find(name)
        if idx is not None:
            return self.read_local(name, value)
        if name in self.closure:
            return self.closure[name]
        if name in self.enclosing:
            return self.enclosing[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise TilecraftError("TC104", name=name)

    def bind(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    # ---- entry -------------------------------------------------------------------------
    def parse(self) -> PrimFunc:
        fdef = self.src.tree
        params = []
        dynamic: dict[int, Var] = {}
        with building(self.builder):
            for arg in fdef.args.args:
                with at_span(self.src.span(arg)):
                    params.append(self._param(arg, dynamic))
                self.builder.unique_name(arg.arg)  # (taken: a local or hidden name gets a suffix)
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
    def block(self, stmts: list[ast.stmt], new_scope: bool = True, kind: str = "device"):
        if new_scope:
            self.scopes.append(Scope(kind))
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

    def stmt_Assert(self, s: ast.Assert) -> None:
        cond = value_of(self.eval(s.test))
        msg = self.eval(s.msg) if s.msg is not None else ""
        if isinstance(cond, Buffer):
            cond = as_expr(cond)
        if is_device(cond):
            from tilecraft.ir import DeviceAssert

            self.builder.emit(DeviceAssert(cond, str(msg), self.span(s)))
        elif not (cond.value if isinstance(cond, Const) else cond):
            raise TilecraftError("TC120", msg=f": {msg}" if msg != "" else "")

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
        if annotation is not None and (is_device(value) or isinstance(value, Buffer)):
            value = cast(annotation, value_of(value))
        self.store(target, value)

    def store(self, target: ast.expr, value) -> None:
        if isinstance(target, ast.Name):
            if is_var(value) and self._is_bound(value):
                value = as_expr(value)  # `y = x` copies the current value of var `x`
            self.store_name(target, value)
        elif isinstance(target, ast.Subscript):
            obj = tile_operand(self.eval(target.value))
            idx = self.eval_index(target.slice)
            if type(obj).__name__ == "RemoteBuffer":
                raise TilecraftError("TC103", construct="a store to T.remote(...)",
                                     instead="each block writes its own shared memory; the "
                                     "others read it through T.remote after T.cluster_sync()")
            if not isinstance(obj, Buffer):
                raise TilecraftError("TC103", construct="item assignment on a Python value",
                                     instead="assign to buffer elements: `buf[i, j] = v`")
            ref = self.subscript(obj, idx)
            if isinstance(ref, BufferRegion):
                raise TilecraftError("TC103", construct="assignment to a slice",
                                     instead="use T.copy(src, dst[...]) or T.fill(dst[...], v)")
            if is_var(obj) and self.inside_parallel():
                raise self._cannot_update(obj.name, self._per_element_why(obj))
            self.builder.emit(BufferStore(obj, ref.indices, cast(obj.dtype, value_of(value)),
                                          self.span(target)))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if is_device(value) or not hasattr(value, "__len__") or len(value) != len(target.elts):
                raise TilecraftError("TC103", construct="tuple unpacking of this value",
                                     instead="unpack Python tuples of matching length only")
            for t, v in zip(target.elts, [self._snapshot(v) for v in value]):
                self.store(t, v)
        else:
            raise _unsupported(target)

    def _snapshot(self, value):
        """A device value as it is now (`a, b = b, a + b` reads both before storing either)."""
        value = value_of(value)
        if not is_device(value) or isinstance(value, Var):
            return value
        var = Var.create(self.builder.unique_name("tmp"), value.dtype)
        self.builder.emit(LetStmt(var, value))
        return var

    def _is_bound(self, buf: Buffer) -> bool:
        """Whether a name holds `buf` (else it is new: `x = T.alloc_var(...)`)."""
        return any(v is buf for scope in self.scopes for v in scope.values())

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        from .expressions import BINOPS

        op = BINOPS[type(s.op)]
        t = s.target
        if isinstance(t, (ast.Subscript, ast.Name)):
            cur = self.eval(t)
            rhs = self.eval(s.value)
            with at_span(self.span(s)):
                self.store(t, self.binop(op, cur, rhs))
        else:
            raise _unsupported(t)

    def stmt_If(self, s: ast.If) -> None:
        cond = value_of(self.eval(s.test))
        if isinstance(cond, Buffer):
            cond = as_expr(cond)
        if is_device(cond):
            from tilecraft.ir import If

            self.make_mutable(s.body, s.orelse)
            then = self.block(s.body)
            other = self.block(s.orelse) if s.orelse else None
            self.builder.emit(If(cond, then, other, self.span(s)))
            return
        if isinstance(cond, Const):
            cond = cond.value
        for st in (s.body if cond else s.orelse):
            with at_span(self.span(st)):
                self.stmt(st)

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
        self.builder.kernel = KernelFrameInfo(frame.threads, tvars, bvars,
                                              len(self.builder.frames),  # (the body's)
                                              frame.cluster)
        self.scopes.append(Scope())
        try:
            for n, v in zip(names, bvars):
                self.bind(n, v)
            body = self.block(s.body, new_scope=False)
        finally:
            self.scopes.pop()
            self.builder.kernel = None
        grid = tuple(as_expr(g) for g in frame.grid)
        self.builder.emit(KernelLaunch(grid, bvars, frame.threads, tvars, body, self.span(s),
                                       frame.cluster))

    # ---- calls -------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        mapped = python_call(fn, args, kwargs)  # abs, min, math.sqrt, ... on device values
        if mapped is not NOT_HANDLED:
            return mapped
        if fn is builtins.range:
            from tilecraft.language.loops import serial

            return serial(*args)
        args = [as_expr(a) if isinstance(a, BufferLoad) else a for a in args]
        check_call(fn, args, kwargs)  # TC111/TC112 at this line, not Python's TypeError
        return fn(*args, **kwargs)


def _enclosing_locals(fn) -> dict:
    """The locals of the function that defines `fn`, while it runs (a factory applying
    T.prim_func to its nested kernel); {} when that frame is not on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if fn.__code__ in frame.f_code.co_consts:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def parse_prim_func(fn) -> PrimFunc:
    """Parse a Python function into a PrimFunc (the work behind `@T.prim_func`)."""
    return KernelParser(fn, parse_function_source(fn)).parse()
