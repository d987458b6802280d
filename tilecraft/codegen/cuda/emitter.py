"""KernelEmitter: walks the kernel's statements and writes CUDA C++.

Scalar statements are printed here; every tile op and Parallel loop goes to the emitter
registered for its class (EMITTERS, one file per op family). Barriers: a `__syncthreads()`
follows every statement that writes shared memory, and precedes one that writes shared memory
after shared memory was read since the last barrier; serial loop bodies that touch shared
memory end with one (write-after-read across iterations). A block-level scalar store runs once
per block (thread 0) unless it depends on the thread; its global accesses are ordered with the
other threads' by block_order.py. No barrier is added inside control flow on the thread index:
one is placed before it instead.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import (Allocate, Atomic, Break, Buffer, BufferLoad, BufferRegion, BufferStore,
                          Evaluate, For, If, LetStmt, ParallelLoop, SeqStmt, TileOp, Var, While)
from tilecraft.ir.indices import needs_64bit_index, wide_let_vars
from tilecraft.ir.ranges import bound
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from .block_order import MEMORY, GlobalOrder, ThreadDependence, accesses, once_per_block
from .cexpr import ExprPrinter, ctype, zero
from .indexing import swizzled_offset


class KernelEmitter:
    def __init__(self, state):
        self.state = state
        self.lines: list[str] = []
        self.indent = 1
        self._names: dict[Var, str] = {}
        self._buf_names: dict[Buffer, str] = {}
        self._used: set[str] = set()  # user names given out (all end with "_")
        self.frag_local: dict[Buffer, str] = {}  # inside a Parallel loop: fragment -> local index
        self.shared_ptr: dict[Buffer, str] = {}  # shared buffer -> C pointer expression
        self.vector_bytes: dict[Buffer, int] = {}  # global buffer -> its widest vector access
        self.ranges: dict[Var, tuple[int, int]] = {}  # proven value ranges (bounds-guard removal)
        self.read_since_sync = False  # shared memory read since the last barrier
        self.write_pending = False  # a scalar store to shared memory since the last barrier
        self.uniq = 0
        self.helpers: dict[str, str] = {}  # device functions written before the kernel
        self.uses_wgmma = bool(state.gemm_wgmma)
        self.in_parallel = False  # inside a T.Parallel element loop
        # there, with a replicated layout: C condition of the one thread per replica group that
        # writes memory (stores, atomics) for its elements; None: every thread writes its own
        self.owner: str | None = None
        self.thread_branch = 0  # depth of control flow whose condition depends on the thread
        self.threads = ThreadDependence(state.kernel)  # values that differ between threads
        self.thread_values = self.threads.vars
        self.order = GlobalOrder()  # global accesses since the last barrier (block_order.py)
        # global tensors thread 0 alone writes: printed without __restrict__ (build.py), or the
        # compiler keeps other threads' earlier loads of them in registers across barriers
        self.written_by_one: set[Buffer] = set()
        self.synced_at = -1  # len(self.lines) after the last barrier
        # inside a T.Parallel element loop: shared buffers each element touches only at its
        # own address, held in a register for the element (emit_parallel.element_private)
        self.elem_local: dict[Buffer, str] = {}
        self.p = ExprPrinter(self.name, self.load, self.ranges)
        self.wide_lets = wide_let_vars(state.kernel.body) if state.kernel is not None else set()

    # ---- output -------------------------------------------------------------------------
    def w(self, line: str = "") -> None:
        self.lines.append("  " * self.indent + line if line else "")

    def open(self, head: str) -> None:
        self.w(head + " {")
        self.indent += 1

    def close(self, tail: str = "}") -> None:
        self.indent -= 1
        self.w(tail)

    def fresh(self, base: str) -> str:
        self.uniq += 1
        return f"{base}_{self.uniq}"

    def comment(self, node, what: str) -> None:
        span = getattr(node, "span", None)
        line = getattr(span, "line", None) if span is not None else None
        self.w(f"// {what}" + (f"  (line {line})" if line else ""))

    def sync(self) -> None:
        if self.uses_wgmma:  # wgmma reads shared memory through the async proxy
            self.w("tc::fence_proxy_async_shared();")
        self.w("__syncthreads();")
        self.read_since_sync = False
        self.write_pending = False
        self.order.clear()
        self.synced_at = len(self.lines)

    def sync_here(self, s) -> None:
        """A barrier the shared-memory rules ask for before or after statement `s`. Never
        inside control flow on the thread index (a per-element `if`, a loop whose trip count
        differs between threads, one replica group's guard): threads that skip it deadlock
        the others there. Inside T.Parallel the program is refused rather than racing (shared
        buffers an element touches only at its own address need no barrier: elem_local)."""
        if not self.thread_branch:
            self.sync()
            return
        if self.in_parallel:
            raise TilecraftError(
                "TC502", span=getattr(s, "span", None),
                detail="a T.Parallel body that writes shared memory another thread reads, under "
                "control flow that differs between threads (a per-element `if` or loop, or a "
                "replicated layout): the barrier it needs would deadlock",
                hint="write shared memory only at [the loop's own variables], or keep that store "
                "and the reads of it out of the per-element `if`/loop (T.if_then_else)")
        self.read_since_sync = False  # one thread orders its own accesses
        self.write_pending = False

    # ---- names and memory -----------------------------------------------------------------
    def name(self, v: Var) -> str:
        """The C name of a variable: user names are printed with a trailing underscore, a form
        no name the emitters declare has (`red`, `tid`, `acc` stay the compiler's)."""
        n = self._names.get(v)
        if n is None:
            n = self._names[v] = self._user_name(v.name)
        return n

    def _user_name(self, name: str) -> str:
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name).rstrip("_") or "v"
        n, k = f"{base}_", 1
        while n in self._used:
            n, k = f"{base}_{k}_", k + 1
        self._used.add(n)
        return n

    def bind(self, v: Var, cname: str) -> None:
        self._names[v] = cname
        self._used.add(cname)

    def flat_index(self, buf: Buffer, idx: list[str]) -> str:
        if buf.scope == "shared" and buf in self.state.swizzled:
            return swizzled_offset(buf.shape[0], buf.shape[1], idx[0], idx[1])
        out = None
        for i, n in zip(idx, buf.shape):
            if out is None:  # a 64-bit first term makes every product and sum 64-bit
                out = f"(long long)({i})" if needs_64bit_index(buf) and len(idx) > 1 else i
            else:
                out = f"({out}) * {self.dim(n)} + {i}"
        return out or "0"

    def index_exprs(self, buf: Buffer, exprs) -> list[str]:
        """The C expressions of IR indices into `buf`: in 64-bit arithmetic for a tensor that
        may hold 2^31 elements or more (tilecraft/ir/indices.py)."""
        before, self.p.wide = self.p.wide, self.p.wide or needs_64bit_index(buf)
        try:
            return [self.p(i) for i in exprs]
        finally:
            self.p.wide = before

    def dim(self, n) -> str:
        return str(n) if isinstance(n, int) else f"({self.p(n)})"

    def ref(self, buf: Buffer, idx) -> str:
        """An lvalue for element `idx` (list of C expressions) of a memory buffer."""
        if buf in self.elem_local:  # the T.Parallel element's own address, in a register
            return self.elem_local[buf]
        if buf.scope == "var":
            return self.name_buf(buf)
        if buf.scope == "fragment":
            if buf not in self.frag_local:
                raise TilecraftError("TC502", span=buf.span, detail=f"fragment `{buf.name}` "
                                     "indexed outside T.Parallel", hint="use T.Parallel")
            return f"{self.name_buf(buf)}[{self.frag_local[buf]}]"
        base = self.shared_ptr[buf] if buf.scope == "shared" else self.name_buf(buf)
        return f"{base}[{self.flat_index(buf, idx)}]"

    def name_buf(self, buf: Buffer) -> str:
        """The C name of a buffer (a user name, mangled like `name`)."""
        n = self._buf_names.get(buf)
        if n is None:
            n = self._buf_names[buf] = self._user_name(buf.name)
        return n

    def load(self, e: BufferLoad) -> str:
        if e.buffer.scope == "shared" and e.buffer not in self.elem_local:
            self.read_since_sync = True
        return self.ref(e.buffer, self.index_exprs(e.buffer, e.indices))

    # ---- statements -----------------------------------------------------------------------
    def stmt(self, s) -> None:
        # control flow on the thread index: what it holds runs per thread (scalar atomics too)
        per = isinstance(s, (If, While, For)) and self.per_thread(stmt_exprs(s))
        block = not self.in_parallel and not isinstance(s, SeqStmt)
        if block:
            acc = accesses(self, s, bool(self.thread_branch))
            if not self.thread_branch and (self.order.conflicts(acc) or per and (
                    self.write_pending and _touches_shared(s)
                    or self.read_since_sync and _stores_shared(s))):
                self.sync()  # before thread 0 or the others touch what the other side did,
                # and never inside control flow on the thread index
        self.thread_branch += per
        try:
            self._stmt(s)
        finally:
            self.thread_branch -= per
        if block and not isinstance(s, (If, While, For)) and self.synced_at != len(self.lines):
            self.order.add(acc)  # (a statement that ends with a barrier has ordered them)

    def per_thread(self, exprs) -> bool:
        """Code with `exprs` runs per thread: they read the thread index (directly, through
        lets, or through `var`/`local` buffers given per-thread values), or an enclosing
        condition or loop does."""
        return bool(self.thread_branch) or self.threads.of(exprs)

    def _stmt(self, s) -> None:
        from .emitters import EMITTERS

        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
            return
        if self.write_pending and not isinstance(s, Allocate) and (
                _reads_shared(s) or _writes_shared(s)):
            self.sync_here(s)  # a scalar store to shared memory must land before anyone reads it
            # (or overwrites it: the tile write that follows must win)
        fn = EMITTERS.get(type(s))
        if self.in_parallel and isinstance(s, TileOp) and not _element_wise(s):
            raise TilecraftError("TC108", span=s.span, detail=f"T.{s.op_name} inside T.Parallel "
                                 "or a per-element `if`", hint="tile operations run on whole "
                                 "tiles; move it out of the element-wise loop")
        if fn is not None:
            writes_shared = _writes_shared(s)
            if writes_shared and self.read_since_sync:
                self.sync_here(s)
            fn(self, s)
            if _reads_shared(s):
                self.read_since_sync = True
            if writes_shared:
                self.sync_here(s)
            return
        if isinstance(s, Allocate):
            self.allocate(s.buffer)
        elif isinstance(s, LetStmt):
            self.set_range(s.var, s.value)
            if s.var in self.wide_lets:  # feeds a 64-bit index: computed in 64 bits
                before, self.p.wide = self.p.wide, True
                self.w(f"const long long {self.name(s.var)} = {self.p(s.value)};")
                self.p.wide = before
            else:
                self.w(f"const {ctype(s.value.dtype)} {self.name(s.var)} = {self.p(s.value)};")
        elif isinstance(s, BufferStore):
            ws = s.buffer.scope == "shared" and s.buffer not in self.elem_local
            if ws and self.read_since_sync:
                self.sync_here(s)
            if self.owner and s.buffer.scope in MEMORY and s.buffer not in self.elem_local:
                guard = f"if ({self.owner}) "  # one replica of a T.Parallel element
            else:  # once per block, as on the interpreter, unless it depends on the thread
                guard = "if (tid == 0) " if once_per_block(self, s) else ""
            if guard and s.buffer.scope == "global":
                self.written_by_one.add(s.buffer)
            self.w(f"{guard}{self.ref(s.buffer, self.index_exprs(s.buffer, s.indices))} = "
                   f"{self._store_value(s.buffer, s.value)};")
            self.write_pending = self.write_pending or ws
        elif isinstance(s, If):
            self._header_reads(s)
            before, before_w, before_o = self.read_since_sync, self.write_pending, self.order
            self.order = before_o.copy()
            self.open(f"if ({self.p(s.cond)})")
            self.stmt(s.then_body)
            after, after_w, after_o = self.read_since_sync, self.write_pending, self.order
            self.read_since_sync, self.write_pending, self.order = before, before_w, before_o
            if s.else_body is not None:
                self.close("} else {")
                self.indent += 1
                self.stmt(s.else_body)
            self.close()
            self.read_since_sync = self.read_since_sync or after  # either branch may have run
            self.write_pending = self.write_pending or after_w
            self.order.merge(after_o)
        elif isinstance(s, For):
            self.serial_for(s)
        elif isinstance(s, While):
            self._header_reads(s)
            before, before_o = self.read_since_sync, self.order.copy()
            self.open(f"while ({self.p(s.cond)})")
            self.stmt(s.body)
            if _touches_shared(s.body) and not self.thread_branch:
                self.sync()  # the next iteration may overwrite what this one read
            self._loop_end(s, before_o)
            self.close()
            self.read_since_sync = before or _reads_shared(s.body)
            self.write_pending = self.write_pending or _store_before_break(s.body)
        elif isinstance(s, Break):
            self.w("break;")
        elif isinstance(s, Evaluate):
            self.w(f"{self.p(s.value)};")
        else:
            raise TilecraftError("TC502", span=getattr(s, "span", None),
                                 detail=f"statement {type(s).__name__}", hint="")

    def _store_value(self, buf: Buffer, value) -> str:
        v = self.p(value)
        return v if value.dtype == buf.dtype else f"tc::cast<{ctype(buf.dtype)}>({v})"

    def allocate(self, b: Buffer) -> None:
        t = ctype(b.dtype)
        if b.scope == "fragment":
            lay = self.state.layouts[b]
            self.w(f"{t} {self.name_buf(b)}[{lay.local_size}];  // fragment {list(b.shape)}: {lay}")
        elif b.scope == "local":
            self.w(f"{t} {self.name_buf(b)}[{b.numel()}];")
        elif b.scope == "var":
            self.w(f"{t} {self.name_buf(b)} = {zero(t)};")
        elif b.scope == "shared":
            slot = self.state.shared[b]
            self.w(f"{t}* {self.name_buf(b)} = reinterpret_cast<{t}*>(tc_smem + {slot.offset});"
                   + (f"  // x{slot.stages} stages" if slot.stages > 1 else "")
                   + ("  // swizzled" if b in self.state.swizzled else ""))
            self.shared_ptr[b] = self.name_buf(b)

    def set_range(self, v: Var, value=None, first=None, count=None) -> None:
        """Record v's interval: the value of `value`, or first .. first + count - 1."""
        if value is not None:
            r = bound(value, self.ranges)
        else:
            a, n = bound(first, self.ranges), bound(count, self.ranges)
            r = None if a is None or n is None or n[0] < 1 else (a[0], a[1] + n[1] - 1)
        if r is None:
            self.ranges.pop(v, None)
        else:
            self.ranges[v] = r

    def serial_for(self, s: For) -> None:
        from .emit_pipeline import emit_pipelined

        self.set_range(s.var, first=s.start, count=s.extent)
        if id(s) in self.state.pipelines:
            emit_pipelined(self, s)
            return
        v = self.name(s.var)
        start, ext = self.p(s.start), self.p(s.extent)
        if s.kind == "unrolled":
            self.w("#pragma unroll")
        end = ext if start == "0" else f"{start} + {ext}"
        self._header_reads(s)
        before, before_o = self.read_since_sync, self.order.copy()
        self.open(f"for (int {v} = {start}; {v} < {end}; ++{v})")
        self.stmt(s.body)
        if _touches_shared(s.body) and not self.thread_branch:  # (not in divergent loops)
            self.sync()
        self._loop_end(s, before_o)
        self.close()
        # the loop may run zero times or break before its last barrier
        self.read_since_sync = before or _reads_shared(s.body)
        self.write_pending = self.write_pending or _store_before_break(s.body)

    def _header_reads(self, s) -> None:
        """A condition or loop bound is evaluated by every thread."""
        if not self.in_parallel:
            self.order.add([(False, y.buffer, "r") for e in stmt_exprs(s) for y in walk_expr(e)
                            if isinstance(y, BufferLoad) and y.buffer.scope == "global"])

    def _loop_end(self, s, before) -> None:
        """End of a loop body: a barrier if the next iteration's accesses would meet this one's
        unordered (global memory, block level); after the loop, what any iteration or none
        left."""
        if self.in_parallel:
            return
        body = accesses(self, s, bool(self.thread_branch))  # the condition's reads too
        if not self.thread_branch and self.order.conflicts(body):
            self.sync()
        end = self.order
        self.order = before
        self.order.merge(end)
        if any(isinstance(x, Break) for x in walk(s.body)):
            self.order.add(body)  # a break leaves from the middle of the body


def _element_wise(s) -> bool:
    """A tile op that runs per element inside T.Parallel: an atomic on one element."""
    return isinstance(s, Atomic) and not isinstance(s.src, BufferRegion)


def _writes_shared(s) -> bool:
    if isinstance(s, TileOp):
        return any(r.buffer.scope == "shared" for r in s.writes())
    if isinstance(s, ParallelLoop):
        return any(isinstance(x, (BufferStore, Atomic)) and _written(x).scope == "shared"
                   for x in walk(s))
    return False


def _stores_shared(s) -> bool:
    return any(isinstance(x, (BufferStore, Atomic)) and _written(x).scope == "shared"
               or isinstance(x, TileOp) and _writes_shared(x) for x in walk(s))


def _written(s) -> Buffer:
    return s.buffer if isinstance(s, BufferStore) else s.dst.buffer


def _reads_shared(s) -> bool:
    if isinstance(s, TileOp):
        return any(r.buffer.scope == "shared" for r in s.reads()) or any(
            isinstance(y, BufferLoad) and y.buffer.scope == "shared"
            for e in stmt_exprs(s) for y in walk_expr(e))  # T.print / T.device_assert values
    return _touches_shared(s)


def _store_before_break(body) -> bool:
    """A scalar store to shared memory in a loop body that a `break` may leave without the
    barrier that ends the body."""
    xs = list(walk(body))
    return any(isinstance(x, Break) for x in xs) and any(
        isinstance(x, BufferStore) and x.buffer.scope == "shared" for x in xs)


def _touches_shared(s) -> bool:
    for x in walk(s):
        if isinstance(x, TileOp) and any(r.buffer.scope == "shared"
                                         for r in x.reads() + x.writes()):
            return True
        if isinstance(x, BufferStore) and x.buffer.scope == "shared":
            return True
        for e in stmt_exprs(x):
            if any(isinstance(y, BufferLoad) and y.buffer.scope == "shared" for y in walk_expr(e)):
                return True
    return False
