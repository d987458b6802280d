"""PrimFunc: a kernel's parameters and body."""

from __future__ import annotations

from dataclasses import dataclass, field

from tilecraft.diagnostics import Span

from .buffer import Buffer
from .expr import Var
from .stmt import Stmt


@dataclass(frozen=True)
class PrimFunc:
    """A parsed kernel: tensor parameters (global buffers), scalar parameters and the body."""

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    dynamic_vars: tuple[Var, ...] = ()
    span: Span | None = field(default=None, compare=False)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other

    def script(self) -> str:
        """The kernel printed as readable Python-like script."""
        from .printer import func_str

        return func_str(self)

    def __str__(self) -> str:
        return self.script()
