"""Loops, `while`, `break` and `continue` (mixed into KernelParser).

A `for` over T.Parallel/T.Pipelined/T.serial/T.unroll/T.vectorized/range is a device loop (an
IR `For` or `ParallelLoop`); a `for` over a Python sequence is unrolled at parse time. Before a
device loop or `while` runs its body, the names the body rebinds become mutable locals
(frontend/mutable.py).

`break` and `continue`:
  * in a Python (unrolled) loop, decided at parse time: they stop or skip the unrolling, unless
    a device `if` or loop lies between (TC103);
  * `break` in T.serial/T.unroll/`while` is an IR `Break`; in T.Parallel (no order to stop in),
    T.Pipelined (later iterations are already in flight) or T.vectorized it is TC103;
  * `continue` in a device loop is TC103 (wrap the rest of the body in an `if`).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from tilecraft.diagnostics import TilecraftError, at_span
from tilecraft.ir import Break, For, LetStmt, ParallelLoop, Var, While, as_expr

from .builder import seq
from .expressions import is_device, value_of
from .frames import LoopFrame
from .mutable import Scope

FRAME_NAMES = {"parallel": "Parallel", "pipelined": "Pipelined", "serial": "serial",
               "unrolled": "unroll", "vectorized": "vectorized"}


class _PyBreak(Exception):
    pass


class _PyContinue(Exception):
    pass


@dataclass(frozen=True)
class LoopContext:
    """An enclosing loop: `kind` is a LoopFrame kind, "while" or "python"; `depth` the number
    of scopes open inside it when it started (a device block opened since is deeper)."""

    kind: str
    depth: int


def _target_names(target) -> list[str] | None:
    if target is None:
        return None
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name)
                                                         for e in target.elts):
        return [e.id for e in target.elts]
    raise TilecraftError("TC103", construct="this binding target",
                         instead="bind plain names: `as (bx, by)` / `for i, j in ...`")


class LoopStatements:
    """`for`, `while`, `break`, `continue`."""

    loops: list[LoopContext]

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
        self.loops.append(LoopContext("python", len(self.scopes)))
        try:
            for v in items:  # a Python-level loop: unrolled at parse time
                self._bind_loop_target(s.target, v)
                try:
                    for st in s.body:
                        with at_span(self.span(st)):
                            self.stmt(st)
                except _PyContinue:
                    continue
                except _PyBreak:
                    break
        finally:
            self.loops.pop()

    def _bind_loop_target(self, target: ast.expr, value) -> None:
        """A Python loop's names are bound afresh in the current block (not updates of a name
        bound outside an enclosing device loop: `for h in [0, 1]` may reuse `h`)."""
        names = _target_names(target)
        if len(names) == 1 and isinstance(target, ast.Name):
            return self._bind(names[0], value, self.span(target))
        if not hasattr(value, "__len__") or len(value) != len(names):
            raise TilecraftError("TC103", construct="tuple unpacking of this value",
                                 instead="unpack Python tuples of matching length only")
        for n, v in zip(names, value):
            self._bind(n, v, self.span(target))

    def device_loop(self, s: ast.For, frame: LoopFrame) -> None:
        names = _target_names(s.target) or []
        dims = len(frame.extents)
        if len(names) != dims:
            raise TilecraftError("TC107", what=f"T.{FRAME_NAMES[frame.kind]}", bound=len(names),
                                 dims=dims)
        if frame.kind != "parallel":
            self.make_mutable(s.body)
        self.scopes.append(Scope("parallel" if frame.kind == "parallel" else "device"))
        self.loops.append(LoopContext(frame.kind, len(self.scopes)))
        self.builder.parallel_depth += frame.kind == "parallel"
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
            self.builder.parallel_depth -= frame.kind == "parallel"
            self.loops.pop()
            self.scopes.pop()
        if frame.kind == "parallel":
            self.builder.emit(ParallelLoop(vars_, tuple(frame.extents), body, self.span(s)))
        else:
            self.builder.emit(For(vars_[0], as_expr(0 if frame.step != 1 else frame.start),
                                  as_expr(frame.extents[0]), frame.kind, body, frame.pipeline,
                                  self.span(s)))

    def stmt_While(self, s: ast.While) -> None:
        if s.orelse:
            raise TilecraftError("TC103", construct="while ... else", instead="drop the else")
        self.make_mutable(s.body)  # before the condition, which may read what the body updates
        cond = value_of(self.eval_once(s.test, "a `while` condition (evaluated once)"))
        if not is_device(cond):
            raise TilecraftError("TC103", construct="while on a Python value",
                                 instead="use `for i in range(n)` or T.serial(n)")
        self.loops.append(LoopContext("while", len(self.scopes) + 1))
        try:
            body = self.block(s.body)
        finally:
            self.loops.pop()
        self.builder.emit(While(cond, body, self.span(s)))

    def _loop_for(self, what: str) -> LoopContext:
        if not self.loops:
            raise TilecraftError("TC103", construct=f"`{what}` outside a loop",
                                 instead="use it inside a for or while loop")
        return self.loops[-1]

    def stmt_Break(self, s: ast.Break) -> None:
        loop = self._loop_for("break")
        if loop.kind == "python":
            self._parse_time_jump(loop, "break")
            raise _PyBreak()
        if loop.kind in ("parallel", "pipelined", "vectorized"):
            why = {"parallel": ("T.Parallel has no order to stop in", "guard the body with an "
                                "`if`, or loop with T.serial"),
                   "pipelined": ("T.Pipelined loads later iterations ahead of time",
                                 "loop with T.serial, or guard the body with an `if`"),
                   "vectorized": ("T.vectorized runs its iterations as one vector",
                                  "loop with T.serial, or guard the body with an `if`")}
            construct, instead = why[loop.kind]
            raise TilecraftError("TC103", construct=f"break inside T.{FRAME_NAMES[loop.kind]}",
                                 instead=f"{construct}: {instead}")
        self.builder.emit(Break(self.span(s)))

    def stmt_Continue(self, s: ast.Continue) -> None:
        loop = self._loop_for("continue")
        if loop.kind == "python":
            self._parse_time_jump(loop, "continue")
            raise _PyContinue()
        what = "while" if loop.kind == "while" else f"T.{FRAME_NAMES[loop.kind]}"
        raise TilecraftError("TC103", construct=f"continue inside {what}",
                             instead="wrap the rest of the loop body in an `if`")

    def _parse_time_jump(self, loop: LoopContext, what: str) -> None:
        """`break`/`continue` in an unrolled loop must be reached at parse time."""
        if len(self.scopes) > loop.depth:
            raise TilecraftError("TC103", construct=f"{what} under a device `if` in a Python loop",
                                 instead="the Python loop is unrolled when the kernel is built, "
                                 "so it cannot stop on a device value: loop with T.serial(n), "
                                 "or decide with a Python condition")
