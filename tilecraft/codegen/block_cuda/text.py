"""Small pieces of C text the block printer's mixins share: reduction combines and identities,
the shuffle offsets of a layout's reduced modes, printf formats and string literals."""

from __future__ import annotations

import math

from ..cuda.cexpr import zero

ROW_CHUNK = 8  # values per printed line of a memory tile (printf takes at most 32 arguments)


def convert(t: str, text: str, src: str) -> str:
    """`text` (of C type `src`) as C type `t`: a `tc::cast` only where the types differ."""
    return text if t == src else f"tc::cast<{t}>({text})"


def combine(kind: str, t: str, a: str, b: str) -> str:
    """C text of the reduction `kind` of a and b in C type t (sums wrap for integers)."""
    if kind in ("sum", "abssum"):
        return f"{a} + {b}" if t in ("float", "double") else f"tc::wrap_add<{t}>({a}, {b})"
    return f"tc::{'maximum' if kind in ('max', 'absmax') else 'minimum'}<{t}>({a}, {b})"


def identity(kind: str, t: str) -> str:
    """The identity of the combine: 0 for sums, the type's lowest / highest for max / min
    (absmax too: abs wraps for the minimum of a signed type, as on the interpreter)."""
    if kind in ("sum", "abssum"):
        return zero(t)
    return f"tc::{'highest' if kind == 'min' else 'lowest'}<{t}>()"


def xor_offsets(modes) -> list[int] | None:
    """Butterfly shuffle offsets over (thread stride, size) modes; None unless both are powers
    of two."""
    offs = []
    for stride, size in modes:
        if size & (size - 1) or stride & (stride - 1):
            return None
        j = 1
        while j < size:
            offs.append(stride * j)
            j *= 2
    return offs


def cross_warp_modes(layout, dim: int) -> list[tuple[int, int]]:
    """(thread stride, size) of the spatial modes of `dim` (replications excluded)."""
    out = []
    sizes = layout.spatial_sizes
    for k, m in enumerate(layout.spatial_modes):
        if m >= 0 and m in layout.dim_modes[dim]:
            out.append((math.prod(sizes[k + 1:]), sizes[k]))
    return out


def c_string(text: str, printf: bool = False) -> str:
    """`text` as a C string literal (a printf format when `printf`: % doubled)."""
    if printf:
        text = text.replace("%", "%%")
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def value_format(dtype) -> str:
    """printf conversion of tc::dbg(x) for an IR dtype."""
    if dtype.is_float:
        return "%g"
    if dtype.name == "bool":
        return "%d"
    return "%llu" if dtype.name.startswith("uint") else "%lld"
