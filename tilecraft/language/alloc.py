"""Buffer allocation at each memory scope. Names come from the assignment target."""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.builder import in_kernel
from tilecraft.ir import Allocate, Buffer, BufferStore, Const, Expr, cast

from .surface import check_option, int_arg


def _alloc(shape, dtype, scope: str, what: str) -> Buffer:
    b = in_kernel(what)
    if isinstance(shape, (int, float, Expr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TilecraftError("TC108", detail=f"{what} shape {shape!r} is not a tuple",
                             hint=f"write {what}((M, N), dtype)")
    shape = tuple(int_arg(d, f"dimension {i} of {what}") for i, d in enumerate(shape))
    if b.parallel_depth:
        raise TilecraftError("TC121", what=what, name=b.pending_name or scope)
    name = b.unique_name(b.pending_name or scope)
    buf = Buffer.create(name, shape, dtype, scope)
    b.emit(Allocate(buf))
    return buf


def alloc_shared(shape, dtype="float16", scope: str = "shared.dyn", layout=None) -> Buffer:
    """A tile in shared memory, visible to every thread of the block; `layout=` as
    `T.annotate_layout` takes for it."""
    check_option("T.alloc_shared", "scope", scope)
    buf = _alloc(shape, dtype, "shared", "T.alloc_shared")
    if layout is not None:
        from .schedule import annotate_layout

        annotate_layout({buf: layout})
    return buf


def alloc_fragment(shape, dtype="float32", scope: str = "local.fragment", layout=None) -> Buffer:
    """A tile in registers, spread over the block's threads: the layout is inferred, or
    `layout=` (a Fragment of tilecraft.layout, a strict constraint for inference, as
    `T.annotate_layout`). A fragment with a layout may also be used by block instructions
    (`T.store_global(f, C)`, `T.dot(a, b, f, out=f)`, `T.cast(f, dtype)`)."""
    check_option("T.alloc_fragment", "scope", scope)
    buf = _alloc(shape, dtype, "fragment", "T.alloc_fragment")
    if layout is not None:
        from .schedule import annotate_layout

        annotate_layout({buf: layout})
        in_kernel("T.alloc_fragment").fragment_layouts[buf] = layout
    return buf


def alloc_local(shape, dtype="float32", scope: str = "local") -> Buffer:
    """A small per-thread array in registers."""
    check_option("T.alloc_local", "scope", scope)
    return _alloc(shape, dtype, "local", "T.alloc_local")


def alloc_var(dtype="int32", init=None) -> Buffer:
    """A mutable scalar: `x = T.alloc_var("int32")`, then `x = x + 1` updates it."""
    buf = _alloc((1,), dtype, "var", "T.alloc_var")
    if init is not None:
        in_kernel("T.alloc_var").emit(BufferStore(buf, (Const.create(0),), cast(buf.dtype, init)))
    return buf


def alloc_global(shape, dtype="float32") -> Buffer:
    """Not supported: global scratch tensors are kernel parameters (TC103)."""
    raise TilecraftError("TC103", construct="T.alloc_global",
                         instead="pass scratch tensors as kernel parameters")
