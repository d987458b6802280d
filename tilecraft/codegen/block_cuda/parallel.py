"""`parallel` instructions (lowered T.Parallel loops) as CUDA: each thread runs the scalar body
for the elements the loop's layout gives it (`li` over its local elements, the loop variables
from `frag_coords`). A register tensor indexed by the loop variables reads the register of the
same thread that holds that element (the VM checks that one does: TC610); the register is `li`
when the tensor has the loop's layout, else a constant slot table (the same on every thread,
folded by the unrolled loop). Shared tensors are addressed through their layouts, global tensors
row-major. A mixin of `BlockPrinter` (printer.py).

Scalar atomics in the body act once per logical element (atomics.py), and so do stores to
global memory when the layout is replicated, every replica computes the same value and the body
does not read the tensor back (`replica_guard`): `if (((tid % 16)) == 0) C_[i_] = s_[li];`.
Elements of packed types (subbyte.py) are read and written through their bit fields; stores to
global or shared memory below 8 bits go through compare-and-swap (other threads may write bits
of the same bytes).

Not printed yet (TC502 at the line): a register index that is not the loop variables, slots that
differ between threads, `T.call_extern` inside the loop, and atomics on packed types.

A body `x[...] = T.if_then_else(a <op> b, u, v)` whose margin a - b is affine in the loop
variables (a causal mask) prints three element loops behind one test of the margin's range over
the tile (uniform_select.py): all-true stores u, all-false v, the mixed tiles select per element.
"""

from __future__ import annotations

import numpy as np

from tilecraft.block import RegisterTensor, SharedTensor
from tilecraft.block.parallel import ParallelCompute
from tilecraft.ir import Atomic, BufferLoad, BufferStore, For, If, LetStmt, SeqStmt, Var
from tilecraft.ir.expr import const_int
from tilecraft.ir.ranges import bound
from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr

from ..cuda.cexpr import ctype, is_packed
from ..cuda.indexing import frag_coords, replica_index
from .atomics import AtomicPrinter
from .text import convert
from .uniform_select import uniform_select

HOLDS_C = {">=": "({} >= 0)".format, ">": "({} > 0)".format, "<=": "({} <= 0)".format,
           "<": "({} < 0)".format}


