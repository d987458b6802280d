"""schedule_blocks: the launch order of the block program's grid (IR -> IR).

Requires: `pipelined` (the block program as it will be printed). Guarantees
(`blocks_scheduled`): `block_program.reversed_axes` marks the grid axes (other than those
T.use_swizzle rasterizes) along which some loop runs more iterations for larger indices — a
causal attention's key loop — so those blocks launch first and the last wave is not a few long
blocks. The order of blocks is not part of the program's meaning (the VM ignores it).
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir import UseSwizzle
from tilecraft.ir.expr import const_int
from tilecraft.ir.ranges import work_grows_with
from tilecraft.ir.visitor import walk

from .context import KernelState


def schedule_blocks(state: KernelState) -> None:
    """The pipeline's pass (a no-op without a block program)."""
    program = state.block_program
    if program is None or program.cluster is not None:  # (clusters: blocks in grid order)
        return
    swizzled = any(isinstance(s, UseSwizzle) for s in walk(program.body))
    ranges = {v: (0, const_int(g) - 1) for v, g in zip(program.block_vars, program.grid)
              if const_int(g) is not None}
    axes = tuple(not (swizzled and len(program.block_vars) >= 2 and k < 2)
                 and work_grows_with(program.body, v, ranges)
                 for k, v in enumerate(program.block_vars))
    if any(axes):
        state.block_program = dataclasses.replace(program, reversed_axes=axes)
