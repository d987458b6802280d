"""insert_barriers: the `synchronize` instructions a block program needs on the GPU (IR -> IR).

The block VM runs each instruction for the whole block before the next (block-synchronous), so
a program means "every thread's shared-memory writes are seen by the next instruction". On the
GPU that takes a barrier between a shared write and a later shared access by other threads
(read after write), and between a shared read and a later shared write (write after read). This
pass adds them, conservatively, by the tensors' scopes:

- in a sequence, before an instruction that reads a shared tensor written since the last
  barrier, or writes one written or read since then (tensors do not overlap: the printer gives
  each its own bytes);
- at the end of a loop body that touches shared memory (the next iteration's accesses come
  after this iteration's), and the loop leaves the state "accessed";
- an `if` merges what its branches did; `copy_async_wait_group` counts as a write of every
  shared tensor (the copies land then); an existing `synchronize` resets the state.

    store_shared(t, s)            store_shared(t, s)
    x = load_shared(s, ...)  ->   synchronize()
                                  x = load_shared(s, ...)
"""

from __future__ import annotations

import dataclasses

from tilecraft.ir import For, If, SeqStmt, Stmt, While
from tilecraft.ir.visitor import walk

from .instructions import AllocateRegister, AllocateShared, Instruction, Synchronize
from .program import BlockProgram
from .tensors import SharedTensor
from .transfer import CopyAsyncWaitGroup


@dataclasses.dataclass
class _State:
    """Shared tensors written / read since the last barrier ("*": any, after a wait)."""

    wrote: set = dataclasses.field(default_factory=set)
    read: set = dataclasses.field(default_factory=set)

    def copy(self) -> _State:
        return _State(set(self.wrote), set(self.read))

    def clear(self) -> None:
        self.wrote.clear()
        self.read.clear()

    def conflicts(self, reads: set, writes: set) -> bool:
        def meet(a: set, b: set) -> bool:
            return bool(a and b and ("*" in a or "*" in b or a & b))

        return meet(reads, self.wrote) or meet(writes, self.wrote | self.read)


def insert_barriers(program: BlockProgram) -> BlockProgram:
    """`program` with the barriers the GPU needs to mean what the block VM computes."""
    body = _seq(program.body, _State())
    return dataclasses.replace(program, body=body)


def _access(s: Stmt) -> tuple[set, set]:
    """(shared tensors read, shared tensors written) by an instruction."""
    if isinstance(s, CopyAsyncWaitGroup):
        return set(), {"*"}  # the copies land now
    if not isinstance(s, Instruction) or isinstance(s, (AllocateShared, AllocateRegister)):
        return set(), set()
    reads = {t for t in s.reads() if isinstance(t, SharedTensor)}
    writes = {t for t in s.writes() if isinstance(t, SharedTensor)}
    return reads, writes


def _touches_shared(s: Stmt) -> bool:
    return any(a or b for a, b in (_access(x) for x in walk(s)))


def _seq(s: Stmt, st: _State) -> Stmt:
    stmts = s.stmts if isinstance(s, SeqStmt) else (s,)
    out: list[Stmt] = []
    for x in stmts:
        out.extend(_stmt(x, st))
    return SeqStmt.create(out) if len(out) != 1 else out[0]


def _barrier(span) -> Synchronize:
    return Synchronize.create(span=span)


def _stmt(x: Stmt, st: _State) -> list[Stmt]:
    if isinstance(x, Synchronize):
        st.clear()
        return [x]
    if isinstance(x, (For, While)):
        pre = []
        if _touches_shared(x.body) and (st.wrote or st.read):
            pre = [_barrier(x.span)]  # the first iteration's accesses after what came before
            st.clear()
        body = _seq(x.body, _State())
        if _touches_shared(x.body):
            body = SeqStmt.create([body, _barrier(x.span)])  # the next iteration's come after
            st.clear()
        return pre + [dataclasses.replace(x, body=body)]
    if isinstance(x, If):
        a, b = st.copy(), st.copy()
        then = _seq(x.then_body, a)
        other = _seq(x.else_body, b) if x.else_body is not None else None
        st.wrote, st.read = a.wrote | b.wrote, a.read | b.read
        return [dataclasses.replace(x, then_body=then, else_body=other)]
    if isinstance(x, SeqStmt):
        return [_seq(x, st)]
    reads, writes = _access(x)
    out = []
    if st.conflicts(reads, writes):
        out.append(_barrier(x.span))
        st.clear()
    st.read |= reads
    st.wrote |= writes
    return out + [x]
