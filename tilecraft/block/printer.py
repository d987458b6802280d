"""Print a block program as readable Tilus-style script (Tilus Figure 2), used by `str(program)`
and in IR dumps:

    def matmul<4, 8>(a: global float16[256, 128], b: global float16[128, 64], ...):  # 128 threads
        bi, bj = block_indices()
        acc = allocate_register(float32[64, 8], layout=spatial(4, 1).local(2, 1)..., init=0.0)
        for bk in range(8):
            load_global(a, offset=[bi * 64, bk * 16], out=ta)
            dot(ta, tb, acc, out=acc)

Register layouts print as their `Fragment` repr (a chain of primitives), shared layouts compactly.
"""

from __future__ import annotations

from tilecraft.ir import Const, For, SeqStmt, Stmt, Var
from tilecraft.ir.printer import control_lines, expr_str
from tilecraft.ir.printer import stmt_str as tile_stmt_str
from tilecraft.layout import SharedLayout, row_major

from . import instructions as bi
from . import transfer as tr
from .compute import BinaryOp, Cast, Dot, Fill, Fma, ReduceRegister, UnaryOp, View
from .roles import WarpRoles, launch_threads
from .tensors import BlockTensor, RegisterTensor, SharedTensor


def shared_layout_str(layout: SharedLayout) -> str:
    """`row_major(64, 32)` (with `.with_swizzle(Swizzle(bits, base, shift))`) when it is one,
    else its modes and strides."""
    plain = layout.with_swizzle(None)
    text = f"row_major({', '.join(map(str, layout.shape))})" if plain == row_major(*layout.shape) \
        else f"SharedLayout(modes={list(layout.mode_shape)}, strides={list(layout.mode_strides)})"
    sw = layout.swizzle
    return text if sw is None else f"{text}.with_swizzle(Swizzle({sw.bits}, {sw.base}, {sw.shift}))"


def _operand(x) -> str:
    return x.name if isinstance(x, BlockTensor) else expr_str(x)


def _offset(s) -> str:
    text = f"offset=[{', '.join(expr_str(o) for o in s.offset)}]"
    whole, tile = s.whole, s.tile
    default = tuple(range(whole.ndim - tile.ndim, whole.ndim))
    return text if tuple(s.dims) == default else f"{text}, dims={list(s.dims)}"


def instruction_str(s: bi.Instruction) -> str:
    """One instruction as a line of script (without indentation)."""
    if isinstance(s, bi.AllocateRegister):
        t = s.out
        init = "" if s.init is None else f", init={expr_str(s.init)}"
        return f"{t.name} = allocate_register({t.type_str()}, layout={t.layout!r}{init})"
    if isinstance(s, bi.AllocateShared):
        t = s.out
        return (f"{t.name} = allocate_shared({t.type_str()}, "
                f"layout={shared_layout_str(t.layout)})")
    if isinstance(s, bi.AllocateGlobal):
        return f"{s.out.name} = allocate_global({s.out.type_str()})"
    if isinstance(s, bi.ViewGlobal):
        return f"{s.out.name} = view_global({s.src.name}, {s.out.type_str()})"
    if isinstance(s, (tr.LoadGlobal, tr.LoadShared)):
        return f"{s.NAME}({s.src.name}, {_offset(s)}, out={s.out.name})"
    if isinstance(s, (tr.StoreGlobal, tr.StoreShared)):
        return f"{s.NAME}({s.src.name}, {s.dst.name}, {_offset(s)})"
    if isinstance(s, tr.CopyAsync):
        tail = "" if s.bulk_ok else ", disable_tma=True"
        return f"copy_async({s.dst.name}, {s.src.name}, {_offset(s)}{tail})"
    if isinstance(s, tr.SharedSlice):
        lead = ", ".join(expr_str(o) for o in s.offset[: s.src.ndim - s.out.ndim])
        return f"{s.out.name} = shared_slice({s.src.name}, [{lead}])"
    if isinstance(s, tr.CopyAsyncWaitGroup):
        return f"copy_async_wait_group({s.n})"
    if isinstance(s, BinaryOp):
        return f"{s.name}({_operand(s.a)}, {_operand(s.b)}, out={s.out.name})"
    if isinstance(s, Fma):
        return f"fma({_operand(s.a)}, {_operand(s.b)}, {_operand(s.c)}, out={s.out.name})"
    if isinstance(s, UnaryOp):
        return f"{s.op}({s.src.name}, out={s.out.name})"
    if isinstance(s, (Cast, View)):
        return f"{s.NAME}({s.src.name}, out={s.out.name})"
    if isinstance(s, Dot):
        return f"dot({s.a.name}, {s.b.name}, {s.c.name}, out={s.out.name})"
    if isinstance(s, Fill):
        return f"fill({s.out.name}, {expr_str(s.value)})"
    if isinstance(s, ReduceRegister):
        clear = "" if s.clear else ", clear=False"
        return f"reduce_{s.kind}({s.src.name}, out={s.out.name}, dim={s.dim}{clear})"
    if isinstance(s, bi.Print):
        msg = f", msg={s.msg!r}" if s.msg else ""
        return f"print({s.tensor.name}{msg})"
    script = getattr(s, "script", None)  # instructions that print themselves (parallel.py)
    return script() if callable(script) else f"{s.NAME}()"


