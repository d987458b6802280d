"""The IR builder: a stack of statement lists that language functions append to.

The parser opens a frame for each block it visits (kernel body, loop body, branch); calls such
as `T.copy(...)` append their statement to the innermost frame. Outside a kernel there is no
builder, and language functions say so (TC105).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from tilecraft.diagnostics import TilecraftError, current_span
from tilecraft.ir import KernelLaunch, SeqStmt, Stmt
from tilecraft.ir.expr import Var


@dataclass
class Builder:
    """Collects the statements of one prim_func while it is being parsed."""

    frames: list[list[Stmt]] = field(default_factory=lambda: [[]])
    kernel: "KernelFrameInfo | None" = None
    names: dict[str, int] = field(default_factory=dict)
    pending_name: str | None = None
    parallel_depth: int = 0  # T.Parallel bodies being built around the current statement
    # fragments allocated with `layout=` (block instructions may use them as register tensors)
    fragment_layouts: dict = field(default_factory=dict)

    def emit(self, stmt: Stmt) -> None:
        """Append `stmt` to the innermost block, stamped with the current user line."""
        if getattr(stmt, "span", "") is None:
            stmt = dataclasses.replace(stmt, span=current_span())
        self.frames[-1].append(stmt)

    @contextlib.contextmanager
    def frame(self) -> Iterator[list[Stmt]]:
        self.frames.append([])
        try:
            yield self.frames[-1]
        finally:
            self.frames.pop()

    def unique_name(self, hint: str) -> str:
        """`hint`, or `hint_1`, `hint_2`... when it was taken (buffer and var names in codegen)."""
        n = self.names.get(hint, 0)
        self.names[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"


@dataclass
class KernelFrameInfo:
    """What the enclosing `T.Kernel` declared: thread vars for T.get_thread_binding."""

    threads: tuple[int, ...]
    thread_vars: tuple[Var, ...]
    block_vars: tuple[Var, ...]
    frame_depth: int = 1  # index in Builder.frames of the kernel body's statements
    cluster: tuple[int, ...] | None = None  # T.Kernel's cluster_dims (T.cluster_rank)


_current: contextvars.ContextVar[Builder | None] = contextvars.ContextVar("tc_builder", default=None)


def current_builder(what: str) -> Builder:
    """The active builder; `what` names the caller for the error outside a kernel."""
    b = _current.get()
    if b is None:
        raise TilecraftError("TC105", what=what)
    return b


def in_kernel(what: str) -> Builder:
    """The active builder, checking that we are inside `with T.Kernel(...)`."""
    b = current_builder(what)
    if b.kernel is None:
        raise TilecraftError("TC110")
    return b


@contextlib.contextmanager
def building(builder: Builder) -> Iterator[Builder]:
    token = _current.set(builder)
    try:
        yield builder
    finally:
        _current.reset(token)


def seq(stmts: list[Stmt]) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt.create(stmts)


__all__ = ["Builder", "KernelFrameInfo", "KernelLaunch", "building", "current_builder",
           "in_kernel", "seq"]
