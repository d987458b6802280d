"""Print IR as readable Python-like script (what `TILECRAFT_DUMP_IR` writes)."""

from __future__ import annotations

from .buffer import BufferRegion
from .expr import BinOp, BufferLoad, Call, Cast, Compare, Const, Expr, Not, Select, Var
from .stmt import (
    Allocate,
    Break,
    BufferStore,
    Evaluate,
    For,
    If,
    KernelLaunch,
    LetStmt,
    ParallelLoop,
    SeqStmt,
    Stmt,
    While,
)
from .tileops import (
    AnnotateLayout,
    Atomic,
    Copy,
    CumSum,
    DeviceAssert,
    Fill,
    Gemm,
    Print,
    Reduce,
    UseSwizzle,
)

_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "|": 5, "^": 6,
         "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10}


def expr_str(e, prec: int = 0) -> str:
    if isinstance(e, Const):
        if e.dtype.is_float:
            v = e.value
            return repr(v) if v == v and abs(v) != float("inf") else f"T.cast({v!r}, '{e.dtype}')"
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, (BinOp, Compare)):
        if e.op in ("min", "max"):
            return f"T.{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        p = _PREC[e.op]
        s = f"{expr_str(e.a, p)} {e.op} {expr_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Not):
        return f"not {expr_str(e.a, 3)}"
    if isinstance(e, Select):
        return f"T.if_then_else({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Cast):
        return f"T.cast({expr_str(e.value)}, '{e.dtype}')"
    if isinstance(e, Call):
        return f"T.{e.op}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Expr):
        return type(e).__name__
    return str(e)


def region_str(r: BufferRegion) -> str:
    if r.is_full():
        return r.buffer.name
    parts = []
    for s, x in zip(r.starts, r.extents):
        if x == 1:
            parts.append(expr_str(s))
        else:
            end = expr_str(s + x) if not isinstance(x, Expr) else f"{expr_str(s)} + {expr_str(x)}"
            parts.append(f"{expr_str(s)}:{end}")
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _arg(v) -> str:
    return region_str(v) if isinstance(v, BufferRegion) else expr_str(v)


def _tileop(s) -> str:
    if isinstance(s, Copy):
        tail = ", disable_tma=True" if s.disable_tma else ""
        return f"T.copy({region_str(s.src)}, {region_str(s.dst)}{tail})"
    if isinstance(s, Gemm):
        opts = [f"{k}=True" for k in ("transpose_A", "transpose_B", "clear_accum") if getattr(s, k)]
        opts.append(f"policy=T.GemmWarpPolicy.{s.policy}")
        args = ", ".join([region_str(s.A), region_str(s.B), region_str(s.C)] + opts)
        return f"T.gemm({args})"
    if isinstance(s, Reduce):
        return f"T.reduce_{s.kind}({region_str(s.src)}, {region_str(s.dst)}, dim={s.dim}, clear={s.clear})"
    if isinstance(s, CumSum):
        return f"T.cumsum({region_str(s.src)}, {region_str(s.dst)}, dim={s.dim}, reverse={s.reverse})"
    if isinstance(s, Fill):
        return f"T.fill({region_str(s.dst)}, {expr_str(s.value)})"
    if isinstance(s, Atomic):
        call = f"T.atomic_{s.kind}({region_str(s.dst)}, {_arg(s.src)}" + \
            ("" if s.order == "relaxed" else f", memory_order={s.order!r}")
        return f"{s.prev.buffer.name}[0] = {call}, return_prev=True)" if s.prev is not None \
            else call + ")"
    if isinstance(s, Print):
        return f"T.print({_arg(s.value)}, msg={s.msg!r})"
    if isinstance(s, DeviceAssert):
        return f"T.device_assert({expr_str(s.cond)}, {s.msg!r})"
    if isinstance(s, UseSwizzle):
        return f"T.use_swizzle({s.panel_size}, order={s.order!r})"
    if isinstance(s, AnnotateLayout):
        return "T.annotate_layout({" + ", ".join(f"{b.name}: {lay}" for b, lay in s.layouts) + "})"
    if type(s).__str__ is not Stmt.__str__:  # a statement that prints itself (block instructions)
        return str(s)
    return type(s).__name__


