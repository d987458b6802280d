"""Loop headers: Parallel (element-wise, mapped to threads), Pipelined, serial, unroll, vectorized.

Bounds are ints or integer expressions (a float is TC211); signatures follow TileLang's
(`T.Pipelined(start, stop=None, num_stages=0, ...)`, `T.serial(start, stop=None, step=None)`).
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.frontend.frames import LoopFrame
from tilecraft.ir import Expr, PipelineInfo, const_int
from tilecraft.ir.simplify import simplify

from .surface import check_option, int_arg


def _extent(x, what: str):
    x = int_arg(x, f"the extent of {what}")
    c = const_int(x)
    if c is not None and c < 0:
        raise TilecraftError("TC108", detail=f"{what} extent {c} is negative", hint="")
    return c if c is not None else x


def Parallel(*extents) -> LoopFrame:  # noqa: N802
    """`for i, j in T.Parallel(M, N):` an element-wise loop nest the compiler maps to threads."""
    if not extents:
        raise TilecraftError("TC108", detail="T.Parallel needs at least one extent", hint="")
    return LoopFrame("parallel", tuple(_extent(e, "T.Parallel") for e in extents))


def Pipelined(  # noqa: N802
    start, stop=None, num_stages: int = 0, order=None, stage=None, sync=None, group=None,
    unroll: int = 0,
) -> LoopFrame:
    """`for k in T.Pipelined(n, num_stages=3):` a loop whose copies overlap earlier iterations'
    compute (multi-buffered shared memory); `T.Pipelined(start, stop, num_stages=...)` runs
    k from start to stop - 1. `order`/`stage`/`group` fix the schedule by hand. `unroll=u`
    asks the CUDA compiler to unroll u iterations (u = num_stages makes every stage's address a
    constant; a loop keeping a wgmma in flight stays rolled); the results do not change."""
    stages = int_arg(num_stages, "num_stages of T.Pipelined", device=False)
    if stages < 0:
        raise TilecraftError("TC108", detail=f"num_stages={stages}", hint="a small int >= 0")
    unroll = int_arg(unroll, "unroll of T.Pipelined", device=False)
    if unroll < 0:
        raise TilecraftError("TC108", detail=f"unroll={unroll}", hint="an int >= 0 (0: the "
                             "compiler's choice)")
    check_option("T.Pipelined", "sync", sync)
    info = PipelineInfo(stages, tuple(order) if order else None, tuple(stage) if stage else None,
                        tuple(tuple(g) for g in group) if group else None, unroll)
    frame = _range("pipelined", start, stop, 1, "T.Pipelined")
    return LoopFrame("pipelined", frame.extents, frame.start, 1, info)


def _range(kind: str, start, stop, step, what: str) -> LoopFrame:
    if stop is None:
        start, stop = 0, start
    start = int_arg(start, f"the start of {what}")
    stop = int_arg(stop, f"the stop of {what}")
    step = int_arg(1 if step is None else step, f"the step of {what}", device=False)
    if step == 0:
        raise TilecraftError("TC108", detail=f"{what} with step 0", hint="a nonzero int constant")
    if step == 1:
        extent = simplify(stop - start) if isinstance(stop, Expr) or isinstance(start, Expr) \
            else max(0, stop - start)
    else:
        from .math import ceildiv

        extent = ceildiv(stop - start, step) if step > 0 else ceildiv(start - stop, -step)
        if isinstance(extent, int):
            extent = max(0, extent)
    return LoopFrame(kind, (_extent(extent, what),), start, step)


def serial(start, stop=None, step=None) -> LoopFrame:
    """A sequential loop (also what plain `range(...)` means in a kernel)."""
    return _range("serial", start, stop, step, "T.serial")


def unroll(start, stop=None, step=None) -> LoopFrame:
    """A sequential loop the compiler unrolls."""
    return _range("unrolled", start, stop, step, "T.unroll")


def vectorized(start, stop=None, step=None) -> LoopFrame:
    """A per-thread loop the compiler turns into vector instructions."""
    return _range("vectorized", start, stop, step, "T.vectorized")
