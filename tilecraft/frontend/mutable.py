"""Mutable locals: a name rebound inside a device `if` or loop keeps its new value after it.

Python code rebinds names freely; IR values are bound once. Straight-line rebinding needs
nothing (`v = v * 2` binds a new value to `v` for the statements after it). A name that a device
`if`, loop or `while` rebinds, and that was bound before it, must be one storage location that
the construct updates: before entering the construct the parser turns such a name into a
one-element `var` buffer (what `T.alloc_var` makes), initialised with its current value and of
that value's dtype. Later assignments store to it, reads load it:

    x = 0.0                          x = alloc_var(float32); x[0] = 0.0
    for k in T.serial(4):     ->     for k in serial(4):
        x = x + A[k]                     x[0] = x[0] + A[k]
    B[0] = x                         B[0] = x[0]

A name first bound in both branches of a device `if` becomes a var too, at its first
assignment. What cannot be honoured is a located error, never a lost update:
  * a value of another dtype stored to such a name (TC115; exact widening is allowed);
  * a rebinding inside T.Parallel of a name bound outside it, or in an `if`/loop nested in a
    T.Parallel body: values there are per element and a var is one scalar (TC116);
  * a rebinding inside a device construct of a name that holds no number (a buffer, a tuple).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from tilecraft import dtypes as dt
from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import Allocate, Buffer, BufferStore, Const, Expr, LetStmt, Var, as_expr, cast

from .scan import assigned_names


class Scope(dict):
    """The names one block binds. `kind`: "plain" (function, kernel body), "device" (a branch of
    a device `if`, or the body of a serial/pipelined/unrolled loop or `while`), "parallel"
    (a T.Parallel body). `spans` records where each name got its value."""

    def __init__(self, kind: str = "plain"):
        super().__init__()
        self.kind = kind
        self.spans: dict[str, Span | None] = {}


@dataclass
class Unassigned:
    """A name that both branches of the device `if` at `span` assign and nothing bound
    before: its var is made (in `frame`, before the `if`) at the first assignment."""

    name: str
    frame: list
    span: Span | None
    parallel: bool
    why: str = ""


def is_var(v) -> bool:
    return isinstance(v, Buffer) and v.scope == "var"


def number_dtype(v) -> dt.DataType | None:
    """The dtype a mutable local made from `v` has (None when `v` is not a number)."""
    if isinstance(v, Expr):
        return v.dtype
    if isinstance(v, (bool, int, float)):
        return as_expr(v).dtype
    return None


def widens(src: dt.DataType, dst: dt.DataType) -> bool:
    """Whether every `src` value converts exactly to `dst` (a store that loses nothing)."""
    if src == dst:
        return True
    if src.is_float:
        return dst.is_float and dst.name in ("float32", "float64") and src.bits < dst.bits
    if src.kind == "bool":
        return dst.kind in ("int", "uint")
    if src.kind == "uint":
        return (dst.kind == "uint" and dst.bits >= src.bits) or (dst.kind == "int"
                                                                 and dst.bits > src.bits)
    return src.kind == "int" and dst.kind == "int" and dst.bits >= src.bits


def _what(v) -> str:
    if isinstance(v, Buffer):
        return f"buffer `{v.name}`"
    return f"a Python {type(v).__name__}"


class MutableLocals:
    """The parser's name bindings (mixed into KernelParser, which provides `scopes`, `builder`
    and `span`)."""

    scopes: list[Scope]
    builder: Any
    auto_vars: dict[Buffer, tuple[Span | None, Any]]  # var -> (first value's span, value)

    # ---- lookup ------------------------------------------------------------------------
    def find(self, name: str) -> tuple[int | None, Any]:
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i]:
                return i, self.scopes[i][name]
        return None, None

    def crossed(self, idx: int) -> set[str]:
        """Kinds of the blocks entered since scope `idx` (the one that binds a name)."""
        return {s.kind for s in self.scopes[idx + 1:]}

    def inside_parallel(self) -> bool:
        return any(s.kind == "parallel" for s in self.scopes)

    def read_local(self, name: str, value):
        """`value` bound to `name`, checked for use (an `Unassigned` name is an error)."""
        if isinstance(value, Unassigned):
            if value.parallel or value.why:
                raise self._cannot_update(name, value.why or self._per_element_if_why())
            raise TilecraftError("TC104", name=name)
        return value

    # ---- entering a device construct ---------------------------------------------------
    def make_mutable(self, body: list[ast.stmt], orelse: list[ast.stmt] | None = None) -> None:
        """Before a device `if` (`body`, `orelse`), loop or `while` (`body`): make the names
        it rebinds mutable locals, and mark names both branches of an `if` bind."""
        parallel = self.inside_parallel()
        names = assigned_names(body) | assigned_names(orelse or [])
        for name in sorted(names):
            idx, cur = self.find(name)
            if idx is None or parallel or is_var(cur) or isinstance(cur, Unassigned):
                continue
            dtype = number_dtype(cur)
            if dtype is not None:
                self.scopes[idx][name] = self._new_var(name, dtype, cur, self.scopes[idx]
                                                       .spans.get(name))
        if orelse:
            both = assigned_names(body) & assigned_names(orelse)
            for name in sorted(both):
                if self.find(name)[0] is None:
                    self.scopes[-1][name] = Unassigned(name, self.builder.frames[-1],
                                                       self._span_now(), parallel)

    def _new_var(self, name: str, dtype: dt.DataType, init, first: Span | None,
                 frame: list | None = None) -> Buffer:
        buf = Buffer.create(self.builder.unique_name(name), (1,), dtype, "var")
        stmts = [Allocate(buf, buf.span)]
        if init is not None:
            stmts.append(BufferStore(buf, (Const.create(0),), as_expr(init, dtype), buf.span))
        for s in stmts:
            if frame is None:
                self.builder.emit(s)
            else:
                frame.append(s)
        self.auto_vars[buf] = (first, init)
        return buf

    # ---- assignment to a name ----------------------------------------------------------
    def store_name(self, target: ast.Name, value) -> None:
        name, span = target.id, self.span(target)
        idx, cur = self.find(name)
        if idx is None:
            return self._bind(name, value, span)
        crossed = self.crossed(idx)
        if isinstance(cur, Unassigned):
            return self._first_branch_value(idx, cur, value, span)
        if is_var(cur) and not isinstance(value, Buffer):
            if self.inside_parallel():  # a var is one scalar; T.Parallel values are per element
                raise self._cannot_update(name, self._per_element_why(cur))
            if cur not in self.auto_vars:  # T.alloc_var: a declared type, stores convert
                self.builder.emit(BufferStore(cur, (Const.create(0),), cast(cur.dtype, value),
                                              span))
                return None
            if not crossed - {"plain"} and not (isinstance(value, Expr) and
                                                value.dtype == cur.dtype):
                return self._bind(name, value, span)  # straight-line: a new value
            return self._store_mutable(name, cur, value, span)
        if crossed - {"plain"}:
            if self.inside_parallel():
                raise self._cannot_update(name, self._per_element_why(cur) if "parallel" in
                                          crossed else self._per_element_if_why())
            raise self._cannot_update(name, f"it holds {_what(cur)}, bound before this device "
                                      "`if` or loop, and only numbers can change inside one")
        return self._bind(name, value, span)

    def _bind(self, name: str, value, span: Span | None) -> None:
        if isinstance(value, Expr) and not isinstance(value, Const):
            var = Var.create(self.builder.unique_name(name), value.dtype, span)
            self.builder.emit(LetStmt(var, value, span))
            value = var
        self.scopes[-1][name] = value
        self.scopes[-1].spans[name] = span

    def _first_branch_value(self, idx: int, marker: Unassigned, value, span) -> None:
        dtype = number_dtype(as_expr(value) if is_var(value) else value)
        if marker.parallel or dtype is None:
            if dtype is None:
                marker.why = (f"it is assigned {_what(value)} in a branch of a device `if`, "
                              "and only numbers can be chosen on the device")
            return self._bind(marker.name, value, span)
        buf = self._new_var(marker.name, dtype, None, span, frame=marker.frame)
        self.scopes[idx][marker.name] = buf
        return self._store_mutable(marker.name, buf, value, span)

    def _store_mutable(self, name: str, buf: Buffer, value, span: Span | None) -> None:
        if is_var(value):
            value = as_expr(value)
        held = buf.dtype
        if isinstance(value, (bool, int, float)):
            ok = isinstance(value, bool) or (held.kind != "bool" and
                                             (held.is_float or isinstance(value, int)))
            got = number_dtype(value)
        elif isinstance(value, Expr):
            ok, got = widens(value.dtype, held), value.dtype
        else:
            raise self._cannot_update(name, f"it holds a number of type {held} and cannot take "
                                      f"{_what(value)}")
        if not ok:
            first, init = self.auto_vars.get(buf, (None, None))
            at = f" (line {first.line})" if first is not None else ""
            start = (f"`{name} = {float(init)!r}`" if got.is_float and isinstance(init, int)
                     else f"`{name} = T.cast(..., \"{got}\")`")
            raise TilecraftError("TC115", name=name, held=held, got=got, at=at,
                                 hint=f"`{name}` is updated inside a device `if` or loop, so it "
                                 f"keeps the type of its first value{at}: convert this one "
                                 f"(`T.cast(..., \"{held}\")`) or start from a {got} value "
                                 f"({start})")
        self.builder.emit(BufferStore(buf, (Const.create(0),), cast(held, value), span))

    # ---- errors ------------------------------------------------------------------------
    def _per_element_why(self, cur) -> str:
        if is_var(cur):
            return ("it is a one-element `var` buffer, and inside T.Parallel every element "
                    "would write its own value to it")
        return ("T.Parallel runs once per element, and every element would write its own value "
                "to this one name bound outside the loop")

    def _per_element_if_why(self) -> str:
        return ("inside T.Parallel each element has its own values, and an `if` or loop nested "
                "there cannot update them")

    def _cannot_update(self, name: str, why: str) -> TilecraftError:
        if self.inside_parallel() or "T.Parallel" in why:
            hint = (f"choose per element with `{name} = T.if_then_else(cond, a, b)`, use a new "
                    "name, or keep per-element values in a fragment indexed by the loop "
                    "variables (reductions: T.reduce_sum, T.reduce_max)")
        else:
            hint = "decide it with a Python value (a compile-time `if`), or use a new name"
        return TilecraftError("TC116", name=name, why=why, hint=hint)

    def _span_now(self) -> Span | None:
        from tilecraft.diagnostics import current_span

        return current_span()
