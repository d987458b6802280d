"""Tile operations: statements that act on whole tiles.

Every tile op has one interface: `reads()` and `writes()` give the regions it touches (the
FTG's edges). Layout rules, lowering and interpreter semantics are registered per op class in
their own packages (passes/layout_inference, codegen, interp), found by `type(op)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilecraft.diagnostics import Span

from .buffer import Buffer, BufferRegion
from .expr import Expr
from .stmt import Stmt


class TileOp(Stmt):
    """Base of tile ops."""

    span: Span | None

    def reads(self) -> tuple[BufferRegion, ...]:
        return ()

    def writes(self) -> tuple[BufferRegion, ...]:
        return ()

    @property
    def op_name(self) -> str:
        return type(self).__name__.lower()


@dataclass(frozen=True)
class Copy(TileOp):
    """`T.copy(src, dst)`: element-wise copy (with a dtype cast) between two regions;
    `disable_tma`: never a TMA load (a T.Pipelined loop's producer then moves by cp.async)."""

    src: BufferRegion
    dst: BufferRegion
    span: Span | None = field(default=None, compare=False)
    disable_tma: bool = False

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


class GemmWarpPolicy:
    """How the warps of a block split a gemm's output tile."""

    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"

    ALL = ("Square", "FullRow", "FullCol")


@dataclass(frozen=True)
class Gemm(TileOp):
    """`T.gemm(A, B, C)`: C (+)= op(A) @ op(B) with fp32 (or C's dtype) accumulation."""

    A: BufferRegion
    B: BufferRegion
    C: BufferRegion
    transpose_A: bool = False
    transpose_B: bool = False
    policy: str = GemmWarpPolicy.Square
    clear_accum: bool = False
    k_pack: int = 1
    span: Span | None = field(default=None, compare=False)

    def mnk(self) -> tuple[int, int, int]:
        a = self.A.squeezed_shape()
        b = self.B.squeezed_shape()
        m, k = (a[1], a[0]) if self.transpose_A else (a[0], a[1])
        n = b[0] if self.transpose_B else b[1]
        return m, n, k

    def reads(self):
        return (self.A, self.B) if self.clear_accum else (self.A, self.B, self.C)

    def writes(self):
        return (self.C,)


REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")


@dataclass(frozen=True)
class Reduce(TileOp):
    """`T.reduce_<kind>(src, dst, dim, clear)`: reduce `src` along `dim` into `dst`."""

    kind: str
    src: BufferRegion
    dst: BufferRegion
    dim: int
    clear: bool = True
    span: Span | None = field(default=None, compare=False)

    def reads(self):
        return (self.src,) if self.clear else (self.src, self.dst)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True)
class CumSum(TileOp):
    """`T.cumsum(src, dst, dim, reverse)`: inclusive prefix sum along `dim`."""

    src: BufferRegion
    dst: BufferRegion
    dim: int
    reverse: bool = False
    span: Span | None = field(default=None, compare=False)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True)
class Fill(TileOp):
    """`T.fill(dst, value)` / `T.clear(dst)`."""

    dst: BufferRegion
    value: Expr
    span: Span | None = field(default=None, compare=False)

    def writes(self):
        return (self.dst,)


ATOMIC_KINDS = ("add", "max", "min")


@dataclass(frozen=True)
class Atomic(TileOp):
    """`T.atomic_<kind>(dst, src)`: dst[...] = dst[...] <kind> src, atomically per element.

    `src` is a region of the same shape as `dst` (tile form) or a scalar Expr (scalar form).
    A block-level scalar atomic may also return dst's previous value into `prev` (one element
    of a shared tensor, read by every thread after it: `return_prev=True`) and order the
    block's other memory accesses around it (`order`: "relaxed", "acquire", "release",
    "acq_rel", "seq_cst"; docs/language.md, "Atomics")."""

    kind: str
    dst: BufferRegion
    src: Any  # BufferRegion | Expr
    span: Span | None = field(default=None, compare=False)
    prev: BufferRegion | None = None
    order: str = "relaxed"

    def reads(self):
        return (self.src, self.dst) if isinstance(self.src, BufferRegion) else (self.dst,)

    def writes(self):
        return (self.dst,) if self.prev is None else (self.dst, self.prev)


@dataclass(frozen=True)
class Print(TileOp):
    """`T.print(x, msg)`: print a buffer (tile) or a scalar value from the device."""

    value: Any  # BufferRegion | Expr
    msg: str = ""
    span: Span | None = field(default=None, compare=False)

    def reads(self):
        return (self.value,) if isinstance(self.value, BufferRegion) else ()


@dataclass(frozen=True)
class DeviceAssert(TileOp):
    cond: Expr
    msg: str = ""
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class UseSwizzle(TileOp):
    """`T.use_swizzle(panel_size, order)`: rasterize blocks in panels for L2 reuse."""

    panel_size: int
    order: str = "row"
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AnnotateLayout(TileOp):
    """`T.annotate_layout({buf: layout})`: user-fixed layouts (stored; used by layout inference)."""

    layouts: tuple[tuple[Buffer, Any], ...]
    span: Span | None = field(default=None, compare=False)