def _lines(s: Stmt, ind: int) -> list[str]:
    pad = "    " * ind
    if isinstance(s, SeqStmt):
        return [ln for c in s.stmts for ln in _lines(c, ind)]
    if isinstance(s, bi.Instruction):
        body = getattr(s, "body", None)  # `parallel` holds a body of Tile IR statements
        nested = _lines(body, ind + 1) if isinstance(body, Stmt) else []
        return [pad + instruction_str(s)] + nested
    if isinstance(s, For):
        rng = expr_str(s.extent) if s.start == Const.create(0) else \
            f"{expr_str(s.start)}, {expr_str(s.start + s.extent)}"
        kind = "" if s.kind == "serial" else f"  # {s.kind}"
        return [f"{pad}for {s.var.name} in range({rng}):{kind}"] + _lines(s.body, ind + 1)
    if isinstance(s, WarpRoles):
        return ([f"{pad}{s.script_head()}:", f"{pad}    producer:"] + _lines(s.producer, ind + 2)
                + [f"{pad}    consumer:"] + _lines(s.consumer, ind + 2))
    control = control_lines(s, ind, _lines)
    if control is not None:
        return control
    return [pad + ln for ln in tile_stmt_str(s).splitlines()]


def _param(p) -> str:
    if isinstance(p, Var):
        return f"{p.name}: {p.dtype}"
    return f"{p.name}: global {p.type_str()}"


def program_str(program) -> str:
    """The whole program: signature with grid and threads, block indices, body."""
    grid = ", ".join(expr_str(g) for g in program.grid)
    params = ", ".join(_param(p) for p in program.params)
    threads = launch_threads(program)
    extra = f" ({program.num_threads} consumers)" if threads != program.num_threads else ""
    head = f"def {program.name}<{grid}>({params}):  # {threads} threads{extra}"
    names = ", ".join(v.name for v in program.block_vars)
    return "\n".join([head, f"    {names} = block_indices()"] + _lines(program.body, 1))


def tensor_str(t: BlockTensor) -> str:
    """`register float32[64, 8] layout=...` (for messages and dumps)."""
    if isinstance(t, RegisterTensor):
        return f"register {t.type_str()} layout={t.layout!r}"
    if isinstance(t, SharedTensor):
        return f"shared {t.type_str()} layout={shared_layout_str(t.layout)}"
    return f"global {t.type_str()}"


__all__ = ["instruction_str", "program_str", "shared_layout_str", "tensor_str"]
