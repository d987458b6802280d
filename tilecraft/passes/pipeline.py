"""The pass pipeline: the whole compiler from Tile IR to a block program ready to print, one
ordered list; each pass declares what it requires and produces.

    legalize -> schedule_loads -> plan_pipeline -> infer_layouts -> choose_swizzles     (Tile IR)
    -> lower_tile_ops                                    (Tile IR -> block instructions)
    -> pipeline_copies -> schedule_blocks -> forward_copies -> merge_waits -> sink_stores
       -> plan_arena -> insert_barriers
       -> select_instructions                            (block program)

schedule_loads rewrites the kernel (state.kernel); lower_tile_ops builds state.block_program,
which pipeline_copies, schedule_blocks, forward_copies, merge_waits, sink_stores and
insert_barriers rewrite; the other passes analyse. codegen/block_cuda prints the result
(`state.prepared`). A kernel written at the Tilus level starts as a block program and runs the
block-program passes only (block/prepare.py). See docs/compiler.md and docs/block_ir.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tilecraft.ir import PrimFunc
from tilecraft.options import CompileOptions
from tilecraft.targets import Target

from .block_passes import (
    forward_copies,
    insert_barriers,
    merge_waits,
    plan_arena,
    select_instructions,
    sink_stores,
)
from .choose_swizzles import choose_swizzles
from .context import KernelState
from .layout_inference import infer_layouts
from .legalize import legalize
from .lower_tile_ops import lower_tile_ops
from .pipeline_copies import pipeline_copies
from .plan_pipeline import plan_pipeline
from .schedule_blocks import schedule_blocks
from .schedule_loads import schedule_loads


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[KernelState], None]
    requires: frozenset[str]
    produces: frozenset[str]


def _p(name, fn, requires=(), produces=()):
    return Pass(name, fn, frozenset(requires), frozenset(produces))


PASSES: tuple[Pass, ...] = (
    _p("legalize", legalize, produces={"legal"}),
    _p("schedule_loads", schedule_loads, requires={"legal"}, produces={"loads_scheduled"}),
    _p("plan_pipeline", plan_pipeline, requires={"loads_scheduled"}, produces={"pipelines"}),
    _p("infer_layouts", infer_layouts, requires={"loads_scheduled"}, produces={"layouts"}),
    _p("choose_swizzles", choose_swizzles, requires={"pipelines", "layouts"},
       produces={"swizzles"}),
    _p("lower_tile_ops", lower_tile_ops, requires={"layouts", "swizzles"},
       produces={"block_program"}),
    _p("pipeline_copies", pipeline_copies, requires={"block_program"}, produces={"pipelined"}),
    _p("schedule_blocks", schedule_blocks, requires={"pipelined"}, produces={"blocks_scheduled"}),
    _p("forward_copies", forward_copies, requires={"blocks_scheduled"},
       produces={"copies_forwarded"}),
    _p("merge_waits", merge_waits, requires={"copies_forwarded"}, produces={"waits_merged"}),
    _p("sink_stores", sink_stores, requires={"waits_merged"}, produces={"stores_sunk"}),
    _p("plan_arena", plan_arena, requires={"stores_sunk"}, produces={"arena"}),
    _p("insert_barriers", insert_barriers, requires={"arena"}, produces={"barriers"}),
    _p("select_instructions", select_instructions, requires={"barriers"},
       produces={"prepared"}),
)


def check_order(passes: tuple[Pass, ...] = PASSES) -> None:
    """Every pass's requirements are produced by an earlier pass (run at import and in tests)."""
    have: set[str] = set()
    for p in passes:
        missing = p.requires - have
        if missing:
            raise RuntimeError(f"pass `{p.name}` requires {sorted(missing)}, produced by no "
                               "earlier pass")
        have |= p.produces


check_order()


def lower(func: PrimFunc, target: Target | CompileOptions,
          passes: tuple[Pass, ...] = PASSES) -> KernelState:
    """Run the pass list over `func` for a target (default switches) or a CompileOptions;
    returns the filled KernelState."""
    options = target if isinstance(target, CompileOptions) else CompileOptions(target)
    state = KernelState(func=func, target=options.target, options=options)
    for p in passes:
        missing = p.requires - state.produced
        if missing:
            raise RuntimeError(f"pass `{p.name}` requires {sorted(missing)}")
        p.run(state)
        state.produced |= p.produces
        if options.dump_ir:
            _dump(Path(options.dump_ir), func, p.name, state)
    return state


def _dump(d: Path, func: PrimFunc, name: str, state: KernelState) -> None:
    d.mkdir(parents=True, exist_ok=True)
    lines = [func.script(), "", f"# after {name}"]
    for buf, lay in state.layouts.items():
        lines.append(f"# layout {buf.name}: {lay}")
    if state.arena is not None:
        for buf, offset in state.arena.offsets.items():
            lines.append(f"# smem {buf.name}: offset {offset}")
    if state.block_program is not None:
        lines += ["", "# block program", state.block_program.script()]
    elif state.lowering_refusal is not None:
        lines += ["", f"# no block program: {state.lowering_refusal.message}"]
    idx = [p.name for p in PASSES].index(name) if name in [p.name for p in PASSES] else 0
    (d / f"{func.name}.{idx:02d}.{name}.txt").write_text("\n".join(lines))
