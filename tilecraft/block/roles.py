"""Warp specialization: a producer and a consumer role in one block (docs/warp_specialization.md).

    warp_roles(producer_threads=128, producer_regs=40, consumer_regs=232):
        producer:                                  # threads num_threads .. num_threads + 127
            for ko in range(n):
                if ko >= S: mbarrier_wait(empty, ko % S, (ko // S - 1) % 2, issuer=True)
                mbarrier_expect(full, ko % S, nbytes); copy_async_bulk(..., barrier=full[ko % S])
        consumer:                                  # threads 0 .. num_threads - 1
            for ko in range(n):
                mbarrier_wait(full, ko % S, ko // S % 2)
                dot_shared(...); dot_wait_group(1); mbarrier_arrive(empty, (ko - 1) % S)
            <the rest of the kernel>

`WarpRoles` is an `If` (so every pass that walks control flow sees both bodies) whose condition
is the role. The consumer is the program's `num_threads` threads, numbered as before, so its
register layouts and instruction plans are the ones the block had; the producer is
`producer_threads` more threads after them, numbered from 0 within the role (its thread 0 issues
the bulk copies). The block launches `num_threads + producer_threads` threads
(`launch_threads`). A `synchronize` inside a role waits for that role's threads only (a named
barrier); before the split, for all of them. The producer may not touch register tensors.

On the GPU the producer gives registers back (`setmaxnreg.dec producer_regs`) and the consumer
takes them (`setmaxnreg.inc consumer_regs`). On the block VM the two roles run as coroutines
(vm_roles.py): each runs until an `mbarrier_wait` whose phase is not complete, then the other;
a wait neither role can complete is TC603 at its line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilecraft.diagnostics import Span
from tilecraft.ir import If, SeqStmt, Stmt, Var
from tilecraft.ir.visitor import walk

#: the condition of every WarpRoles: true in the producer role
PRODUCER = Var.create("producer_role", "bool")

#: registers of an SM (setmaxnreg takes multiples of 8 in 24 .. 256 per thread)
REGISTER_FILE = 65536

#: what a producer that only issues copies keeps (CUTLASS's producers keep 40)
PRODUCER_REGS = 40


@dataclass(frozen=True)
class WarpRoles(If):
    """`if producer_role: then_body else: else_body` with the roles' thread and register
    counts (module docstring). Build with `create`."""

    producer_threads: int = 128
    producer_regs: int = 40
    consumer_regs: int = 232
    span: Span | None = field(default=None, compare=False)

    @classmethod
    def create(cls, producer: Stmt | list, consumer: Stmt | list, consumer_threads: int,
               producer_threads: int = 128, producer_regs: int | None = None,
               span: Span | None = None) -> WarpRoles:
        """The split with the most registers the consumer can take once the producer keeps
        `producer_regs` (PRODUCER_REGS): (REGISTER_FILE - producer) / consumers, a multiple of
        8, <= 240 (as CUTLASS takes: 256 is the instruction's bound, 255 the hardware's)."""
        if isinstance(producer, list):
            producer = SeqStmt.create(producer)
        if isinstance(consumer, list):
            consumer = SeqStmt.create(consumer)
        low = PRODUCER_REGS if producer_regs is None else producer_regs
        high = min(240, (REGISTER_FILE - producer_threads * low) // consumer_threads // 8 * 8)
        return cls(PRODUCER, producer, consumer, producer_threads=producer_threads,
                   producer_regs=low, consumer_regs=high, span=span)

    @property
    def producer(self) -> Stmt:
        return self.then_body

    @property
    def consumer(self) -> Stmt:
        return self.else_body

    def script_head(self) -> str:
        return (f"warp_roles(producer_threads={self.producer_threads}, "
                f"producer_regs={self.producer_regs}, consumer_regs={self.consumer_regs})")


def launch_threads(program) -> int:
    """The threads a block of `program` launches: its own and every producer role's."""
    extra = max((s.producer_threads for s in walk(program.body) if isinstance(s, WarpRoles)),
                default=0)
    return program.num_threads + extra


__all__ = ["PRODUCER", "WarpRoles", "launch_threads"]
