"""CUDA's launch limits, checked before the driver sees a grid or a block.

The driver takes grid and block sizes as unsigned 32-bit ints, so ctypes would quietly turn a
grid of 2^32 + 1 blocks into 1 and a negative one into four billion. Grids are computed from the
arguments' sizes at every call, so they are checked at every call (three comparisons when they
are fine); a block is fixed per kernel and is checked once, when the kernel is made.

    check_grid((n // 128, 1, 1), ...)   # (x, y, z); None for an empty grid (launch nothing)
    check_block((128, 1, 1), ...)       # TC310 unless 1 <= x*y*z <= 1024, x, y <= 1024, z <= 64

A dimension that is 0 (an empty tensor) launches nothing; a negative one, one beyond the limits
(x < 2^31, y and z < 65536) or one that is no multiple of the cluster is TC309, naming the
dimension, its value and the dynamic dimensions it was computed from.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

from ..diagnostics import Span
from .errors import LaunchArgumentError

GRID_LIMITS: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS: tuple[int, int, int] = (1024, 1024, 64)
MAX_THREADS: int = 1024


def check_grid(
    grid: Sequence[object],
    *,
    kernel: str,
    span: Span | None = None,
    dims: Mapping[str, int] | None = None,
    cluster: tuple[int, int, int] | None = None,
) -> tuple[int, int, int] | None:
    """`grid` (1 to 3 entries) as (x, y, z), or None when a dimension is 0; TC309 when a
    dimension is not an int, negative, beyond CUDA's limits, or no multiple of `cluster`."""
    if cluster is None:
        x, y, z = (*grid, 1, 1)[:3]
        if (type(x) is int and type(y) is int and type(z) is int and 0 < x <= GRID_LIMITS[0]
                and 0 < y <= GRID_LIMITS[1] and 0 < z <= GRID_LIMITS[2]):
            return x, y, z  # type: ignore[return-value]
    values = []
    for axis, v in zip("xyz", (*grid, 1, 1)[:3]):
        try:
            values.append(operator.index(v))  # type: ignore[arg-type]
        except TypeError:
            raise _grid_error(kernel, span, dims, axis, repr(v), "the size is not an integer")
    for axis, v, limit in zip("xyz", values, GRID_LIMITS):
        if v < 0:
            raise _grid_error(kernel, span, dims, axis, v, "a negative number of blocks")
        if v > limit:
            raise _grid_error(
                kernel, span, dims, axis, v, f"CUDA launches at most {limit} blocks along {axis}"
            )
    if cluster is not None:
        for axis, v, c in zip("xyz", values, cluster):
            if v % c:
                raise _grid_error(
                    kernel, span, dims, axis, v, f"not a multiple of the cluster's {c} blocks"
                )
    if 0 in values:
        return None
    return values[0], values[1], values[2]


def _grid_error(
    kernel: str,
    span: Span | None,
    dims: Mapping[str, int] | None,
    axis: str,
    value: object,
    detail: str,
) -> LaunchArgumentError:
    if dims:
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(dims.items()))
        hint = (f"the grid is computed from the arguments' dynamic dimensions ({sizes}); check "
                "those sizes, or give each block more work")
    else:
        hint = "give each block more work so that fewer blocks cover the problem"
    return LaunchArgumentError(
        "TC309", span=span, kernel=kernel, value=value, axis=axis, detail=detail, hint=hint
    )


def check_block(block: Sequence[int], *, kernel: str, span: Span | None = None) -> None:
    """TC310 unless `block` (x, y, z) is a CUDA block: each dimension within its limit and
    1 to 1024 threads in all."""
    shown = " x ".join(str(b) for b in block)
    total = 1
    for axis, b, limit in zip("xyz", block, BLOCK_LIMITS):
        if type(b) is not int or not 1 <= b <= limit:
            detail = f"{axis} must be 1 to {limit}"
            raise LaunchArgumentError("TC310", span=span, kernel=kernel, block=shown, detail=detail)
        total *= b
    if total > MAX_THREADS:
        raise LaunchArgumentError(
            "TC310", span=span, kernel=kernel, block=shown, detail=f"{total} threads in all"
        )
