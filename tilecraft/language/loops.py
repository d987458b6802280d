"""Loop headers: Parallel (element-wise, mapped to threads), Pipelined, serial, unroll, vectorized."""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.frames import LoopFrame
from tilecraft.ir import Expr, PipelineInfo, const_int
from tilecraft.ir.simplify import simplify


def _extent(x, what: str):
    if isinstance(x, bool) or not isinstance(x, (int, Expr)):
        raise TilecraftError("TC108", detail=f"{what} extent {x!r} is not an integer",
                             hint="loop extents are ints or integer expressions")
    c = const_int(x)
    if c is not None and c < 0:
        raise TilecraftError("TC108", detail=f"{what} extent {c} is negative", hint="")
    return c if c is not None else x


def Parallel(*extents) -> LoopFrame:  # noqa: N802
    """`for i, j in T.Parallel(M, N):` an element-wise loop nest; the compiler maps it to threads."""
    if not extents:
        raise TilecraftError("TC108", detail="T.Parallel needs at least one extent", hint="")
    return LoopFrame("parallel", tuple(_extent(e, "T.Parallel") for e in extents))


def Pipelined(n, num_stages: int = 0, order=None, stage=None, group=None, **_ignored) -> LoopFrame:  # noqa: N802
    """`for k in T.Pipelined(n, num_stages=3):` a loop whose copies overlap earlier iterations'
    compute (multi-buffered shared memory). `order`/`stage`/`group` fix the schedule by hand."""
    if const_int(num_stages) is None or const_int(num_stages) < 0:
        raise TilecraftError("TC108", detail=f"num_stages={num_stages!r}", hint="a small int >= 0")
    info = PipelineInfo(int(num_stages), tuple(order) if order else None,
                        tuple(stage) if stage else None,
                        tuple(tuple(g) for g in group) if group else None)
    return LoopFrame("pipelined", (_extent(n, "T.Pipelined"),), 0, 1, info)


def _range(kind: str, start, stop, step) -> LoopFrame:
    if stop is None:
        start, stop = 0, start
    if const_int(step) is None or const_int(step) == 0:
        raise TilecraftError("TC108", detail=f"loop step {step!r}", hint="a nonzero int constant")
    step = const_int(step)
    if step == 1:
        extent = simplify(stop - start) if isinstance(stop, Expr) or isinstance(start, Expr) \
            else max(0, stop - start)
    else:
        from .math import ceildiv

        extent = ceildiv(stop - start, step) if step > 0 else ceildiv(start - stop, -step)
        if isinstance(extent, int):
            extent = max(0, extent)
    return LoopFrame(kind, (_extent(extent, f"T.{kind}"),), start, step)


def serial(start, stop=None, step: int = 1) -> LoopFrame:
    """A sequential loop (also what plain `range(...)` means in a kernel)."""
    return _range("serial", start, stop, step)


def unroll(start, stop=None, step: int = 1) -> LoopFrame:
    """A sequential loop the compiler unrolls."""
    return _range("unrolled", start, stop, step)


def vectorized(start, stop=None, step: int = 1) -> LoopFrame:
    """A per-thread loop the compiler turns into vector instructions."""
    return _range("vectorized", start, stop, step)
