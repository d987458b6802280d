"""Tensors of a block program (Tilus section 6.1): register, shared and global tensors.

Each wraps a Tile IR `Buffer` (so lowering maps a Tile IR buffer 1:1 and scalar expressions that
load from a global buffer stay valid) and adds where its elements live:

    acc = RegisterTensor.create("acc", "float32", local(2, 1).spatial(8, 4).local(1, 2))
    smem = SharedTensor.create("sa", "float16", (64, 32))          # row-major by default
    ga = GlobalTensor.create("a", "float16", (M, K))                # a kernel parameter

A tensor is equal to another when it wraps the same buffer (the same uid) with the same layout;
it hashes by the buffer's uid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecraft import dtypes as dt
from tilecraft.diagnostics import Span, TilecraftError, current_span
from tilecraft.diagnostics.errors import caller_span
from tilecraft.ir import Buffer
from tilecraft.layout import Fragment, SharedLayout, row_major


def user_span(span: Span | None = None) -> Span | None:
    """`span`, else the span being processed (frontend), else the user's calling line."""
    return span or current_span() or caller_span()


class BlockTensor:
    """Base of the three tensor kinds: name, dtype and shape come from the wrapped buffer."""

    buffer: Buffer
    scope_name = ""

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def dtype(self) -> dt.DataType:
        return self.buffer.dtype

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.buffer.shape

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    @property
    def span(self) -> Span | None:
        return self.buffer.span

    def __hash__(self) -> int:
        return hash(self.buffer.uid)

    def __str__(self) -> str:
        return self.buffer.name

    def type_str(self) -> str:
        """`f16[64, 16]`-style type (scope added by the printer)."""
        from tilecraft.ir.printer import expr_str

        return f"{self.dtype}[{', '.join(expr_str(d) for d in self.shape)}]"


@dataclass(frozen=True, eq=True)
class RegisterTensor(BlockTensor):
    """A tensor in registers, spread over the block's threads by `layout` (a `Fragment`)."""

    buffer: Buffer
    layout: Fragment
    scope_name = "register"

    __hash__ = BlockTensor.__hash__

    @classmethod
    def create(cls, name: str, dtype: Any, layout: Fragment, shape: Any = None,
               span: Span | None = None) -> RegisterTensor:
        """A new register tensor; `shape` defaults to the layout's shape (TC601 if they differ)."""
        span = user_span(span)
        if not isinstance(layout, Fragment):
            raise TilecraftError("TC603", span, instr="allocate_register",
                                 detail=f"layout of `{name}` must be a register layout "
                                 f"(tilecraft.layout.local/spatial/...), got {layout!r}")
        shape = layout.shape if shape is None else shape
        buf = Buffer.create(name, shape, dtype, "fragment", span)
        if tuple(buf.shape) != tuple(layout.shape):
            raise TilecraftError("TC601", span, tensor=name, layout=repr(layout),
                                 layout_shape=list(layout.shape), shape=list(buf.shape))
        return cls(buf, layout)

    @classmethod
    def of(cls, buffer: Buffer, layout: Fragment) -> RegisterTensor:
        """Wrap an existing Tile IR fragment buffer (lowering)."""
        if tuple(buffer.shape) != tuple(layout.shape):
            raise TilecraftError("TC601", buffer.span, tensor=buffer.name, layout=repr(layout),
                                 layout_shape=list(layout.shape), shape=list(buffer.shape))
        return cls(buffer, layout)


@dataclass(frozen=True, eq=True)
class SharedTensor(BlockTensor):
    """A tensor in shared memory; `layout` maps a logical index to an element offset."""

    buffer: Buffer
    layout: SharedLayout
    scope_name = "shared"

    __hash__ = BlockTensor.__hash__

    @classmethod
    def create(cls, name: str, dtype: Any, shape: Any, layout: SharedLayout | None = None,
               span: Span | None = None) -> SharedTensor:
        """A new shared tensor, row-major unless `layout` is given (TC601 on a shape mismatch)."""
        span = user_span(span)
        buf = Buffer.create(name, shape, dtype, "shared", span)
        return cls.of(buf, layout, span)

    @classmethod
    def of(cls, buffer: Buffer, layout: SharedLayout | None = None,
           span: Span | None = None) -> SharedTensor:
        """Wrap a Tile IR shared buffer (lowering)."""
        static = buffer.static_shape
        if static is None:
            raise TilecraftError("TC603", span or buffer.span, instr="allocate_shared",
                                 detail=f"shared tensor `{buffer.name}` needs a static shape")
        layout = row_major(*static) if layout is None else layout
        if not isinstance(layout, SharedLayout) or tuple(layout.shape) != static:
            raise TilecraftError("TC601", span or buffer.span, tensor=buffer.name,
                                 layout=repr(layout),
                                 layout_shape=list(getattr(layout, "shape", ())),
                                 shape=list(static))
        return cls(buffer, layout)


@dataclass(frozen=True, eq=True)
class GlobalTensor(BlockTensor):
    """A tensor in global memory: a kernel parameter, a view of one, or a workspace (row-major)."""

    buffer: Buffer
    scope_name = "global"

    __hash__ = BlockTensor.__hash__

    @classmethod
    def create(cls, name: str, dtype: Any, shape: Any, span: Span | None = None) -> GlobalTensor:
        """A new global tensor (a parameter, a view's result or a workspace)."""
        return cls(Buffer.create(name, shape, dtype, "global", user_span(span)))

    @classmethod
    def of(cls, buffer: Buffer) -> GlobalTensor:
        """Wrap a Tile IR global buffer (a kernel parameter)."""
        return cls(buffer)


Tensor = RegisterTensor | SharedTensor | GlobalTensor
