"""The NaN debugger's messages (TC404): where the bad value was made (element, loop iteration,
block) and why (the operation with its operands' values), in the names the user wrote."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (Atomic, BinOp, BufferLoad, BufferRegion, Call, Cast, Expr, Reduce, Select,
                          Var)
from tilecraft.ir.printer import expr_str

from .ops.common import bounds

_LIMIT = 6  # operand values listed at most


def fmt(v) -> str:
    v = np.asarray(v)[()]
    if isinstance(v, (np.floating, float)):
        return f"{float(v):.6g}"
    return str(v)


def _kind(v) -> str:
    v = float(np.asarray(v)[()])
    return "NaN" if v != v else ("inf" if v > 0 else "-inf")


def display_name(var: Var) -> str:
    """`var`'s name as the user wrote it: the front end renames a reused `i` to `i_2`."""
    text = var.span.source_line() if var.span is not None else ""
    if re.search(rf"\b{re.escape(var.name)}\b", text):
        return var.name
    base = re.sub(r"_\d+$", "", var.name)
    return base if base != var.name and re.search(rf"\b{re.escape(base)}\b", text) else var.name


def show(e: Expr) -> str:
    """The expression as source, loop variables under the user's names."""
    return expr_str(_renamed(e))


def _renamed(e):
    if isinstance(e, Var):
        return dataclasses.replace(e, name=display_name(e))
    if not isinstance(e, Expr):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            changes[f.name] = _renamed(v)
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            changes[f.name] = tuple(_renamed(x) for x in v)
    return dataclasses.replace(e, **changes) if changes else e


def where(m, at: dict, buffer, element: tuple) -> str:
    """`at acc_s[0, 5] (i = 0, j = 5) in block (0, 0, 0), k = 1` (`buffer`: the buffer written,
    or the variable a let binds)."""
    from .nan_check import loop_vars

    parts = []
    if isinstance(buffer, Var):
        parts.append(f"for `{display_name(buffer)}`")
    elif buffer is not None and element:
        parts.append(f"at {buffer.name}[{', '.join(str(i) for i in element)}]")
    if at:
        parts.append("(" + ", ".join(f"{display_name(v)} = {i}" for v, i in at.items()) + ")")
    parts.append(f"in block {tuple(int(b) for b in m.block_index)}")
    iters = [f"{display_name(v)} = {int(m.env[v])}" for v in loop_vars(m)
             if v in m.env and np.ndim(m.env[v]) == 0]
    return " ".join(parts) + (", " + ", ".join(iters) if iters else "")


def region_element(m, r: BufferRegion, k: int) -> tuple[int, ...]:
    """The buffer index of the `k`-th element (row-major) of region `r`."""
    starts, extents = bounds(m, r)
    return tuple(int(s + i) for s, i in zip(starts, np.unravel_index(k, extents)))


def op_name(op) -> str:
    if isinstance(op, Reduce):
        return f"T.reduce_{op.kind}"
    if isinstance(op, Atomic):
        return f"T.atomic_{op.kind}"
    return f"T.{op.op_name}"


# ---- element-wise statements ---------------------------------------------------------------
def _operation(nodes, e: Expr, pos: tuple) -> str:
    """What the node computed, with its operands' values: `-inf - -inf`, `T.exp2(200)`."""
    from .nan_check import operands

    vals = [fmt(nodes.value(o)[pos]) for o in operands(e)]
    if isinstance(e, BinOp):
        return f"T.{e.op}({vals[0]}, {vals[1]})" if e.op in ("min", "max") else \
            f"{vals[0]} {e.op} {vals[1]}"
    if isinstance(e, Call):
        return f"T.{e.op}({', '.join(vals)})"
    if isinstance(e, Cast):
        return f"{vals[0]} converted to {e.dtype}"
    return fmt(nodes.value(e)[pos])


def _inputs(nodes, e: Expr, pos: tuple) -> list[str]:
    """The loads and float variables `e` reads, with their indices and values at `pos`."""
    out: list[str] = []

    def visit(x):
        if len(out) >= _LIMIT or isinstance(x, Select):
            return
        if isinstance(x, BufferLoad):
            idx = ", ".join(str(int(nodes.value(i)[pos])) for i in x.indices)
            item = f"{x.buffer.name}[{idx}] = {fmt(nodes.value(x)[pos])}"
        elif isinstance(x, Var) and x.dtype.is_float:
            item = f"{display_name(x)} = {fmt(nodes.value(x)[pos])}"
        else:
            from .nan_check import operands

            for o in operands(x):
                visit(o)
            return
        if item not in out:
            out.append(item)

    visit(e)
    return out


