"""Small integer helpers shared by the layout modules (mixed-radix ravel/unravel, products).

All helpers use only `+ - * // %` so they work on Python ints and on numpy integer arrays alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def prod(xs: Sequence[int]) -> int:
    """Product of a sequence of ints (1 for an empty sequence)."""
    out = 1
    for x in xs:
        out *= x
    return out


def unravel(index: Any, sizes: Sequence[int]) -> list[Any]:
    """Row-major digits of `index` in a grid of `sizes` (first digit is the most significant)."""
    digits = []
    for size in reversed(sizes):
        digits.append(index % size)
        index = index // size
    return digits[::-1]


def ravel(digits: Sequence[Any], sizes: Sequence[int]) -> Any:
    """Row-major linear index of `digits` in a grid of `sizes` (inverse of `unravel`)."""
    out: Any = 0
    for digit, size in zip(digits, sizes):
        out = out * size + digit
    return out


def as_shape(shape: Sequence[int], what: str = "shape") -> tuple[int, ...]:
    """Validate a shape: a tuple of positive Python ints."""
    out = tuple(int(s) for s in shape)
    if any(s < 1 for s in out):
        from .errors import LayoutError

        raise LayoutError(f"{what} must hold positive integers, got {tuple(shape)}")
    return out


def is_power_of_two(x: int) -> bool:
    """True when `x` is 1, 2, 4, 8, ..."""
    return x >= 1 and x & (x - 1) == 0


def group_modes(shape: Sequence[int], mode_shape: Sequence[int]) -> list[list[int]]:
    """Assign modes (positions in `mode_shape`) to dimensions greedily by product.

    Dimension d takes modes until their product reaches shape[d]; with no size-1 modes (the
    canonical forms) the grouping is unique. Raises ValueError when the modes do not split shape.
    """
    dims: list[list[int]] = []
    pos = 0
    for extent in shape:
        group, p = [], 1
        while p < extent and pos < len(mode_shape):
            group.append(pos)
            p *= mode_shape[pos]
            pos += 1
        if p != extent:
            raise ValueError(f"mode_shape {tuple(mode_shape)} does not split shape {tuple(shape)}")
        dims.append(group)
    if any(mode_shape[m] != 1 for m in range(pos, len(mode_shape))):
        raise ValueError(f"mode_shape {tuple(mode_shape)} does not split shape {tuple(shape)}")
    if dims and pos < len(mode_shape):
        dims[-1].extend(range(pos, len(mode_shape)))  # trailing size-1 modes: harmless
    return dims