class ParallelPrinter(AtomicPrinter):
    def _ParallelCompute(self, s: ParallelCompute) -> None:
        lay = s.layout
        saved = self.par
        self.par = s
        self.w(f"// parallel over {list(lay.shape)}: {lay}")
        split = uniform_select(s, self.exprs.ranges)
        decided = split.decided() if split is not None else None
        if split is None:
            self.element_loop(s, s.body)
        elif decided is not None:  # the same on every tile
            self.w(f"// the condition is {'true' if decided else 'false'} on the whole tile")
            self.element_loop(s, split.branch(decided))
        else:  # a mask uniform on most tiles (causal): decided once per tile
            holds = HOLDS_C[split.op]
            self.open("")  # (the next such loop declares d_lo and d_hi again)
            self.w(f"const {ctype(split.lo.dtype)} d_lo = {self.p(split.lo)}, "
                   f"d_hi = {self.p(split.hi)};  // the range of the condition's margin")
            self.open(f"if ({holds('d_lo')} && {holds('d_hi')})")
            self.element_loop(s, split.branch(True))
            self.close()
            self.open(f"else if (!{holds('d_lo')} && !{holds('d_hi')})")
            self.element_loop(s, split.branch(False))
            self.close()
            self.open("else")
            self.element_loop(s, s.body)
            self.close()
            self.close()
        self.par = saved

    def element_loop(self, s: ParallelCompute, body) -> None:
        """`body` once per register of the thread, the loop variables bound to its element."""
        lay = s.layout
        self.w("#pragma unroll")
        self.open(f"for (int li = 0; li < {lay.local_size}; ++li)")
        used = {x for y in walk(body) for e in stmt_exprs(y) for x in walk_expr(e)}
        for v, c, n in zip(s.vars, frag_coords(lay, "tid", "li"), lay.shape):
            if v in used:  # (a variable that only indexes registers needs no C name)
                self.w(f"const int {self.var_name(v)} = {c};")
            self.exprs.ranges[v] = (0, n - 1)
        self.par_stmt(body)
        self.close()

    def par_stmt(self, s) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.par_stmt(c)
        elif isinstance(s, LetStmt):
            self.w(f"const {ctype(s.var.dtype)} {self.var_name(s.var)} = {self.p(s.value)};")
        elif isinstance(s, BufferStore):
            guard = self.replica_guard(s.buffer) if s.buffer.scope == "global" else None
            if guard is not None:  # (printed without __restrict__)
                self.written_by_one.add(s.buffer)
            value = convert(ctype(s.buffer.dtype), self.p(s.value),
                            self.exprs.value_ctype(s.value.dtype))
            store = self.element_store(s, s.buffer, s.indices, value)
            self.w(f"{'' if guard is None else f'if ({guard}) '}{store}")
        elif isinstance(s, Atomic):
            buf = s.dst.buffer
            if is_packed(buf.dtype):
                raise self.refuse(s, f"an atomic on the {buf.dtype} tensor `{buf.name}`")
            self.par_atomic(s)
        elif isinstance(s, If):
            self.open(f"if ({self.p(s.cond)})")
            self.par_stmt(s.then_body)
            self.close()
            if s.else_body is not None:
                self.open("else")
                self.par_stmt(s.else_body)
                self.close()
        elif isinstance(s, For) and s.kind in ("serial", "unrolled"):
            v = self.var_name(s.var)
            first, n = bound(s.start, self.exprs.ranges), bound(s.extent, self.exprs.ranges)
            if first is not None and n is not None and n[1] > 0:  # from the extent's interval
                self.exprs.ranges[s.var] = (first[0], first[1] + n[1] - 1)
            from .printer import reads_memory

            end = self.p(s.start + s.extent)
            if reads_memory(s.start + s.extent):  # (evaluated once, as the interpreter does)
                self.w(f"const int {v}end = {end};")
                end = f"{v}end"
            self.open(f"for (int {v} = {self.p(s.start)}; {v} < {end}; ++{v})")
            self.par_stmt(s.body)
            self.close()
        else:
            raise self.refuse(s, f"`{type(s).__name__}` inside a parallel loop")

    def replica_guard(self, buf) -> str | None:
        """`(replica) == 0` when the current loop's layout is replicated, its body computes the
        same on every replica (no thread index, no per-thread value from outside the loop) and
        does not read `buf` (no barrier inside the loop): a store to `buf` then runs once per
        logical element, leaving what the VM's replicas all store."""
        owner = replica_index(self.par.layout, "tid")
        if owner is None:
            return None
        per_thread = self._thread_dependence()
        inner = set(self.par.vars) | {x.var for x in walk(self.par.body)
                                      if isinstance(x, (LetStmt, For))}
        for x in walk(self.par.body):
            for e in stmt_exprs(x):
                for v in walk_expr(e):
                    if isinstance(v, Var) and v in per_thread.vars and v not in inner:
                        return None
                    if isinstance(v, BufferLoad) and (v.buffer in per_thread.buffers
                                                      or v.buffer == buf):
                        return None
        return f"({owner}) == 0"

    def par_load(self, e: BufferLoad) -> str:
        return self.element(e, e.buffer, e.indices)

    def element(self, at, buf, indices) -> str:
        """The C value of `buf[indices]` inside the current parallel loop."""
        return self.element_access(at, buf, indices, None)

    def element_store(self, at, buf, indices, value: str) -> str:
        """The statement `buf[indices] = value` inside the current parallel loop."""
        return self.element_access(at, buf, indices, value)

    def element_access(self, at, buf, indices, value: str | None) -> str:
        """A read of `buf[indices]` (value None) or the statement storing `value` there."""
        from .transfer import small

        t = self.par.tensor_of().get(buf)
        wide = buf.scope == "global" and not small(buf)
        idx = [self.wide_p(i, wide) for i in indices]
        if isinstance(t, RegisterTensor):
            slot = self.register_slot(at, t, indices)
            return self.reg_get(t, slot) if value is None else self.reg_set(t, slot, value)
        if isinstance(t, SharedTensor):
            ptr, index = self.tensor(t), self.shared_offset(at, t, idx)
        elif buf.scope == "global":
            flat, _ = self.global_flat(_Global(buf), idx)
            ptr, index = self.name(buf, buf.name), self.bit_index(buf, flat)
        elif buf.scope in ("local", "var"):  # the thread's own copy (scalar.py)
            ref = self.scalar_ref(at, buf, indices)
            return ref if value is None else f"{ref} = {value};"
        else:
            raise self.refuse(at, f"an access to the {buf.scope} buffer `{buf.name}`")
        return (self.mem_get(buf.dtype, ptr, index) if value is None
                else self.mem_set(buf.dtype, ptr, index, value))

    def register_slot(self, at, t: RegisterTensor, indices) -> str:
        loop = self.par
        pos = []
        for i in indices:
            if isinstance(i, Var) and i in loop.vars:
                pos.append(loop.vars.index(i))
            elif const_int(i) == 0:
                pos.append(None)
            else:
                raise self.refuse(at, f"the register index `{i}` of `{t.buffer.name}` (only the "
                                  "loop variables index registers)")
        if t.layout == loop.layout and pos == list(range(len(loop.vars))):
            return "li"
        idx = loop.layout.index_table()  # [threads, local, ndim]
        want = np.stack([idx[..., p] if p is not None else np.zeros(idx.shape[:2], np.int64)
                         for p in pos], axis=-1)
        flat = np.ravel_multi_index(tuple(want[..., d] for d in range(t.layout.ndim)),
                                    t.layout.shape)
        table = _slot_table(t.layout)
        threads = np.broadcast_to(np.arange(loop.layout.num_threads)[:, None], flat.shape)
        slots = table[threads, flat]
        if (slots < 0).any() or not (slots == slots[0]).all():
            raise self.refuse(at, f"registers of `{t.buffer.name}` that differ between threads")
        if (slots[0] == slots[0][0]).all():  # one register for every element
            return str(int(slots[0][0]))
        name = f"pslot{len(self.lines)}"
        self.w(f"const int {name}[{len(slots[0])}] = {{{', '.join(map(str, slots[0]))}}};")
        return f"{name}[li]"


class _Global:
    """A global Tile IR buffer seen as a tensor by `global_flat`."""

    def __init__(self, buf):
        self.buffer = buf


def _slot_table(layout) -> np.ndarray:
    from tilecraft.block.vm_parallel import slot_table

    return slot_table(layout)


__all__ = ["ParallelPrinter"]
