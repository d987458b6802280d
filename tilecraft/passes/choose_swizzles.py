"""choose_swizzles: which shared tiles take the canonical swizzled layout.

Requires: `pipelines`, `layouts`. Guarantees (`swizzles`): state.swizzled holds every shared
buffer of 16 bits with 2 dims whose rows hold at least 32 bytes in 16-byte chunks and 8 rows
at a time (`wants_swizzle`): lowering gives it `make_swizzled_layout`'s layout (column blocks of
the widest of 128/64/32 bytes dividing a row, each row-major with its 16-byte chunks XORed by
row: what ldmatrix reads without bank conflicts and TMA and wgmma address with their
hardware swizzle). Where the tiles live is the block printer's arena plan (block/smem_plan.py).
"""

from __future__ import annotations

from tilecraft.ir import Allocate
from tilecraft.ir.visitor import walk

from .context import KernelState


def wants_swizzle(buf) -> bool:
    """A 16-bit 2-D tile with rows of at least 32 bytes in 16-byte chunks, 8 rows at a time."""
    shape = buf.static_shape
    return (buf.dtype.bits == 16 and len(shape) == 2 and shape[1] % 8 == 0
            and shape[1] * 2 >= 32 and shape[0] % 8 == 0)


def choose_swizzles(state: KernelState) -> None:
    """The pipeline's pass."""
    for s in walk(state.kernel.body):
        if isinstance(s, Allocate) and s.buffer.scope == "shared" and wants_swizzle(s.buffer):
            state.swizzled.add(s.buffer)
