"""Readable names for register layouts: `local(2, 1).spatial(8, 4).local(1, 2)`.

`describe(L)` peels primitive factors off the inner end of L (each peel is an exact division, so
the result is always correct), longest primitive first, and returns the chained expression; it
returns None when no peel applies (then `Fragment.__repr__` prints the unified form instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .fragment import Fragment


def _candidates(layout: Fragment) -> list[tuple[str, tuple[int, ...]]]:
    """(kind, shape) of primitives that might be the innermost factor, longest first."""
    out: list[tuple[str, tuple[int, ...]]] = []
    dim_of = {m: d for d, group in enumerate(layout.dim_modes) for m in group}
    if layout.spatial_modes and layout.spatial_modes[-1] < 0:
        out.append(("replicate", (-layout.spatial_modes[-1],)))
    for kind, seq in (("local", layout.local_modes), ("spatial", layout.spatial_modes)):
        for k in range(len(seq), 0, -1):
            tail = seq[-k:]
            if any(m < 0 for m in tail):
                continue
            dims = [dim_of[m] for m in tail]
            if len(set(dims)) != k:
                continue
            shape = [1] * layout.ndim
            for m, d in zip(tail, dims):
                shape[d] = layout.mode_shape[m]
            if dims == sorted(dims):
                out.append((kind, tuple(shape)))
            elif dims == sorted(dims, reverse=True):
                out.append((f"column_{kind}", tuple(shape)))
    return out


def describe(layout: Fragment) -> str | None:
    """The layout as a chain of primitives, or None if the greedy peeling gets stuck."""
    from . import primitives
    from .algebra import quotient

    factors: list[tuple[str, tuple[int, ...]]] = []
    cur = layout
    while cur.mode_shape or cur.spatial_modes:
        for kind, shape in _candidates(cur):
            if kind == "replicate":
                prim = primitives.replicate(shape[0], cur.ndim)
            else:
                prim = getattr(primitives, kind)(*shape)
            q = quotient(cur, prim)
            if q is None:
                continue
            cur = q
            factors.append((kind, shape))
            break
        else:
            return None
    if not factors:
        return f"local({', '.join(['1'] * layout.ndim)})"
    factors.reverse()
    parts = []
    for k, (kind, shape) in enumerate(factors):
        args = ", ".join(map(str, shape))
        if kind == "replicate" and k == 0 and layout.ndim != 1:
            args = f"{shape[0]}, {layout.ndim}"
        parts.append(f"{kind}({args})")
    return ".".join(parts)
