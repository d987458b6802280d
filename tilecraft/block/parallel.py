"""Block instructions that lowering adds for TileLang ops Tilus has no node for: the element-wise
`T.Parallel` loop with its layout, prefix sums and tile atomics on register tensors.

    for i, j in parallel(128, 64, layout=local(8, 1).spatial(16, 8).local(1, 8)):
        acc[i, j] = exp2(acc[i, j] - m[i])

`ParallelCompute` runs its scalar Tile IR body once per (thread t, local element e) of `layout`,
with the loop variables bound to the logical index `layout.map(t, e)`. A register tensor read or
written in the body at index idx must be held by that same thread (its layout maps idx to t;
any replica will do): otherwise the VM raises TC610 at the statement. That is the promise the
CUDA printer relies on when it turns a fragment access into a register of the thread.

A scalar `T.atomic_<kind>(dst[idx], value)` in the body (dst global or shared) acts once per
logical element of the layout, whatever its replication: the interpreter's meaning (one update
per element of the T.Parallel loop). The instruction's reads and writes (what barriers order)
include the global tensors the body touches and the atomics' destinations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tilecraft.diagnostics import Span, TilecraftError
from tilecraft.ir import Atomic, BufferLoad, BufferStore, Stmt, Var
from tilecraft.ir.tileops import ATOMIC_KINDS
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr
from tilecraft.layout import Fragment

from .instructions import Instruction
from .tensors import BlockTensor, GlobalTensor, RegisterTensor, user_span
from .transfer import Tiled, normalize_offset


@dataclass(frozen=True)
class ParallelCompute(Instruction):
    """`for vars in parallel(*extents, layout=layout): body`: the body (scalar Tile IR) once per
    element of `layout`, on the thread that holds it. `tensors` are the register and shared
    tensors the body indexes (the Tile IR buffers it names, with their layouts)."""

    vars: tuple[Var, ...]
    layout: Fragment
    body: Stmt
    tensors: tuple[BlockTensor, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "parallel"

    @classmethod
    def create(cls, vars: Any, layout: Fragment, body: Stmt, tensors: Any = (),
               span: Span | None = None) -> ParallelCompute:
        span = user_span(span)
        vars = tuple(vars)
        if len(vars) != layout.ndim:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"{len(vars)} loop variable(s) for the rank-"
                                 f"{layout.ndim} layout {layout!r}")
        return cls(vars, layout, body, tuple(tensors), span)

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(self.layout.shape)

    def _accessed(self, stores: bool) -> tuple[BlockTensor, ...]:
        """The register and shared tensors of `tensors` and the global tensors (by buffer) that
        the body writes (stores, scalar atomics) or reads (loads; an atomic reads what it
        updates)."""
        bufs: list = []
        for s in walk(self.body):
            atomic = [s.dst.buffer] if isinstance(s, Atomic) else []
            if stores:
                found = [s.buffer] if isinstance(s, BufferStore) else atomic
            else:
                found = [x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                         if isinstance(x, BufferLoad)] + atomic
            bufs += [b for b in found if b not in bufs]
        mine = self.tensor_of()
        return tuple(mine[b] if b in mine else GlobalTensor.of(b) for b in bufs
                     if b in mine or b.scope == "global")

    def reads(self) -> tuple[BlockTensor, ...]:
        return self._accessed(stores=False)

    def writes(self) -> tuple[BlockTensor, ...]:
        return self._accessed(stores=True)

    def tensor_of(self) -> dict:
        """Tile IR buffer -> the block tensor wrapping it."""
        return {t.buffer: t for t in self.tensors}

    def script(self) -> str:
        names = ", ".join(v.name for v in self.vars)
        ext = ", ".join(map(str, self.extents))
        return f"for {names} in parallel({ext}, layout={self.layout!r}):"


@dataclass(frozen=True)
class CumSumRegister(Instruction):
    """`cumsum(src, out, dim, reverse)`: inclusive prefix sums along `dim` (from the end with
    `reverse`), as T.cumsum computes them (interp/ops/reduce.py); out has src's shape."""

    src: RegisterTensor
    out: RegisterTensor
    dim: int
    reverse: bool = False
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "cumsum"

    @classmethod
    def create(cls, src: RegisterTensor, out: RegisterTensor, dim: int, reverse: bool = False,
               span: Span | None = None) -> CumSumRegister:
        span = user_span(span)
        if tuple(src.shape) != tuple(out.shape) or not 0 <= int(dim) < src.ndim:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"cumsum of `{src.name}`{list(src.shape)} over dim {dim} "
                                 f"into `{out.name}`{list(out.shape)}: equal shapes, a valid dim")
        return cls(src, out, int(dim), bool(reverse), span)

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.out,)

    def script(self) -> str:
        rev = ", reverse=True" if self.reverse else ""
        return f"cumsum({self.src.name}, out={self.out.name}, dim={self.dim}{rev})"


@dataclass(frozen=True)
class AtomicGlobal(Tiled):
    """`atomic_<kind>_global(src, dst, offset)`: dst[tile] = dst[tile] <kind> src element by
    element, atomically (T.atomic_add/max/min of a tile; src has dst's dtype: convert with a
    cast first, as the GPU does); elements outside dst are dropped."""

    kind: str
    src: RegisterTensor
    dst: GlobalTensor
    offset: tuple
    dims: tuple[int, ...]
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "atomic_global"
    TILE: ClassVar[str] = "src"
    WHOLE: ClassVar[str] = "dst"

    @classmethod
    def create(cls, kind: str, src: RegisterTensor, dst: GlobalTensor, offset: Any = None,
               dims: Any = None, span: Span | None = None) -> AtomicGlobal:
        span = user_span(span)
        if kind not in ATOMIC_KINDS:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"unknown kind {kind!r}; one of {list(ATOMIC_KINDS)}")
        off, dims = normalize_offset(dst, offset, src.ndim, dims, cls.NAME, span)
        return cls(kind, src, dst, off, dims, span)

    def reads(self):
        return (self.src, self.dst)

    def writes(self):
        return (self.dst,)

    def script(self) -> str:
        from tilecraft.ir.printer import expr_str

        off = ", ".join(expr_str(o) for o in self.offset)
        return (f"atomic_{self.kind}_global({self.src.name}, {self.dst.name}, offset=[{off}], "
                f"dims={list(self.dims)})")


__all__ = ["ATOMIC_KINDS", "AtomicGlobal", "CumSumRegister", "ParallelCompute"]
