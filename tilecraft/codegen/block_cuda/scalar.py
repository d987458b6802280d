"""The kernel's scalar code in a block program as CUDA: lets, stores, `while`, `break`,
`T.call_extern`, local arrays and vars, and the scalar loads of global, shared, local and var
buffers. A mixin of `BlockPrinter` (printer.py).

Every thread runs the scalar code; a statement outside `parallel` means what the interpreter
does once per block. So a store to global or shared memory there is thread 0's
(`if (tid == 0)`) unless it runs per thread: its index or value differs between threads, or it
sits under control flow that does (block/threads.py). Stores to local arrays and vars stay in
every thread (each holds its own copy, the same values where the code does not depend on the
thread). The barriers that order thread 0's accesses with the other threads' are
block/barriers.py's (scalar loads and stores count like instructions', never inside control
flow on a per-thread value). A global tensor thread 0 alone writes is printed without
`__restrict__` (NVRTC kept the other threads' earlier loads of it in registers across
barriers otherwise).

    S[0] = S[0] + 1.0          if (tid == 0) S_[0] = tc::cast<float>((S_[0] + 1.0f));
    x = T.alloc_var("int32")   int x_ = 0;
    while A[0] < 10:           while ((A_[0] < 10)) {

Indices of a global tensor that may hold 2^31 elements or more are computed in 64 bits, and so
are the integer lets they read (the interpreter's rule, tilecraft/ir/indices.py).

Elements of packed types (subbyte.py) in global and shared memory are read and written through
their bit fields (stores below 8 bits by compare-and-swap); local arrays and vars of such types
hold one code type value per element (`tc::SubInt<4, true> x_[8];`).
"""

from __future__ import annotations

from collections.abc import Iterator

from tilecraft.block import AllocateShared, Instruction, ParallelCompute
from tilecraft.block.threads import ThreadValues
from tilecraft.ir import (
    Allocate,
    Break,
    BufferLoad,
    BufferStore,
    Evaluate,
    LetStmt,
    Stmt,
    Var,
    While,
)
from tilecraft.ir.indices import needs_64bit_index
from tilecraft.ir.ranges import bound
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from ..cuda.cexpr import ctype, is_packed, zero

MEMORY = ("global", "shared")


def walk_all(s: Stmt) -> Iterator[Stmt]:
    """Every statement under `s`, the bodies of `parallel` instructions included."""
    for x in walk(s):
        yield x
        if isinstance(x, ParallelCompute):
            yield from walk_all(x.body)


def wide_lets(body: Stmt) -> set[Var]:
    """Integer lets that an index into a 64-bit-indexed tensor reads, directly or through other
    lets (instructions' offsets into such tensors count as indices)."""
    lets: dict[Var, object] = {}
    roots: list = []
    for s in walk_all(body):
        if isinstance(s, LetStmt) and s.var.dtype.is_integer:
            lets[s.var] = s.value
        if isinstance(s, BufferStore) and needs_64bit_index(s.buffer):
            roots += s.indices
        if isinstance(s, Instruction) and not isinstance(s, ParallelCompute):
            if any(needs_64bit_index(t.buffer) for t in (*s.reads(), *s.writes())
                   if hasattr(t, "buffer")):
                roots += list(s.exprs())
            continue
        roots += [i for e in stmt_exprs(s) for y in walk_expr(e)
                  if isinstance(y, BufferLoad) and needs_64bit_index(y.buffer) for i in y.indices]
    wide: set[Var] = set()
    stack = [v for e in roots for v in walk_expr(e) if isinstance(v, Var)]
    while stack:
        v = stack.pop()
        if v in lets and v not in wide:
            wide.add(v)
            stack.extend(x for x in walk_expr(lets[v]) if isinstance(x, Var))
    return wide


