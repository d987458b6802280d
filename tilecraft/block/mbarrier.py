"""Bulk asynchronous copies that complete on barriers in shared memory (Hopper's TMA loads and
mbarriers), for pipelines whose stages one thread fills.

    bars = allocate_shared(uint64[S])               # one barrier per stage
    mbarrier_init(bars, 1)                          # every barrier: 1 arrival per phase
    mbarrier_expect(bars, s, 49152)                 # the arrival, announcing the bytes of stage s
    copy_async_bulk(A_s, A, offset=[...], barrier=bars, index=s)
    mbarrier_wait(bars, s, phase)                   # phase `phase` of bars[s] is complete:
                                                    # the copies that complete on it have landed

A barrier's phase completes when its arrivals arrived and the bytes announced landed; phases
alternate 0, 1, 0, ... so a stage reused every S iterations waits for phase (k // S) % 2. The
copies of one phase must be issued after its `mbarrier_expect`. `mbarrier_arrive(bars, i)` is
one arrival of every warp (a stage's readers saying they are done with it), and a wait may be
the issuing thread's alone (`issuer=True`: it orders the bulk copies that thread issues next).
On the block VM an `mbarrier_wait` lands the copies that complete on that barrier and checks
that the phase it names is the next one to complete (vm_mbarrier.py); on the GPU one thread
issues the expect and the copies (a TMA load per swizzle column block, selected by
block/select_tma.py), and every thread (or the issuer) waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import Expr, as_expr

from .instructions import Instruction
from .tensors import GlobalTensor, SharedTensor, user_span
from .transfer import Tiled, normalize_offset


def _barriers(bars: SharedTensor, instr: str, span) -> None:
    if not isinstance(bars, SharedTensor) or bars.dtype.name != "uint64" or bars.ndim != 1:
        raise TilecraftError("TC603", span, instr=instr,
                             detail=f"`{getattr(bars, 'name', bars)}` must be a shared uint64[n] "
                             "tensor of barriers")


@dataclass(frozen=True)
class MbarrierInit(Instruction):
    """`mbarrier_init(bars, arrivals)`: every barrier of `bars` starts at phase 0, completing
    each phase after `arrivals` arrivals (and the bytes announced)."""

    bars: SharedTensor
    arrivals: int
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "mbarrier_init"

    @classmethod
    def create(cls, bars: SharedTensor, arrivals: int = 1,
               span: Span | None = None) -> MbarrierInit:
        span = user_span(span)
        _barriers(bars, cls.NAME, span)
        return cls(bars, int(arrivals), span)

    def writes(self):
        return (self.bars,)

    def script(self) -> str:
        return f"mbarrier_init({self.bars.name}, {self.arrivals})"


@dataclass(frozen=True)
class MbarrierExpect(Instruction):
    """`mbarrier_expect(bars, index, nbytes)`: one arrival on bars[index] that announces
    `nbytes` bytes of copies completing on it in this phase."""

    bars: SharedTensor
    index: Expr
    nbytes: int
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "mbarrier_expect"

    @classmethod
    def create(cls, bars: SharedTensor, index: Any, nbytes: int,
               span: Span | None = None) -> MbarrierExpect:
        span = user_span(span)
        _barriers(bars, cls.NAME, span)
        return cls(bars, as_expr(index), int(nbytes), span)

    def reads(self):
        return (self.bars,)

    def exprs(self):
        return (self.index,)

    def script(self) -> str:
        from tilecraft.ir.printer import expr_str

        return f"mbarrier_expect({self.bars.name}, {expr_str(self.index)}, {self.nbytes})"


@dataclass(frozen=True)
class MbarrierWait(Instruction):
    """`mbarrier_wait(bars, index, phase, issuer=False)`: every thread (the thread issuing bulk
    copies alone, with `issuer`) waits until phase `phase` (0 or 1) of bars[index] is
    complete."""

    bars: SharedTensor
    index: Expr
    phase: Expr
    issuer: bool = False
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "mbarrier_wait"

    @classmethod
    def create(cls, bars: SharedTensor, index: Any, phase: Any, issuer: bool = False,
               span: Span | None = None) -> MbarrierWait:
        span = user_span(span)
        _barriers(bars, cls.NAME, span)
        return cls(bars, as_expr(index), as_expr(phase), bool(issuer), span)

    def reads(self):
        return (self.bars,)

    def exprs(self):
        return (self.index, self.phase)

    def script(self) -> str:
        from tilecraft.ir.printer import expr_str

        who = ", issuer=True" if self.issuer else ""
        return (f"mbarrier_wait({self.bars.name}, {expr_str(self.index)}, "
                f"{expr_str(self.phase)}{who})")


@dataclass(frozen=True)
class MbarrierArrive(Instruction):
    """`mbarrier_arrive(bars, index)`: every warp arrives once on bars[index]."""

    bars: SharedTensor
    index: Expr
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "mbarrier_arrive"

    @classmethod
    def create(cls, bars: SharedTensor, index: Any, span: Span | None = None) -> MbarrierArrive:
        span = user_span(span)
        _barriers(bars, cls.NAME, span)
        return cls(bars, as_expr(index), span)

    def reads(self):
        return (self.bars,)

    def exprs(self):
        return (self.index,)

    def script(self) -> str:
        from tilecraft.ir.printer import expr_str

        return f"mbarrier_arrive({self.bars.name}, {expr_str(self.index)})"


@dataclass(frozen=True)
class CopyAsyncBulk(Tiled):
    """`copy_async_bulk(dst, src, offset, barrier=bars, index=i)`: start copying the tile of
    global `src` at `offset` into the whole shared `dst`; it completes on bars[i] (elements
    outside `src` copy as 0)."""

    dst: SharedTensor
    src: GlobalTensor
    offset: tuple[Expr, ...]
    dims: tuple[int, ...]
    bars: SharedTensor
    index: Expr
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "copy_async_bulk"
    TILE: ClassVar[str] = "dst"
    WRITES: ClassVar[str] = "dst"
    WHOLE: ClassVar[str] = "src"

    @classmethod
    def create(cls, dst: SharedTensor, src: GlobalTensor, offset: Any, bars: SharedTensor,
               index: Any, dims: Any = None, span: Span | None = None) -> CopyAsyncBulk:
        span = user_span(span)
        _barriers(bars, cls.NAME, span)
        off, dims = normalize_offset(src, offset, dst.ndim, dims, cls.NAME, span)
        return cls(dst, src, off, dims, bars, as_expr(index), span)

    @property
    def nbytes(self) -> int:
        """Bytes the copy moves (what its barrier counts)."""
        n = 1
        for d in self.dst.shape:
            n *= int(d)
        return n * self.dst.dtype.bits // 8

    def reads(self):
        return (self.src, self.bars)

    def exprs(self):
        return (*self.offset, self.index)

    def script(self) -> str:
        from tilecraft.ir.printer import expr_str

        off = ", ".join(expr_str(o) for o in self.offset)
        return (f"copy_async_bulk({self.dst.name}, {self.src.name}, offset=[{off}], "
                f"barrier={self.bars.name}[{expr_str(self.index)}])")
