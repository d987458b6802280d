"""insert_barriers: the `synchronize` instructions a block program needs on the GPU (IR -> IR).

The block VM runs each instruction for the whole block before the next (block-synchronous), so
a program means "every thread's shared-memory writes are seen by the next instruction". On the
GPU that takes a barrier between a shared write and a later shared access by other threads
(read after write), and between a shared read and a later shared write (write after read). This
pass adds them, conservatively, by the tensors' scopes:

- in a sequence, before an instruction that reads a shared tensor written since the last
  barrier, or writes one written or read since then (tensors sharing bytes in the arena are
  one memory where their bytes meet: smem_plan.py's keys; an instruction staging through dead
  bytes of the arena reads them);
- at the end of a loop body whose accesses since its last barrier meet those of the body's
  start, before its first barrier (the next iteration's come after this iteration's);
- an `if` merges what its branches did; an existing `synchronize` resets the state;
- a `copy_async` must come after earlier reads of its destination (a write when issued), and
  its data lands at `copy_async_wait_group`, which writes the destinations of the copies
  issued before it (so what reads them waits for a barrier after the wait); a
  `copy_async_bulk` lands for each thread at its `mbarrier_wait` (no barrier needed after it);
  `mbarrier_init` writes the barriers the other mbarrier instructions read.

Global tensors count as well (a block's global writes are seen by its next instruction on the
VM too, as on the interpreter): a read of a global tensor the block wrote since the last
barrier, or a write of one it read or wrote, waits at a barrier (other threads may touch the
same elements). Scalar code counts with its loads and stores.

The slices of one tensor (`shared_slice`: the stages of a pipelined tile) are distinct tensors
here; passes/pipeline_copies.py, which makes them, orders the reuse of a stage itself.

    store_shared(t, s)            store_shared(t, s)
    x = load_shared(s, ...)  ->   synchronize()
                                  x = load_shared(s, ...)
"""

from __future__ import annotations

import dataclasses

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (
    Atomic,
    Break,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    For,
    If,
    SeqStmt,
    Stmt,
    While,
)
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .instructions import AllocateRegister, AllocateShared, Instruction, Synchronize
from .mbarrier import CopyAsyncBulk
from .program import BlockProgram
from .roles import WarpRoles
from .tensors import GlobalTensor, SharedTensor
from .threads import ThreadValues
from .transfer import CopyAsync, CopyAsyncWaitGroup, SharedSlice


@dataclasses.dataclass
class _State:
    """Shared tensors written / read since the last barrier ("*": any), and the destinations of
    copy_async issued and maybe not landed (a barrier does not land them; a wait does)."""

    wrote: set = dataclasses.field(default_factory=set)
    read: set = dataclasses.field(default_factory=set)
    pending: set = dataclasses.field(default_factory=set)

    def copy(self) -> _State:
        return _State(set(self.wrote), set(self.read), set(self.pending))

    def clear(self) -> None:
        self.wrote.clear()
        self.read.clear()

    def conflicts(self, reads: set, writes: set) -> bool:
        def meet(a: set, b: set) -> bool:
            if not (a and b):
                return False
            return "*" in a or "*" in b or any(
                _same(_key(x), _key(y)) and not (isinstance(x, _One) and isinstance(y, _One))
                for x in a for y in b)

        return meet(reads, self.wrote) or meet(writes, self.wrote | self.read)


@dataclasses.dataclass(frozen=True)
class _One:
    """An access by thread 0 alone (a block-level store, `if (tid == 0)`: its loads and its
    store): ordered with thread 0's other accesses without a barrier."""

    key: object


def _key(x):
    return x.key if isinstance(x, _One) else x


def _same(a, b) -> bool:
    """Keys of the same memory: equal, or bytes of the arena that overlap (smem_plan.Bytes)."""
    return a == b or (hasattr(a, "meets") and a.meets(b))


def _memory(tensors) -> set:
    return {t.buffer for t in tensors if isinstance(t, (SharedTensor, GlobalTensor))}


_MEMORY = ("shared", "global")


def insert_barriers(program: BlockProgram, aliases=None) -> BlockProgram:
    """`program` with the barriers the GPU needs to mean what the block VM computes;
    `aliases`: the arena's SharedPlan (block/smem_plan.py: the keys of the tensors sharing
    bytes, and of the dead bytes an instruction stages through, which it reads after the
    printer's barriers around its writes), or a dict shared tensor buffer -> key."""
    scratch = getattr(aliases, "scratch_key", lambda s: None)
    aliases = getattr(aliases, "groups", aliases) or {}
    landing = frozenset(aliases.get(s.dst.buffer, s.dst.buffer) for s in walk(program.body)
                        if isinstance(s, CopyAsync))
    threads = ThreadValues(program.body, program.thread_vars)
    body = _Barriers(landing, aliases, threads, scratch).seq(program.body, _State())
    return dataclasses.replace(program, body=body)


