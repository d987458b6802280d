"""Block instructions (Tilus Table 1): allocation, data movement, async copies and control.

Every instruction is a frozen dataclass and a Tile IR `Stmt`, so it sits in the ordinary
SeqStmt/For/If/LetStmt control flow (a leaf for `ir.visitor.walk`). It carries the span of the
user's line and answers `reads()` / `writes()` (the tensors it touches) and `exprs()` (the
scalar expressions it holds). Build instructions with `create()` (normalises offsets, fills the
span); the verifier (verifier.py) checks them against each other.

Offsets: `offset` gives the start in every dimension of the global/shared tensor; a register (or
shared) tile of rank r covers the dimensions `dims` of it, by default the last r:

    LoadGlobal.create(ga, a, offset=(bi * 64, k * 16))      # a: [64, 16] tile of ga[M, K]
    LoadGlobal.create(gb, b, offset=(k, bj, 0))             # b: [n] tile along gb's last dim

The compute instructions (arithmetic, cast, view, dot, reduce, fill) are in compute.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft.diagnostics import Span, TilecraftError
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


def normalize_offset(tensor: BlockTensor, offset: Any, rank: int, dims: Any,
                     instr: str, span: Span | None) -> tuple[tuple[Expr, ...], tuple[int, ...]]:
    """Offsets as Exprs (default: zeros) and the covered dims (default: the last `rank`)."""
    if offset is None:
        offset = (0,) * tensor.ndim
    offset = tuple(offset) if isinstance(offset, (tuple, list)) else (offset,)
    exprs = tuple(as_expr(o, like=None) for o in offset)
    if dims is None:
        dims = tuple(range(tensor.ndim - rank, tensor.ndim)) if rank <= tensor.ndim else ()
    dims = tuple(int(d) for d in dims)
    if len(exprs) != tensor.ndim:
        raise TilecraftError("TC603", span, instr=instr,
                             detail=f"{len(exprs)} offset(s) for the rank-{tensor.ndim} tensor "
                             f"`{tensor.name}` (one per dimension)")
    return exprs, dims


class _Tiled(Instruction):
    """An instruction that moves a tile at `offset` of a bigger (global/shared) tensor."""

    offset: tuple[Expr, ...]
    dims: tuple[int, ...]

    def exprs(self) -> tuple[Expr, ...]:
        return self.offset


@dataclass(frozen=True)
class AllocateRegister(Instruction):
    """`out = allocate_register(dtype, layout, init)`: uninitialised unless `init` is given."""

    out: RegisterTensor
    init: Expr | None = None
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "allocate_register"

    @classmethod
    def create(cls, out: RegisterTensor, init: Any = None,
               span: Span | None = None) -> "AllocateRegister":
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
    def create(cls, out: SharedTensor, span: Span | None = None) -> "AllocateShared":
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
    def create(cls, out: GlobalTensor, span: Span | None = None) -> "AllocateGlobal":
        return cls(out, user_span(span))

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class ViewGlobal(Instruction):
    """`out = view_global(src, dtype, shape)`: the same bytes of global memory as another
    dtype/shape (row-major, equal total bits)."""

    src: GlobalTensor
    out: GlobalTensor
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "view_global"

    @classmethod
    def create(cls, src: GlobalTensor, out: GlobalTensor, span: Span | None = None) -> "ViewGlobal":
        return cls(src, out, user_span(span))

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.out,)


def _tiled(cls, a, b, tile: BlockTensor, big: BlockTensor, offset, dims, span):
    span = user_span(span)
    off, dims = normalize_offset(big, offset, tile.ndim, dims, cls.NAME, span)
    return cls(a, b, off, dims, span)


@dataclass(frozen=True)
class LoadGlobal(_Tiled):
    """`load_global(src, offset, out=out)`: the tile of `src` at `offset` into registers, laid out
    by `out.layout`. Elements outside `src` read as 0."""

    src: GlobalTensor
    out: RegisterTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "load_global"

    @classmethod
    def create(cls, src: GlobalTensor, out: RegisterTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> "LoadGlobal":
        return _tiled(cls, src, out, out, src, offset, dims, span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class LoadShared(_Tiled):
    """`load_shared(src, offset, out=out)`: the tile of shared `src` at `offset` into registers."""

    src: SharedTensor
    out: RegisterTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "load_shared"

    @classmethod
    def create(cls, src: SharedTensor, out: RegisterTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> "LoadShared":
        return _tiled(cls, src, out, out, src, offset, dims, span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.out,)


@dataclass(frozen=True)
class StoreGlobal(_Tiled):
    """`store_global(src, dst, offset)`: a register tile into global `dst` at `offset`; elements
    outside `dst` are dropped."""

    src: RegisterTensor
    dst: GlobalTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "store_global"

    @classmethod
    def create(cls, src: RegisterTensor, dst: GlobalTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> "StoreGlobal":
        return _tiled(cls, src, dst, src, dst, offset, dims, span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True)
class StoreShared(_Tiled):
    """`store_shared(src, dst, offset)`: a register tile into shared `dst` at `offset`."""

    src: RegisterTensor
    dst: SharedTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "store_shared"

    @classmethod
    def create(cls, src: RegisterTensor, dst: SharedTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> "StoreShared":
        return _tiled(cls, src, dst, src, dst, offset, dims, span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True)
class CopyAsync(_Tiled):
    """`copy_async(dst, src, offset)`: start copying the tile of global `src` at `offset` into the
    whole shared `dst`; it completes at a `copy_async_wait_group` after its group's commit.
    Elements outside `src` copy as 0."""

    dst: SharedTensor
    src: GlobalTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async"

    @classmethod
    def create(cls, dst: SharedTensor, src: GlobalTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> "CopyAsync":
        return _tiled(cls, dst, src, dst, src, offset, dims, span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True)
class CopyAsyncCommitGroup(Instruction):
    """`copy_async_commit_group()`: the copies issued since the last commit form one group."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async_commit_group"

    @classmethod
    def create(cls, span: Span | None = None) -> "CopyAsyncCommitGroup":
        return cls(user_span(span))


@dataclass(frozen=True)
class CopyAsyncWaitGroup(Instruction):
    """`copy_async_wait_group(n)`: wait until at most the newest `n` committed groups are
    pending."""

    n: int
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async_wait_group"

    @classmethod
    def create(cls, n: int, span: Span | None = None) -> "CopyAsyncWaitGroup":
        span = user_span(span)
        if not isinstance(n, int) or n < 0:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"n must be a non-negative Python int, got {n!r}")
        return cls(n, span)


@dataclass(frozen=True)
class Synchronize(Instruction):
    """`synchronize()`: every thread of the block waits for the others (__syncthreads)."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "synchronize"

    @classmethod
    def create(cls, span: Span | None = None) -> "Synchronize":
        return cls(user_span(span))


@dataclass(frozen=True)
class Exit(Instruction):
    """`exit()`: the block stops here."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "exit"

    @classmethod
    def create(cls, span: Span | None = None) -> "Exit":
        return cls(user_span(span))


@dataclass(frozen=True)
class Print(Instruction):
    """`print(tensor)`: print the tensor's logical values (with `msg` and the block index)."""

    tensor: BlockTensor
    msg: str = ""
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "print"

    @classmethod
    def create(cls, tensor: BlockTensor, msg: str = "", span: Span | None = None) -> "Print":
        return cls(tensor, msg, user_span(span))

    def reads(self):
        return (self.tensor,)