def control_lines(s: Stmt, ind: int, lines) -> list[str] | None:
    """`if`/`while`/let statements as script lines, nested statements printed by `lines`
    (shared by this printer and the block-program printer); None for other statements."""
    pad = "    " * ind
    if isinstance(s, If):
        out = [f"{pad}if {expr_str(s.cond)}:"] + lines(s.then_body, ind + 1)
        if s.else_body is not None:
            out += [f"{pad}else:"] + lines(s.else_body, ind + 1)
        return out
    if isinstance(s, While):
        return [f"{pad}while {expr_str(s.cond)}:"] + lines(s.body, ind + 1)
    if isinstance(s, LetStmt):
        return [f"{pad}{s.var.name} = {expr_str(s.value)}"]
    return None


def _lines(s: Stmt, ind: int) -> list[str]:
    pad = "    " * ind
    if isinstance(s, SeqStmt):
        return [ln for c in s.stmts for ln in _lines(c, ind)]
    if isinstance(s, KernelLaunch):
        grid = ", ".join(expr_str(g) for g in s.grid)
        names = ", ".join(v.name for v in s.block_vars)
        head = f"{pad}with T.Kernel({grid}, threads={s.threads[0] if len(s.threads) == 1 else s.threads}) as ({names}):"
        return [head] + _lines(s.body, ind + 1)
    if isinstance(s, For):
        if s.kind == "pipelined":
            unroll = f", unroll={s.pipeline.unroll}" if s.pipeline.unroll else ""
            it = f"T.Pipelined({expr_str(s.extent)}, num_stages={s.pipeline.num_stages}{unroll})"
        else:
            fn = {"serial": "T.serial", "unrolled": "T.unroll", "vectorized": "T.vectorized"}[s.kind]
            it = f"{fn}({expr_str(s.extent)})" if s.start == Const.create(0) else \
                f"{fn}({expr_str(s.start)}, {expr_str(s.start + s.extent)})"
        return [f"{pad}for {s.var.name} in {it}:"] + _lines(s.body, ind + 1)
    if isinstance(s, ParallelLoop):
        names = ", ".join(v.name for v in s.vars)
        ext = ", ".join(expr_str(e) for e in s.extents)
        return [f"{pad}for {names} in T.Parallel({ext}):"] + _lines(s.body, ind + 1)
    control = control_lines(s, ind, _lines)
    if control is not None:
        return control
    if isinstance(s, Allocate):
        b = s.buffer
        fn = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local",
              "var": "alloc_var", "global": "alloc_global"}[b.scope]
        return [f"{pad}{b.name} = T.{fn}({_shape(b.shape)}, '{b.dtype}')"]
    if isinstance(s, BufferStore):
        idx = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}"]
    if isinstance(s, Evaluate):
        return [f"{pad}T.evaluate({expr_str(s.value)})"]
    if isinstance(s, Break):
        return [f"{pad}break"]
    return [pad + _tileop(s)]


def _shape(shape) -> str:
    inner = ", ".join(expr_str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def stmt_str(s: Stmt, indent: int = 0) -> str:
    return "\n".join(_lines(s, indent))


def func_str(f) -> str:
    from .buffer import Buffer

    params = []
    for p in f.params:
        if isinstance(p, Buffer):
            params.append(f"{p.name}: T.Tensor({_shape(p.shape)}, '{p.dtype}')")
        else:
            params.append(f"{p.name}: T.{p.dtype}")
    head = ["@T.prim_func", f"def {f.name}({', '.join(params)}):"]
    return "\n".join(head + _lines(f.body, 1))
