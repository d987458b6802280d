"""Numpy helpers for the interpreter: compute dtypes, GPU-like stores, region access with clipping."""

from __future__ import annotations

import numpy as np

from tilecraft import dtypes as dt


def np_type(t: dt.DataType) -> np.dtype:
    """The numpy dtype the interpreter computes and stores `t` in."""
    return np.dtype(t.np_dtype)


def store_cast(t: dt.DataType, value) -> np.ndarray:
    """`value` converted like a GPU store to a `t` buffer (round to nearest even, saturate for
    sub-byte floats, truncate float->int)."""
    arr = np.asarray(value)
    if arr.dtype == np_type(t) and t.is_standard:
        return arr
    return np.asarray(t.cast_array(arr))


def region_slices(starts, extents, shape) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """The part of a region inside the buffer: (slices into the buffer, slices into the tile)."""
    buf_sl, tile_sl = [], []
    for s, e, n in zip(starts, extents, shape):
        lo, hi = max(s, 0), min(s + e, n)
        if hi <= lo:
            lo = hi = 0
            buf_sl.append(slice(0, 0))
            tile_sl.append(slice(0, 0))
            continue
        buf_sl.append(slice(lo, hi))
        tile_sl.append(slice(lo - s, hi - s))
    return tuple(buf_sl), tuple(tile_sl)


def read_region(arr: np.ndarray, starts, extents) -> np.ndarray:
    """The tile at `starts` with shape `extents`; elements outside the array read as 0."""
    bs, ts = region_slices(starts, extents, arr.shape)
    out = np.zeros(tuple(extents), dtype=arr.dtype)
    out[ts] = arr[bs]
    return out


def write_region(arr: np.ndarray, starts, extents, tile: np.ndarray) -> None:
    """Write `tile` at `starts`; elements outside the array are dropped."""
    bs, ts = region_slices(starts, extents, arr.shape)
    arr[bs] = tile.reshape(tuple(extents))[ts]
