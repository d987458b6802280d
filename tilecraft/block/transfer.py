"""Block instructions that move tiles: loads, stores and asynchronous copies (Tilus Table 1).

`offset` gives the start in every dimension of the global/shared tensor; a register (or shared)
tile of rank r covers the dimensions `dims` of it, by default the last r:

    LoadGlobal.create(ga, a, offset=(bi * 64, k * 16))      # a: [64, 16] tile of ga[M, K]
    LoadGlobal.create(gb, b, offset=(k, bj, 0))             # b: [n] tile along gb's last dim

Global tiles may run past the tensor's end (partial tiles): those elements read as 0 and are not
stored, as T.copy does. Shared tiles must lie inside their tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import Expr, as_expr
from tilecraft.layout import SharedLayout

from .instructions import Instruction
from .tensors import BlockTensor, GlobalTensor, RegisterTensor, SharedTensor, user_span


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


class Tiled(Instruction):
    """Base of the instructions that moves a tile at `offset` of a bigger (global/shared) tensor."""

    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    TILE: ClassVar[str] = "out"  # the field holding the tile, and the one holding the whole tensor
    WHOLE: ClassVar[str] = "src"
    READS: ClassVar[str] = "src"  # the field the instruction reads, and the one it writes
    WRITES: ClassVar[str] = "out"

    def reads(self):
        return (getattr(self, self.READS),)

    def writes(self):
        return (getattr(self, self.WRITES),)

    @property
    def tile(self) -> BlockTensor:
        """The register (or, for copy_async, shared) tensor that is the tile."""
        return getattr(self, self.TILE)

    @property
    def whole(self) -> BlockTensor:
        """The global/shared tensor the tile is part of."""
        return getattr(self, self.WHOLE)

    def exprs(self) -> tuple[Expr, ...]:
        return self.offset


def _tiled(cls, a, b, tile: BlockTensor, big: BlockTensor, offset, dims, span):
    span = user_span(span)
    off, dims = normalize_offset(big, offset, tile.ndim, dims, cls.NAME, span)
    return cls(a, b, off, dims, span)


@dataclass(frozen=True)
class LoadGlobal(Tiled):
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
               span: Span | None = None) -> LoadGlobal:
        return _tiled(cls, src, out, out, src, offset, dims, span)


@dataclass(frozen=True)
class LoadShared(Tiled):
    """`load_shared(src, offset, out=out)`: the tile of shared `src` at `offset` into registers."""

    src: SharedTensor
    out: RegisterTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "load_shared"

    @classmethod
    def create(cls, src: SharedTensor, out: RegisterTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> LoadShared:
        return _tiled(cls, src, out, out, src, offset, dims, span)


@dataclass(frozen=True)
class StoreGlobal(Tiled):
    """`store_global(src, dst, offset)`: a register tile into global `dst` at `offset`; elements
    outside `dst` are dropped."""

    src: RegisterTensor
    dst: GlobalTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "store_global"
    TILE: ClassVar[str] = "src"
    WRITES: ClassVar[str] = "dst"
    WHOLE: ClassVar[str] = "dst"

    @classmethod
    def create(cls, src: RegisterTensor, dst: GlobalTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> StoreGlobal:
        return _tiled(cls, src, dst, src, dst, offset, dims, span)


@dataclass(frozen=True)
class StoreShared(Tiled):
    """`store_shared(src, dst, offset)`: a register tile into shared `dst` at `offset`."""

    src: RegisterTensor
    dst: SharedTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "store_shared"
    TILE: ClassVar[str] = "src"
    WRITES: ClassVar[str] = "dst"
    WHOLE: ClassVar[str] = "dst"

    @classmethod
    def create(cls, src: RegisterTensor, dst: SharedTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> StoreShared:
        return _tiled(cls, src, dst, src, dst, offset, dims, span)


@dataclass(frozen=True)
class CopyAsync(Tiled):
    """`copy_async(dst, src, offset)`: start copying the tile of global `src` at `offset` into the
    whole shared `dst`; it completes at a `copy_async_wait_group` after its group's commit.
    Elements outside `src` copy as 0."""

    dst: SharedTensor
    src: GlobalTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    #: whether pipelining may make it a TMA load (T.copy's disable_tma=True: False)
    bulk_ok: bool = True
    NAME: ClassVar[str] = "copy_async"
    TILE: ClassVar[str] = "dst"
    WRITES: ClassVar[str] = "dst"
    WHOLE: ClassVar[str] = "src"

    @classmethod
    def create(cls, dst: SharedTensor, src: GlobalTensor, offset: Any = None, dims: Any = None,
               span: Span | None = None) -> CopyAsync:
        return _tiled(cls, dst, src, dst, src, offset, dims, span)


@dataclass(frozen=True)
class CopyAsyncCommitGroup(Instruction):
    """`copy_async_commit_group()`: the copies issued since the last commit form one group."""

    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async_commit_group"

    @classmethod
    def create(cls, span: Span | None = None) -> CopyAsyncCommitGroup:
        return cls(user_span(span))


@dataclass(frozen=True)
class CopyAsyncWaitGroup(Instruction):
    """`copy_async_wait_group(n)`: wait until at most the newest `n` committed groups are
    pending."""

    n: int
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async_wait_group"

    @classmethod
    def create(cls, n: int, span: Span | None = None) -> CopyAsyncWaitGroup:
        span = user_span(span)
        if not isinstance(n, int) or n < 0:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"n must be a non-negative Python int, got {n!r}")
        return cls(n, span)




@dataclass(frozen=True)
class SharedSlice(Tiled):
    """`out = shared_slice(src, offset)`: the sub-tensor of shared `src` at `offset` over its
    last `out.ndim` dimensions, in the same bytes (no data moves). The leading dimensions are
    indexed by `offset` (each one stride of `src`'s layout apart, a multiple of its swizzle
    period) and the sliced ones start at 0, so `out`'s layout is `src`'s trailing modes: the
    stages of a pipelined tile (`stacked` layouts)."""

    out: SharedTensor
    src: SharedTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "shared_slice"

    @classmethod
    def create(cls, src: SharedTensor, offset: Any, name: str,
               span: Span | None = None) -> SharedSlice:
        """The slice of `src` at the leading indices `offset` (one per leading dimension)."""
        span = user_span(span)
        lead = tuple(offset) if isinstance(offset, (tuple, list)) else (offset,)
        k = len(lead)
        lay = src.layout
        groups = lay.dim_modes
        period = lay.swizzle.period if lay.swizzle is not None else 1
        if not 0 < k < src.ndim or any(len(g) != 1 for g in groups[:k]) or \
                any(lay.mode_strides[g[0]] % period for g in groups[:k]):
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"`{src.name}` ({lay}) cannot be sliced at its first "
                                 f"{k} dimension(s): each must be one mode whose stride is a "
                                 "multiple of the swizzle period")
        # the remainder's first mode (a unit dimension has none: the next dimension's first)
        first = next((g[0] for g in groups[k:] if g), len(lay.mode_shape))
        sub = SharedLayout.create(lay.shape[k:], lay.mode_shape[first:],
                                  lay.mode_strides[first:], lay.swizzle)
        out = SharedTensor.create(name, src.dtype, lay.shape[k:], sub, span=span)
        return _tiled(cls, out, src, out, src, (*lead, *(0,) * (src.ndim - k)), None, span)

    def reads(self):
        return ()  # it defines `out`; no element is read or written

    def writes(self):
        return (self.out,)

    @property
    def base(self) -> Expr:
        """The element offset of `out` in `src`."""
        lay = self.src.layout
        k = self.src.ndim - self.out.ndim
        out = None
        for o, g in zip(self.offset[:k], lay.dim_modes[:k]):
            term = o * lay.mode_strides[g[0]]
            out = term if out is None else out + term
        return out
