"""KernelState: what the passes know about one kernel, filled in pass by pass.

The Tile IR itself is immutable; the analysis passes attach their results here, keyed by the
buffers (hashable by uid) and by statements (`StmtMap`: a statement is a place in the program,
so two equal statements are two keys; the map holds each statement it keys, so a key is never
confused with a later object). lower_tile_ops reads them and builds `block_program`, which the later
passes rewrite and the block printer prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tilecraft.ir import Buffer, KernelLaunch, PrimFunc, Stmt
from tilecraft.targets import Target

V = TypeVar("V")


class StmtMap(Generic[V]):
    """Statement -> fact, by the statement object itself (not its value)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[Stmt, V]] = {}

    def __setitem__(self, stmt: Stmt, value: V) -> None:
        self._items[id(stmt)] = (stmt, value)

    def __getitem__(self, stmt: Stmt) -> V:
        held, value = self._items[id(stmt)]
        assert held is stmt
        return value

    def get(self, stmt: Stmt, default: Any = None) -> Any:
        item = self._items.get(id(stmt))
        return default if item is None or item[0] is not stmt else item[1]

    def __contains__(self, stmt: object) -> bool:
        item = self._items.get(id(stmt))
        return item is not None and item[0] is stmt

    def values(self) -> list[V]:
        return [v for _, v in self._items.values()]

    def items(self) -> list[tuple[Stmt, V]]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


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
    loop_layouts: StmtMap[Any] = field(default_factory=StmtMap)  # ParallelLoop -> Fragment
    gemm_warps: StmtMap[tuple[int, int]] = field(default_factory=StmtMap)  # Gemm -> (wm, wn)
    gemm_copies: StmtMap[int] = field(default_factory=StmtMap)  # Gemm -> copies of the grid
    gemm_wgmma: StmtMap[tuple[int, int]] = field(default_factory=StmtMap)  # Gemm -> (gm, gn)
    # pipelining
    pipelines: StmtMap[PipelinePlan] = field(default_factory=StmtMap)  # For -> plan
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
