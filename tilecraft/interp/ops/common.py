"""Region access shared by the tile-op rules."""

from __future__ import annotations

import numpy as np

from tilecraft.ir import BufferRegion

from ..values import read_region, store_cast, write_region


def bounds(m, r: BufferRegion) -> tuple[list[int], list[int]]:
    starts = [int(m.ev.scalar(s)) for s in r.starts]
    extents = [int(m.ev.scalar(e)) for e in r.extents]
    return starts, extents


def read(m, r: BufferRegion, squeeze: bool = True) -> np.ndarray:
    """The region's values (outside the buffer: 0), with size-1 dims dropped when `squeeze`."""
    starts, extents = bounds(m, r)
    tile = read_region(m.buffers[r.buffer], starts, extents)
    if squeeze:
        tile = tile.reshape([e for e, x in zip(extents, r.extents) if x != 1])
    return tile


def write(m, r: BufferRegion, values) -> None:
    """Store `values` into the region with the buffer's rounding; outside elements are dropped."""
    starts, extents = bounds(m, r)
    arr = m.buffers[r.buffer]
    tile = store_cast(r.buffer.dtype, np.asarray(values)).reshape(extents)
    write_region(arr, starts, extents, tile)
