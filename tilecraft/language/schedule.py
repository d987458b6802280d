"""Scheduling hints, debugging helpers and escape hatches."""

from __future__ import annotations

import re

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.frontend.expressions import tile_operand
from tilecraft.ir import (
    AnnotateLayout,
    Buffer,
    BufferLoad,
    BufferRegion,
    Call,
    DeviceAssert,
    Expr,
    Print,
    UseSwizzle,
    as_expr,
)

from .surface import flag, int_arg


def use_swizzle(panel_size: int = 8, order: str = "row", enable: bool = True) -> None:
    """Rasterize thread blocks in panels of `panel_size` for L2 reuse (`order` row or col)."""
    bld = in_kernel("T.use_swizzle")
    if order not in ("row", "col"):
        raise TilecraftError("TC108", detail=f"order={order!r}", hint="'row' or 'col'")
    panel_size = int_arg(panel_size, "panel_size of T.use_swizzle", device=False)
    if panel_size <= 0:
        raise TilecraftError("TC108", detail=f"panel_size={panel_size!r}", hint="a positive int")
    if flag(enable, "enable"):
        bld.emit(UseSwizzle(panel_size, order))


def annotate_layout(layout_map: dict) -> None:
    """Fix the layout of buffers: `T.annotate_layout({F: T.Fragment(...)})` for a fragment;
    `T.annotate_layout({S: T.layout.make_swizzled_layout(S)})` for a shared tile whose layout is
    the one tilecraft gives it anyway (any other shared layout is TC114)."""
    bld = in_kernel("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise TilecraftError("TC108", detail=f"T.annotate_layout takes a dict, got "
                             f"{type(layout_map).__name__}", hint="{buffer: layout, ...}")
    items = []
    for buf, lay in layout_map.items():
        if not isinstance(buf, Buffer):
            raise TilecraftError("TC108", detail=f"annotate_layout key {buf!r} is not a buffer",
                                 hint="keys are buffers from T.alloc_*")
        _check_layout(buf, lay, bld.kernel.threads)
        items.append((buf, lay))
    bld.emit(AnnotateLayout(tuple(items)))


def _check_layout(buf: Buffer, lay, threads: tuple[int, ...]) -> None:
    """TC114 unless `lay` is a layout tilecraft honours for `buf`."""
    from tilecraft.layout import Fragment, SharedLayout

    shape = buf.static_shape
    if not isinstance(lay, (Fragment, SharedLayout)):
        raise TilecraftError("TC114", buffer=buf.name, detail=f"{type(lay).__name__} "
                             f"`{lay!r}` is not a layout",
                             hint="give a Fragment (tilecraft.layout: local, spatial, ...) for a "
                             "fragment, or T.layout.make_swizzled_layout(buf) for a shared tile")
    if buf.scope == "fragment" and isinstance(lay, Fragment):
        n = 1
        for t in threads:
            n *= t
        if shape is None or tuple(lay.shape) != shape:
            raise TilecraftError("TC114", buffer=buf.name, detail=f"the layout covers "
                                 f"{list(lay.shape)}, the fragment is {list(buf.shape)}",
                                 hint="give a Fragment of the buffer's shape")
        if lay.num_threads != n:
            raise TilecraftError("TC114", buffer=buf.name, detail=f"the layout spreads it over "
                                 f"{lay.num_threads} threads, the block has {n}",
                                 hint="give a Fragment over the block's threads")
        return
    if buf.scope == "shared" and isinstance(lay, SharedLayout):
        expected = _shared_layout(buf)
        if expected is not None and lay == expected:
            return
        raise TilecraftError("TC114", buffer=buf.name, detail="tilecraft places shared tiles "
                             "itself and would not use this layout",
                             hint="16-bit 2-D tiles with rows of >= 32 bytes get the canonical "
                             "XOR swizzle (T.layout.make_swizzled_layout), other tiles are "
                             "row-major; drop the annotation")
    want = "a Fragment" if buf.scope == "fragment" else \
        "T.layout.make_swizzled_layout(buf)" if buf.scope == "shared" else "no layout"
    raise TilecraftError("TC114", buffer=buf.name, detail=f"a {type(lay).__name__} on a "
                         f"{buf.scope} buffer", hint=f"a {buf.scope} buffer takes {want}")


def _shared_layout(buf: Buffer):
    """The layout the CUDA backend gives shared tile `buf` (None for a dynamic shape)."""
    from tilecraft.layout import make_swizzled_layout, row_major
    from tilecraft.passes.choose_swizzles import wants_swizzle

    shape = buf.static_shape
    if shape is None:
        return None
    return make_swizzled_layout(shape, 16) if wants_swizzle(buf) else row_major(*shape)


def print(obj, msg: str = "") -> None:  # noqa: A001
    """Print a tile or a scalar from the device (on the interpreter too)."""
    bld = in_kernel("T.print")
    obj = tile_operand(obj)  # a Tilus register tensor: its fragment
    if isinstance(obj, Buffer):
        obj = obj.full_region()
    elif isinstance(obj, BufferLoad):
        obj = as_expr(obj)
    elif not isinstance(obj, (BufferRegion, Expr)):
        obj = as_expr(obj)
    bld.emit(Print(obj, str(msg)))


def device_assert(condition, msg: str = "") -> None:
    """Abort the kernel when `condition` is false (checked on the interpreter too)."""
    bld = in_kernel("T.device_assert")
    bld.emit(DeviceAssert(as_expr(condition), str(msg)))


def call_extern(dtype, func_name: str, *args) -> Call:
    """Call device function `func_name` returning `dtype` (TileLang's argument order)."""
    from tilecraft import dtypes as dt

    if not isinstance(func_name, str) or not re.fullmatch(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*",
                                                          func_name):
        raise TilecraftError("TC108", detail=f"T.call_extern function name {func_name!r}",
                             hint='T.call_extern(dtype, "name", *args), as in TileLang')
    ret = dt.int32 if dtype in ("void", "handle", None) else dtype
    return Call.create(f"extern:{func_name}", args, ret)


def import_source(source: str) -> None:
    """Add CUDA source (device functions for call_extern) to the generated module."""
    raise TilecraftError("TC502", detail="T.import_source", hint="planned with the CUDA backend")
