"""KernelState: what the passes know about one kernel, filled in pass by pass.

The Tile IR itself is immutable; the analysis passes attach their results here, keyed by the
buffers (hashable by uid) and by statement identity (`id(stmt)`; the state keeps the PrimFunc
alive, so ids are stable). lower_tile_ops reads them and builds `block_program`, which the later
passes rewrite and the block printer prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilecraft.ir import Buffer, KernelLaunch, PrimFunc, Stmt
from tilecraft.targets import Target


@dataclass
class PipelinePlan:
    """How one `T.Pipelined` loop is software-pipelined (see plan_pipeline.py)."""

    loop: Stmt
    num_stages: int
    producers: tuple[Stmt, ...]  # global->shared copies issued `num_stages - 1` iterations ahead
    buffers: tuple[Buffer, ...]  # shared buffers multi-buffered `num_stages` times


@dataclass
class KernelState:
    """Everything the pass pipeline learns about one kernel."""

    func: PrimFunc
    target: Target
    options: Any = None  # CompileOptions (tilecraft/options.py): the switches of this build
    kernel: KernelLaunch | None = None
    produced: set[str] = field(default_factory=set)
    # layout inference
    layouts: dict[Buffer, Any] = field(default_factory=dict)  # fragment buffer -> Fragment
    layout_origin: dict[Buffer, str] = field(default_factory=dict)  # "gemm at line 12"
    loop_layouts: dict[int, Any] = field(default_factory=dict)  # id(ParallelLoop) -> Fragment
    gemm_warps: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(Gemm) -> (wm, wn)
    gemm_copies: dict[int, int] = field(default_factory=dict)  # id(Gemm) -> copies of the grid
    gemm_wgmma: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(Gemm) -> (gm, gn)
    # pipelining
    pipelines: dict[int, PipelinePlan] = field(default_factory=dict)  # id(For) -> plan
    # shared memory: the tiles in the canonical swizzled layout (choose_swizzles)
    swizzled: set[Buffer] = field(default_factory=set)
    # lowering (lower_tile_ops): the kernel as block instructions (tilecraft.block.BlockProgram)
    block_program: Any = None
    lowering_refusal: Any = None  # the TilecraftError when it could not be built
    # the block-program passes: the arena plan, the instruction plans (block/prepare.py)
    arena: Any = None
    prepared: Any = None

    def lowered_func(self) -> PrimFunc:
        """The function with the kernel as the passes left it (schedule_loads rewrites it); the
        interpreter runs it to check a rewrite against the original."""
        import dataclasses

        from tilecraft.ir.rewrite import replace_stmt
        from tilecraft.ir.visitor import walk

        old = next(s for s in walk(self.func.body) if isinstance(s, KernelLaunch))
        if self.kernel is None or old is self.kernel:
            return self.func
        return dataclasses.replace(self.func, body=replace_stmt(self.func.body, old, self.kernel))

    @property
    def num_threads(self) -> int:
        assert self.kernel is not None
        return self.kernel.num_threads
