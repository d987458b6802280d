"""choose_swizzles: which shared tiles take the canonical swizzled layout.

Requires: `pipelines`, `layouts`. Guarantees (`swizzles`): state.swizzled holds every shared
buffer of 16 bits with 2 dims whose rows hold at least 32 bytes in 16-byte chunks and 8 rows
at a time (`wants_swizzle`), and every such 8-bit buffer a T.Pipelined loop stages (the packed
weight bytes of the quantized matmul: swizzled, a TMA load can fill it, block/select_tma.py),
and every staged tile of one such row (`_one_row`: a k step's scales in the quantized matmul):
lowering gives it `make_swizzled_layout`'s layout (column blocks of the widest of 128/64/32
bytes dividing a row, each row-major with its 16-byte chunks XORed by row: what ldmatrix reads
without bank conflicts and TMA and wgmma address with their hardware swizzle). Where the tiles
live is the block printer's arena plan (block/smem_plan.py).
"""

from __future__ import annotations

from tilecraft.ir import Allocate, Copy
from tilecraft.ir.visitor import walk

from .context import KernelState


def wants_swizzle(buf, bits: int = 16, rows: int = 8) -> bool:
    """A 2-D tile of `bits`-bit elements (its dtype's) with rows of at least 32 bytes in 16-byte
    chunks, `rows` rows at a time."""
    shape, per_chunk = buf.static_shape, 128 // bits
    return (buf.dtype.bits == bits and buf.dtype.is_standard and len(shape) == 2
            and shape[1] % per_chunk == 0 and shape[1] * bits // 8 >= 32
            and shape[0] % rows == 0)


def choose_swizzles(state: KernelState) -> None:
    """The pipeline's pass."""
    staged = _tma_staged(state)
    for s in walk(state.kernel.body):
        if isinstance(s, Allocate) and s.buffer.scope == "shared" and (
                wants_swizzle(s.buffer) or (s.buffer in staged and (
                    wants_swizzle(s.buffer, 8) or _one_row(s.buffer)))):
            state.swizzled.add(s.buffer)


def _one_row(buf) -> bool:
    """A staged 2-D tile of one row of 8- or 16-bit elements, at least 32 bytes in 16-byte
    chunks (the quantized matmul's k step of scales or zero codes): swizzled, a TMA box of one
    row fills it with the step's other tiles."""
    return buf.dtype.bits in (8, 16) and wants_swizzle(buf, buf.dtype.bits, rows=1) \
        and buf.static_shape[0] == 1


def _tma_staged(state: KernelState) -> set:
    """The shared buffers a T.Pipelined loop stages whose copies may become TMA loads (sm_90a,
    TMA on, no producer with disable_tma): swizzled, an 8-bit one gets them; with cp.async its
    rows would be addressed chunk by chunk."""
    if not (state.target.has_wgmma and getattr(state.options, "tma", True)):
        return set()
    out: set = set()
    for plan in state.pipelines.values():
        copies = [p for p in plan.producers if isinstance(p, Copy)]
        if all(not c.disable_tma for c in copies):
            out.update(plan.buffers)
    return out