class ScalarPrinter:
    def scalar_setup(self) -> None:
        body = self.program.body
        self.threads = ThreadValues(body, self.program.thread_vars)
        self.wide_lets = wide_lets(body)
        self.shared_of = {s.out.buffer: s.out for s in walk(body) if isinstance(s, AllocateShared)}

    # ---- element references ---------------------------------------------------------------
    def scalar_get(self, at, buf, indices) -> str:
        """The C value of `buf[indices]` in scalar code."""
        return self.scalar_access(at, buf, indices, None)

    def scalar_access(self, at, buf, indices, value: str | None) -> str:
        """A read of `buf[indices]` (value None), or the statement storing `value` there."""
        if buf.scope == "var":
            name = self.name(buf, buf.name)
            return name if value is None else f"{name} = {value};"
        ptr, index = self.scalar_place(at, buf, indices)
        if not (is_packed(buf.dtype) and buf.scope in MEMORY):
            return f"{ptr}[{index}]" if value is None else f"{ptr}[{index}] = {value};"
        if buf.scope == "global":
            index = self.bit_index(buf, index)
        return (self.mem_get(buf.dtype, ptr, index) if value is None
                else self.mem_set(buf.dtype, ptr, index, value))

    def scalar_ref(self, at, buf, indices) -> str:
        """The C lvalue of `buf[indices]` in scalar code (not for packed types in memory)."""
        if buf.scope == "var":
            return self.name(buf, buf.name)
        ptr, index = self.scalar_place(at, buf, indices)
        return f"{ptr}[{index}]"

    def scalar_place(self, at, buf, indices) -> tuple[str, str]:
        """(C pointer, element index) of `buf[indices]` in scalar code."""
        wide = needs_64bit_index(buf)
        idx = [self.wide_p(i, wide) for i in indices]
        if buf.scope == "local":
            flat = idx[0] if idx else "0"
            for i, n in zip(idx[1:], buf.shape[1:]):
                flat = f"({flat}) * {n} + {i}"
            return self.name(buf, buf.name), flat
        if buf.scope == "global":
            from .parallel import _Global

            flat, _ = self.global_flat(_Global(buf), idx)
            return self.name(buf, buf.name), flat
        t = self.shared_of.get(buf) if buf.scope == "shared" else None
        if t is None:
            raise self.refuse(at, f"a scalar access to the {buf.scope} tensor `{buf.name}` "
                              "outside a parallel loop")
        return self.tensor(t), self.shared_offset(at, t, idx)

    def once_per_block(self, s: BufferStore) -> bool:
        """A block-level store to memory that thread 0 alone performs."""
        return s.buffer.scope in MEMORY and not self.threads.per_thread(s)

    # ---- statements -------------------------------------------------------------------------
    def let(self, s: LetStmt) -> None:
        r = bound(s.value, self.exprs.ranges)
        if r is not None:
            self.exprs.ranges[s.var] = r
        else:
            self.exprs.ranges.pop(s.var, None)
        if s.var in self.wide_lets:  # feeds a 64-bit index: computed in 64 bits
            self.w(f"const long long {self.var_name(s.var)} = {self.wide_p(s.value, True)};")
        else:
            self.w(f"const {ctype(s.var.dtype)} {self.var_name(s.var)} = {self.p(s.value)};")

    def _BufferStore(self, s: BufferStore) -> None:
        guard = "if (tid == 0) " if self.once_per_block(s) else ""
        if guard and s.buffer.scope == "global":  # (printed without __restrict__)
            self.written_by_one.add(s.buffer)
        v = self.p(s.value)
        if s.value.dtype != s.buffer.dtype:
            v = f"tc::cast<{ctype(s.buffer.dtype)}>({v})"
        self.w(f"{guard}{self.scalar_access(s, s.buffer, s.indices, v)}")

    def _Allocate(self, s: Allocate) -> None:
        b = s.buffer
        t = ctype(b.dtype)
        if b.scope == "var":
            self.w(f"{t} {self.name(b, b.name)} = {zero(t)};")
        elif b.scope == "local" and b.numel() is not None:
            self.w(f"{t} {self.name(b, b.name)}[{b.numel()}];")
        else:
            raise self.refuse(s, f"allocating `{b.name}` in {b.scope} memory here")

    def _While(self, s: While) -> None:
        self.open(f"while ({self.p(s.cond)})")
        self.loop_body(s.body)
        self.close()

    def _Break(self, s: Break) -> None:
        self.w("break;")

    def _Evaluate(self, s: Evaluate) -> None:
        self.w(f"{self.p(s.value)};")


__all__ = ["ScalarPrinter", "walk_all", "wide_lets"]
