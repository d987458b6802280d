"""Scheduling hints, debugging helpers and escape hatches."""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.ir import (AnnotateLayout, Buffer, BufferLoad, BufferRegion, Call, DeviceAssert,
                          Expr, Print, UseSwizzle, as_expr)


def use_swizzle(panel_size: int = 8, order: str = "row", enable: bool = True) -> None:
    """Rasterize thread blocks in panels of `panel_size` for L2 reuse (`order` row or col)."""
    bld = in_kernel("T.use_swizzle")
    if order not in ("row", "col"):
        raise TilecraftError("TC108", detail=f"order={order!r}", hint="'row' or 'col'")
    if not isinstance(panel_size, int) or panel_size <= 0:
        raise TilecraftError("TC108", detail=f"panel_size={panel_size!r}", hint="a positive int")
    if enable:
        bld.emit(UseSwizzle(panel_size, order))


def annotate_layout(layouts: dict) -> None:
    """Fix the layout of buffers: `T.annotate_layout({S: T.layout.make_swizzled_layout(S)})`."""
    bld = in_kernel("T.annotate_layout")
    items = []
    for buf, lay in layouts.items():
        if not isinstance(buf, Buffer):
            raise TilecraftError("TC108", detail=f"annotate_layout key {buf!r} is not a buffer",
                                 hint="keys are buffers from T.alloc_*")
        items.append((buf, lay))
    bld.emit(AnnotateLayout(tuple(items)))


def print(value, msg: str = "") -> None:  # noqa: A001
    """Print a tile or a scalar from the device (on the interpreter too)."""
    bld = in_kernel("T.print")
    if isinstance(value, Buffer):
        value = value.full_region()
    elif isinstance(value, BufferLoad):
        value = as_expr(value)
    elif not isinstance(value, (BufferRegion, Expr)):
        value = as_expr(value)
    bld.emit(Print(value, str(msg)))


def device_assert(cond, msg: str = "") -> None:
    """Abort the kernel when `cond` is false (checked on the interpreter too)."""
    bld = in_kernel("T.device_assert")
    bld.emit(DeviceAssert(as_expr(cond), str(msg)))


def call_extern(name: str, *args, dtype="void") -> Call:
    """Call a device function by name (from T.import_source or the CUDA headers)."""
    from tilecraft import dtypes as dt

    ret = dt.int32 if dtype in ("void", "handle", None) else dtype
    return Call.create(f"extern:{name}", args, ret)


def import_source(source: str) -> None:
    """Add CUDA source (device functions for call_extern) to the generated module."""
    raise TilecraftError("TC502", detail="T.import_source", hint="planned with the CUDA backend")
