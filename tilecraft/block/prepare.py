"""prepare: the steps between a block program and its printing, as passes (passes/pipeline.py
runs them on a lowered kernel; the printer on a program written at the Tilus level):

    sink_stores          stores of loaded registers below the copies after them (sink_stores.py)
    plan_arena           where each shared tensor lives (smem_plan.py)
    insert_barriers      the barriers the GPU needs, the arena's sharing included (barriers.py)
    hoist_casts          casts of register elements in parallel loops as block casts
    select_instructions  a typed plan per instruction a hardware instruction computes (select.py)
"""

from __future__ import annotations

from dataclasses import dataclass

from .barriers import insert_barriers
from .hoist_casts import hoist_casts
from .program import BlockProgram
from .select import select_instructions
from .sink_stores import sink_stores
from .smem_plan import SharedPlan, plan_program_arena


@dataclass(frozen=True)
class Prepared:
    program: BlockProgram  # with its barriers
    arena: SharedPlan
    plans: dict  # id(instruction of `program`) -> its plan


def prepare(program: BlockProgram, target) -> Prepared:
    """Verify `program`, sink its loaded stores, plan its arena, insert its barriers, select
    its instructions for `target` (a Target, or None: nothing a chip may lack)."""
    program.verify()
    program = sink_stores(program)
    arena = plan_program_arena(program.body, program.num_threads, target)
    program = hoist_casts(insert_barriers(program, arena), target)  # (fast casts)
    return Prepared(program, arena, select_instructions(program, target))
