"""Block instructions (Tilus Table 1): allocation, data movement, async copies and control.

Every instruction is a frozen dataclass and a Tile IR `Stmt`, so it sits in the ordinary
SeqStmt/For/If/LetStmt control flow (a leaf for `ir.visitor.walk`). It carries the span of the
user's line and answers `reads()` / `writes()` (the tensors it touches) and `exprs()` (the
scalar expressions it holds). Build instructions with `create()` (normalises offsets, fills the
span); the verifier (verifier.py) checks them against each other.

Loads, stores and async copies are in transfer.py; the compute instructions (arithmetic, cast,
view, dot, reduce, fill) in compute.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft.diagnostics import Span
from tilecraft.ir import Expr, Stmt, as_expr

from .tensors import BlockTensor, GlobalTensor, RegisterTensor, SharedTensor, user_span


class Instruction(Stmt):
    """Base of block instructions: one operation of the whole thread block."""

    span: Span | None
    NAME: ClassVar[str] = ""

    def reads(self) -> tuple[BlockTensor, ...]:
        """Tensors whose values the instruction reads."""
        return ()

    def writes(self) -> tuple[BlockTensor, ...]:
        """Tensors the instruction writes (or defines)."""
        return ()

    def exprs(self) -> tuple[Expr, ...]:
        """Scalar expressions the instruction holds (offsets, fill values, ...)."""
        return ()

    def __str__(self) -> str:
        from .printer import instruction_str

        return instruction_str(self)


@dataclass(frozen=True)
class AllocateRegister(Instruction):
    """`out = allocate_register(dtype, layout, init)`: uninitialised unless `init` is given."""

    out: RegisterTensor
    init: Expr | None = None
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "allocate_register"

    @classmethod
    def create(cls, out: RegisterTensor, init: Any = None,
               span: Span | None = None) -> AllocateRegister:
        value = None if init is None else as_expr(init, like=out.dtype)
        return cls(out, value, user_span(span))

    def writes(self):
        return (self.out,)

    def exprs(self):
        return () if self.init is None else (self.init,)


@dataclass(frozen=True)
class AllocateShared(Instruction):
    """`out = allocate_shared(dtype, shape, layout)`: uninitialised shared memory."""

    out: SharedTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "allocate_shared"

    @classmethod
    def create(cls, out: SharedTensor, span: Span | None = None) -> AllocateShared:
        return cls(out, user_span(span))

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class AllocateGlobal(Instruction):
    """`out = allocate_global(dtype, shape)`: a zeroed workspace, one per launch (all blocks
    share it)."""

    out: GlobalTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "allocate_global"

    @classmethod
    def create(cls, out: GlobalTensor, span: Span | None = None) -> AllocateGlobal:
        return cls(out, user_span(span))

    def writes(self):
        return (self.out,)


class SrcOut(Instruction):
    """An instruction that reads `src` and writes `out` (built by `create(src, out)`)."""

    src: Any
    out: Any

    @classmethod
    def create(cls, src, out, span: Span | None = None):
        return cls(src, out, user_span(span))

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class ViewGlobal(SrcOut):
    """`out = view_global(src, dtype, shape)`: the same bytes of global memory as another
    dtype/shape (row-major, equal total bits)."""

    src: GlobalTensor
    out: GlobalTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "view_global"


@dataclass(frozen=True)
class Synchronize(Instruction):
    """`synchronize()`: every thread of the block waits for the others (__syncthreads)."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "synchronize"

    @classmethod
    def create(cls, span: Span | None = None) -> Synchronize:
        return cls(user_span(span))


@dataclass(frozen=True)
class Exit(Instruction):
    """`exit()`: the block stops here."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "exit"

    @classmethod
    def create(cls, span: Span | None = None) -> Exit:
        return cls(user_span(span))


@dataclass(frozen=True)
class Print(Instruction):
    """`print(tensor)`: print the tensor's logical values (with `msg` and the block index).
    A lowered T.print sets `label`, the Tile IR value it shows (`A[bx, 0:16]`): the lines are
    then the interpreter's (`[tilecraft block (0,)] msg: A[bx, 0:16] =`), and `gather` says how
    the GPU prints a register tensor: gathered, in rows from one thread (a memory tile's
    T.print), else each thread its own elements (a fragment's)."""

    tensor: BlockTensor
    msg: str = ""
    span: Span | None = field(default=None, compare=False)
    label: str = ""
    gather: bool = False
    NAME: ClassVar[str] = "print"

    @classmethod
    def create(cls, tensor: BlockTensor, msg: str = "", span: Span | None = None,
               label: str = "", gather: bool = False) -> Print:
        return cls(tensor, msg, user_span(span), str(label), bool(gather))

    def reads(self):
        return (self.tensor,)
