"""Objects returned by `T.Kernel`, `T.Parallel`, `T.Pipelined`, ... and consumed by the parser's
`with`/`for` handling. They carry only what the user wrote."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecraft.ir import PipelineInfo


@dataclass(frozen=True)
class KernelFrame:
    """`T.Kernel(*grid, threads=...)`."""

    grid: tuple[Any, ...]
    threads: tuple[int, ...]
    cluster: tuple[int, ...] | None = None  # one entry per grid dimension


@dataclass(frozen=True)
class LoopFrame:
    """A loop header: `kind` is parallel, serial, pipelined, unrolled or vectorized."""

    kind: str
    extents: tuple[Any, ...]  # one per bound name (Parallel), else one
    start: Any = 0
    step: int = 1
    pipeline: PipelineInfo | None = None


@dataclass(frozen=True)
class TensorSpec:
    """`T.Tensor(shape, dtype)` in a parameter annotation."""

    shape: tuple[Any, ...]
    dtype: Any