def _rings(x: WarpRoles) -> set:
    """The slices of the tensors both roles slice (the stages one role fills and the other
    reads, each reuse ordered by mbarriers: no barrier inside a role for them)."""
    def slices(body):
        return {s.src.buffer: s for s in walk(body) if isinstance(s, SharedSlice)}

    both = slices(x.producer).keys() & slices(x.consumer).keys()
    return {s.out.buffer for s in walk(x) if isinstance(s, SharedSlice) and s.src.buffer in both}


def is_cluster_sync(s: Stmt) -> bool:
    """`T.cluster_sync()`: a barrier for the cluster, so for the block too."""
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op == "cluster_sync"


def _barrier(span) -> Synchronize:
    return Synchronize.create(span=span)


class _Barriers:
    def __init__(self, landing: frozenset, aliases: dict, threads: ThreadValues, scratch):
        self.landing = landing  # the program's copy_async destinations
        self.aliases = aliases
        self.threads = threads  # per-thread values (block/threads.py)
        self.scratch = scratch  # instruction -> the key of the arena bytes it stages through
        self.skip: set = set()  # stage slices the mbarriers of warp roles order (`_rings`)

    def access(self, s: Stmt) -> tuple[set, set]:
        """(memory read, memory written) by a statement: shared tensors, and global tensors by
        their buffer (the VM orders a block's global accesses statement by statement too)."""
        if isinstance(s, CopyAsyncWaitGroup):
            return set(), set(self.landing)  # the copies land now
        if not isinstance(s, Instruction):  # scalar code: its loads and stores of memory
            reads = {x.buffer for e in stmt_exprs(s) for x in walk_expr(e)
                     if isinstance(x, BufferLoad) and x.buffer.scope in _MEMORY}
            dst = s.buffer if isinstance(s, BufferStore) else \
                s.dst.buffer if isinstance(s, Atomic) else None  # (an atomic updates dst)
            stored = dst is not None and dst.scope in _MEMORY
            reads, writes = self.keys(reads), self.keys({dst} if stored else set())
            if isinstance(s, Atomic) and s.prev is not None:  # (and thread 0 writes its old
                writes |= self.keys({s.prev.buffer})         # value for every thread to read)
            if stored and isinstance(s, BufferStore) and not self.threads.per_thread(s):
                return {_One(k) for k in reads}, {_One(k) for k in writes}  # thread 0's
            return reads, writes
        if isinstance(s, (AllocateShared, AllocateRegister, SharedSlice)):
            return set(), set()
        staged = self.scratch(s)
        loads = {x.buffer for e in stmt_exprs(s) for x in walk_expr(e)  # (offsets reading memory)
                 if isinstance(x, BufferLoad) and x.buffer.scope in _MEMORY}
        reads = self.keys(_memory(s.reads()) | loads) | ({staged} if staged is not None else set())
        return reads, self.keys(_memory(s.writes()))

    def keys(self, bufs: set) -> set:
        return {self.aliases.get(b, b) for b in bufs if b not in self.skip}

    def touches_memory(self, s: Stmt) -> bool:
        return any(a or b for a, b in (self.access(x) for x in walk(s)))

    def all_accesses(self, body: Stmt) -> tuple[set, set]:
        reads: set = set()
        writes: set = set()
        for y in walk(body):
            r, w = self.access(y)
            reads |= r
            writes |= w
        return reads, writes

    def head(self, body: Stmt) -> tuple[set, set]:
        """(reads, writes) of a loop body before its first top-level barrier."""
        reads: set = set()
        writes: set = set()
        for x in (body.stmts if isinstance(body, SeqStmt) else (body,)):
            if isinstance(x, Synchronize) or is_cluster_sync(x):
                break
            for y in walk(x):
                r, w = self.access(y)
                reads |= r
                writes |= w
        return reads, writes

    def seq(self, s: Stmt, st: _State) -> Stmt:
        stmts = s.stmts if isinstance(s, SeqStmt) else (s,)
        out: list[Stmt] = []
        for x in stmts:
            out.extend(self.stmt(x, st))
        return SeqStmt.create(out) if len(out) != 1 else out[0]

    def stmt(self, x: Stmt, st: _State) -> list[Stmt]:
        if isinstance(x, Synchronize) or is_cluster_sync(x):
            st.clear()
            return [x]
        if isinstance(x, WarpRoles):
            return self.roles(x, st)
        divergent = self.threads.header(x)
        pre = self.header(x, st) if isinstance(x, (For, If)) or divergent else []  # (while: loop)
        if divergent:
            return pre + self.divergent(x, st)
        if isinstance(x, (For, While)):
            return pre + self.loop(x, st)
        if isinstance(x, If):
            a, b = st.copy(), st.copy()
            then = self.seq(x.then_body, a)
            other = self.seq(x.else_body, b) if x.else_body is not None else None
            st.wrote, st.read = a.wrote | b.wrote, a.read | b.read
            st.pending = a.pending | b.pending
            return pre + [dataclasses.replace(x, then_body=then, else_body=other)]
        if isinstance(x, SeqStmt):
            return [self.seq(x, st)]
        if isinstance(x, CopyAsyncWaitGroup):  # the copies land (ordered when issued)
            st.wrote |= st.pending
            if x.n == 0:
                st.pending.clear()
            return [x]
        reads, writes = self.access(x)
        out = []
        if st.conflicts(reads, writes):
            out.append(_barrier(x.span))
            st.clear()
        if isinstance(x, CopyAsync):
            st.pending |= self.keys({x.dst.buffer})  # written when it lands
        elif isinstance(x, CopyAsyncBulk):
            st.read |= reads  # (its barrier) lands for the threads that wait on the barrier
        else:
            st.read |= reads
            st.wrote |= writes
        return out + [x]

    def roles(self, x: WarpRoles, st: _State) -> list[Stmt]:
        """A barrier of all threads before the split when it meets what came before; inside,
        each role orders its own accesses (its synchronize is the role's named barrier). The
        roles' shared tiles (the stages, the barriers) are ordered by the mbarriers."""
        reads, writes = self.all_accesses(x)
        out = []
        if st.conflicts(reads, writes):
            out.append(_barrier(x.span))
            st.clear()
        skip, self.skip = self.skip, self.skip | _rings(x)
        producer = self.seq(x.producer, _State())
        consumer = self.seq(x.consumer, _State(pending=set(st.pending)))
        self.skip = skip
        st.read |= reads
        st.wrote |= writes
        return out + [dataclasses.replace(x, then_body=producer, else_body=consumer)]

    def header(self, x: For | While | If, st: _State) -> list[Stmt]:
        """A condition's or loop bound's loads (every thread reads them first): a barrier before
        them when they read what was written since the last one."""
        reads, _ = self.access(x)
        out = []
        if st.conflicts(reads, set()):
            out.append(_barrier(x.span))
            st.clear()
        st.read |= reads
        return out

    def divergent(self, x: For | While | If, st: _State) -> list[Stmt]:
        """Control flow on a per-thread value gets no barrier inside (the threads that skip it
        would wait for the others forever): one before it orders what came before with all it
        does, and what it does waits for the next barrier after it (the CUDA emitter's rule)."""
        sync = next((y for y in walk(x) if is_cluster_sync(y)), None)
        if sync is not None:
            raise TilecraftError("TC502", sync.span, detail="T.cluster_sync under a condition "
                                 "or loop that differs between the block's threads",
                                 hint="every thread of the cluster meets it: call it where "
                                 "all do")
        reads, writes = self.all_accesses(x)
        out = []
        if st.conflicts(reads, writes):
            out.append(_barrier(x.span))
            st.clear()
        st.read |= reads
        st.wrote |= writes
        return out + [x]

    def loop(self, x: For | While, st: _State) -> list[Stmt]:
        # a while condition is read before every iteration (and after the last)
        cond = self.access(x)[0] if isinstance(x, While) else set()
        if not self.touches_memory(x.body):
            return self.header(x, st) + [x]
        pre = []
        reads, writes = self.all_accesses(x.body)
        if st.conflicts(reads | cond, writes):
            pre = [_barrier(x.span)]  # the first iteration's accesses after what came before
            st.clear()
        st.read |= cond
        end = _State(read=set(cond), pending=set(self.landing))  # (copies of earlier iterations)
        body = self.seq(x.body, end)
        st.pending |= end.pending
        if any(isinstance(y, Break) for y in walk(body)):
            st.wrote.add("*")  # it may leave anywhere in the body
            st.read.add("*")
        reads, writes = self.head(body)
        if end.conflicts(reads | cond, writes):  # the next iteration's accesses come after
            # (after the loop: the state before it, which it may run zero times, or none)
            return pre + [dataclasses.replace(x, body=SeqStmt.create([body, _barrier(x.span)]))]
        st.read |= end.read  # (or run zero times: the state before)
        st.wrote |= end.wrote
        return pre + [dataclasses.replace(x, body=body)]