def expression(m, nodes, path: list[Expr], pos: tuple, where_: str) -> TilecraftError:
    root, origin = path[0], path[-1]
    why = f"`{show(origin)}` is {_operation(nodes, origin, pos)}"
    if len(path) > 1:
        x = Var("x", path[1].dtype)
        outer = show(_replace(root, path[1], x))
        link = "x = " if len(path) == 2 else "x depends on "
        why = f"`{outer}` gets x = {fmt(nodes.value(path[1])[pos])}; {link}{why}"
    ins = _inputs(nodes, origin, pos)
    if ins:
        why += ", where " + ", ".join(ins)
    return TilecraftError("TC404", value=_kind(nodes.value(origin)[pos]), where=where_,
                          detail=why, hint=_hint(nodes, origin, pos))


def _replace(e: Expr, old: Expr, new: Expr) -> Expr:
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if v is old:
            changes[f.name] = new
        elif isinstance(v, tuple) and any(x is old for x in v):
            changes[f.name] = tuple(new if x is old else x for x in v)
    return dataclasses.replace(e, **changes)


def _hint(nodes, e: Expr, pos: tuple) -> str:
    from .nan_check import operands

    vals = [float(np.asarray(nodes.value(o)[pos])) for o in operands(e)]
    nan = np.isnan(float(np.asarray(nodes.value(e)[pos])))
    if isinstance(e, BinOp) and e.op in ("+", "-") and nan:
        return ("inf - inf is NaN: a max over a row whose values are all -inf (every element "
                "masked) is -inf too; keep it finite (for instance T.max with the previous max) "
                "or guard the difference with T.if_then_else")
    if isinstance(e, BinOp) and e.op == "*" and nan:
        return "0 * inf is NaN: guard the infinite operand"
    if isinstance(e, BinOp) and e.op in ("/", "//", "%"):
        return "a division by zero (or 0 / 0, inf / inf): guard the denominator"
    if isinstance(e, Call) and e.op in ("exp", "exp2") and not nan:
        return (f"T.{e.op}({fmt(vals[0])}) overflows {e.dtype}: keep the exponent small (a "
                "softmax subtracts the row max first)")
    if isinstance(e, Call) and nan:
        return f"the operand {fmt(vals[0])} is outside the domain of T.{e.op}"
    if isinstance(e, Cast) and not nan:
        return (f"the value does not fit {e.dtype} (largest finite {fmt(e.dtype.max)}): scale it, "
                "or use a wider type")
    return (f"the result does not fit {e.dtype}" if not nan else
            "NaN and inf that come in through the kernel's inputs are not reported; this one is "
            "computed here")


def store_overflow(buffer, value: float, stored, where_: str) -> TilecraftError:
    return TilecraftError(
        "TC404", value=_kind(stored), where=where_,
        detail=f"storing {fmt(value)} to {buffer.dtype} buffer `{buffer.name}` rounds it to "
        f"{fmt(stored)}", hint=f"the value does not fit {buffer.dtype}: scale it, or store it in "
        "a wider type")


# ---- tile ops: (value, detail, hint) ---------------------------------------------------------
def _vector(name: str, v: np.ndarray) -> str:
    v = np.asarray(v, np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(v))
    if len(bad):
        shown = ", ".join(f"{fmt(v[k])} at {k}" for k in bad[:3])
        return f"{name} has {shown}"
    return f"{name} is finite (largest magnitude {fmt(np.abs(v).max() if v.size else 0)})"


def copy(op, src, out) -> tuple[str, str, str]:
    return (_kind(out), f"{fmt(src)} from `{op.src.buffer.name}` becomes {fmt(out)} in "
            f"{op.dst.dtype}", f"the value does not fit {op.dst.dtype}: scale it or copy to a "
            "wider type")


def gemm(op, i: int, j: int, a_row, b_col, c_old, out) -> tuple[str, str, str]:
    a = f"{'column' if op.transpose_A else 'row'} {i} of `{op.A.buffer.name}`"
    b = f"{'row' if op.transpose_B else 'column'} {j} of `{op.B.buffer.name}`"
    parts = [_vector(a, a_row), _vector(b, b_col)]
    if c_old is not None:
        parts.append(f"`{op.C.buffer.name}` held {fmt(c_old)} before")
    hint = ("inf * 0 and inf - inf inside the dot product give NaN" if _kind(out) == "NaN"
            else f"the dot product overflows {op.C.dtype}")
    return _kind(out), f"the dot product is {fmt(out)}: " + "; ".join(parts), hint


def reduce(op, row, old, out) -> tuple[str, str, str]:
    detail = (f"the {op.kind} of `{op.src.buffer.name}` along dim {op.dim} is {fmt(out)}: "
              + _vector("its row", row).replace(" at ", " at position "))
    if old is not None:
        detail += f"; `{op.dst.buffer.name}` held {fmt(old)} before"
    hint = ("inf + -inf is NaN" if _kind(out) == "NaN"
            else f"the {op.kind} overflows {op.dst.dtype}")
    return _kind(out), detail, hint


def whole(op, out) -> tuple[str, str, str]:
    return (_kind(out), f"the result is {fmt(out)} while its inputs have no NaN"
            f"{'' if _kind(out) == 'NaN' else ' or inf'}", "")
