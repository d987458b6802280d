"""`dot_shared`: a dot whose operands are read from shared memory (Hopper's wgmma), and
`dot_wait_group`, the wait for asynchronous ones.

    out = dot_shared(a, b, c)                          # a: shared [M, K] (or registers), b: shared
    dot_shared(a, b, acc, asynchronous=True)           # [K, N]; c, out: registers [M, N], f32
    dot_wait_group(0)                                  # the asynchronous ones are done

`out = op(a) @ op(b) + c` as `dot` computes it (the Tile IR's gemm), where op transposes the
stored tile when `trans_a` (a is stored [K, M]) or `trans_b` (b is stored [N, K]). a may be a
register tensor (not transposed). Operands are f16 or bf16, c and out float32.

A synchronous dot_shared (the default) is complete when it returns. An asynchronous one commits
a group: `out` is defined only once a `dot_wait_group(n)` leaves at most n groups pending that
include it. Until then reading or writing out or c, or writing a or b, is TC611 on the VM; an
asynchronous dot_shared may accumulate into the out of pending ones (c is out: the hardware
orders wgmma on one accumulator). Instruction selection (block/select_wgmma.py) puts it on
wgmma; the VM semantics are in vm_dot_shared.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tilecraft.diagnostics import Span, TilecraftError

from .instructions import Instruction
from .tensors import RegisterTensor, SharedTensor, user_span

_IN = ("float16", "bfloat16")


@dataclass(frozen=True)
class DotShared(Instruction):
    """`out = dot_shared(a, b, c)`: op(a)[M, K] @ op(b)[K, N] + c[M, N] with a, b in shared
    memory (a may be in registers); op transposes a stored [K, M] a (`trans_a`) or [N, K] b
    (`trans_b`). `asynchronous`: completed by a later `dot_wait_group`."""

    a: SharedTensor | RegisterTensor
    b: SharedTensor
    c: RegisterTensor
    out: RegisterTensor
    trans_a: bool = False
    trans_b: bool = False
    asynchronous: bool = False
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "dot_shared"

    @classmethod
    def create(cls, a: SharedTensor | RegisterTensor, b: SharedTensor, c: RegisterTensor,
               out: RegisterTensor | None = None, trans_a: bool = False, trans_b: bool = False,
               asynchronous: bool = False, span: Span | None = None) -> DotShared:
        return cls(a, b, c, c if out is None else out, bool(trans_a), bool(trans_b),
                   bool(asynchronous), user_span(span))

    def reads(self):
        return (self.a, self.b, self.c)

    def writes(self):
        return (self.out,)

    @property
    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of the product."""
        k = self.a.shape[0] if self.trans_a else self.a.shape[1]
        return int(self.c.shape[0]), int(self.c.shape[1]), int(k)

    def script(self) -> str:
        flags = "".join(f", {f}=True" for f in ("trans_a", "trans_b", "asynchronous")
                        if getattr(self, f))
        return (f"dot_shared({self.a.name}, {self.b.name}, {self.c.name}, "
                f"out={self.out.name}{flags})")


@dataclass(frozen=True)
class DotWaitGroup(Instruction):
    """`dot_wait_group(n)`: wait until at most `n` asynchronous dot_shared groups are pending
    (the oldest complete first)."""

    n: int
    span: Span | None = field(default=None, compare=False)
    NAME: ClassVar[str] = "dot_wait_group"

    @classmethod
    def create(cls, n: int = 0, span: Span | None = None) -> DotWaitGroup:
        span = user_span(span)
        if not isinstance(n, int) or n < 0:
            raise TilecraftError("TC603", span, instr=cls.NAME,
                                 detail=f"n must be a non-negative integer, got {n!r}")
        return cls(n, span)

    def script(self) -> str:
        return f"dot_wait_group({self.n})"


def check_dot_shared(s: DotShared) -> None:
    """The verifier's rule (TC603): rank-2 tiles whose shapes agree, a and b in shared memory (a
    may be an untransposed register tensor), f16/bf16 operands of one dtype, float32 c and out
    of one layout."""
    def bad(detail: str) -> TilecraftError:
        return TilecraftError("TC603", s.span, instr=s.NAME, detail=detail)

    a, b, c, out = s.a, s.b, s.c, s.out
    if not isinstance(b, SharedTensor) or not isinstance(a, (SharedTensor, RegisterTensor)):
        raise bad("b must be a shared tensor, a a shared or register tensor")
    if isinstance(a, RegisterTensor) and s.trans_a:
        raise bad("a register operand a cannot be transposed (trans_a)")
    if any(t.ndim != 2 for t in (a, b, c, out)):
        raise bad("a, b, c and out must be rank-2 tiles")
    (m, k) = (a.shape[1], a.shape[0]) if s.trans_a else tuple(a.shape)
    (k2, n) = (b.shape[1], b.shape[0]) if s.trans_b else tuple(b.shape)
    if k != k2 or tuple(c.shape) != (m, n) or tuple(out.shape) != (m, n):
        raise bad(f"a{list(a.shape)}{'^T' if s.trans_a else ''} @ b{list(b.shape)}"
                  f"{'^T' if s.trans_b else ''} + c{list(c.shape)} -> out{list(out.shape)}: "
                  "need op(a) [M, K], op(b) [K, N], c and out [M, N]")
    if a.dtype.name not in _IN or b.dtype != a.dtype:
        raise bad(f"a is {a.dtype} and b {b.dtype}: both float16 or both bfloat16")
    if c.dtype.name != "float32" or out.dtype.name != "float32":
        raise bad(f"c is {c.dtype} and out {out.dtype}: both float32")
    if c.layout != out.layout:
        raise bad(f"`{c.name}` has layout {c.layout!r} but `{out.name}` has {out.layout!r}")


__all__ = ["DotShared", "DotWaitGroup", "check_dot_shared"]
