"""The block-program passes before printing (block/prepare.py does the same for a program written
at the Tilus level): each runs only when lowering built a program.

- forward_copies (`copies_forwarded`): shared tiles an asynchronous copy fills and only loads
  of the same elements read back, loaded into registers instead (block/forward_copies.py);
- merge_waits (`waits_merged`): one wait for asynchronous copies issued one after another
  (block/merge_waits.py);
- sink_stores (`stores_sunk`): stores of loaded registers below the asynchronous copies that
  follow them (block/sink_stores.py; switch `sink_stores`, TILECRAFT_SINK_STORES=0 off);
- plan_arena (`arena`): state.arena, the shared tensors' byte offsets (block/smem_plan.py);
- insert_barriers (`barriers`): state.block_program with the barriers the GPU needs
  (block/barriers.py), the arena's sharing included;
- select_instructions (`prepared`): state.prepared, the program with its arena and a typed plan
  per instruction for the target (block/select.py), what codegen/block_cuda prints; first the
  casts of register elements in parallel loops become block casts (block/hoist_casts.py).
"""

from __future__ import annotations

from tilecraft.block import barriers, select, smem_plan
from tilecraft.block import sink_stores as sink
from tilecraft.block.forward_copies import forward_copies as _forward_copies
from tilecraft.block.hoist_casts import hoist_casts
from tilecraft.block.merge_waits import merge_waits as _merge_waits
from tilecraft.block.prepare import Prepared

from .context import KernelState


def forward_copies(state: KernelState) -> None:
    if state.block_program is not None:
        state.block_program = _forward_copies(state.block_program)


def merge_waits(state: KernelState) -> None:
    if state.block_program is not None:
        state.block_program = _merge_waits(state.block_program)


def sink_stores(state: KernelState) -> None:
    if state.block_program is not None and state.options.sink_stores:
        state.block_program = sink.sink_stores(state.block_program)


def plan_arena(state: KernelState) -> None:
    if state.block_program is not None:
        program = state.block_program
        program.verify()
        state.arena = smem_plan.plan_program_arena(program.body, program.num_threads,
                                                   state.target)


def insert_barriers(state: KernelState) -> None:
    if state.block_program is not None:
        state.block_program = barriers.insert_barriers(state.block_program, state.arena)


def select_instructions(state: KernelState) -> None:
    if state.block_program is not None:
        state.block_program = hoist_casts(state.block_program, state.target)  # (fast casts)
        plans = select.select_instructions(state.block_program, state.target)
        state.prepared = Prepared(state.block_program, state.arena, plans)
