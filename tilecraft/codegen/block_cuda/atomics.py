"""Scalar atomics of block programs as CUDA: `T.atomic_<kind>(dst[idx], value)` on global or
shared memory, with the interpreter's meaning (docs/language.md; interp/ops/copy.py):

* inside a `parallel` instruction, once per logical element of the loop: with a replicated
  layout only the replica whose `replica_index` is 0 performs it;
* at block level, once per block (thread 0), unless it depends on the thread (a thread index,
  or control flow on one: block/threads.py), then in every thread.

Each prints as `tc::atomic_<kind>(&dst[offset], tc::cast<T>(value))` (include/tilecraft/
atomic.cuh): the hardware atomic where there is one, else a compare-and-swap loop on the aligned
word holding the element (8/16-bit integers and floats, fp8, 64-bit max/min of floats), which
computes as the interpreter does (float sums of narrow floats in float, rounded once; integers
wrap; max/min propagate NaN). The value converts to dst's dtype first, as on the interpreter.
Shared elements are addressed through the tensor's layout, global ones row-major. A global
tensor that thread 0 alone updates is printed without `__restrict__` (`written_by_one`): other
threads' loads of it must not be kept in registers across barriers. A block-level atomic with a
memory order is thread 0's between barriers: one `atom.<sem>.gpu` on global memory where PTX has
the operation and type (`tc::atomic_add_acq_rel`), else the relaxed one between
`__threadfence()`s (seq_cst, shared memory, narrow types).

    T.atomic_add(C[j], A[bx, j])     ->  if ((tid / 64) == 0) tc::atomic_add(&C_[j_],
                                               tc::cast<float>(A_[((bx_ * 64) + j_)]));

A mixin of `BlockPrinter` (printer.py), through `ParallelPrinter`.
"""

from __future__ import annotations

from tilecraft.block import AllocateShared, SharedTensor
from tilecraft.ir import Atomic, BufferRegion, Const
from tilecraft.ir.visitor import walk

from ..cuda.cexpr import ctype
from ..cuda.indexing import replica_index
from .text import convert

#: (kind, C type) of the atomics PTX's `atom` has with a memory order (.acquire, .release,
#: .acq_rel) on global memory: include/tilecraft/atomic.cuh's `tc::atomic_<kind>_<order>`
ORDERED = {("add", "float"), ("add", "double")} \
    | {(k, t) for k in ("add", "max", "min")
       for t in ("int", "unsigned int", "long long", "unsigned long long")}


class AtomicPrinter:
    def _Atomic(self, s: Atomic) -> None:
        """A block-level atomic (a Tile IR statement lowering kept)."""
        if isinstance(s.src, BufferRegion):  # (lowering makes tile atomics instructions)
            raise self.refuse(s, f"the tile form of T.atomic_{s.kind}")
        buf = s.dst.buffer
        if buf.scope == "shared":
            t = self._shared_tensors().get(buf)
            if t is None:
                raise self.refuse(s, f"T.atomic_{s.kind} on the unallocated `{buf.name}`")
            ref = f"{self.tensor(t)}[{self.shared_offset(s, t, [self.p(i) for i in s.dst.starts])}]"
        elif buf.scope == "global":
            from .parallel import _Global
            from .transfer import small

            idx = [self.wide_p(i, not small(buf)) for i in s.dst.starts]
            ref = f"{self.name(buf, buf.name)}[{self.global_flat(_Global(buf), idx)[0]}]"
        else:
            raise self.refuse(s, f"T.atomic_{s.kind} on the {buf.scope} buffer `{buf.name}`")
        once = not self._thread_dependence().per_thread(s)
        if s.prev is not None or s.order != "relaxed":
            if not once:
                raise self.refuse(s, f"T.atomic_{s.kind} with return_prev or memory_order whose "
                                  "address or value differs between threads")
            self._ordered(s, ref)
            return
        self._atomic_call(s, ref, "tid == 0" if once else None)

    def _ordered(self, s: Atomic, ref: str) -> None:
        """Thread 0's ordered atomic (lowering put barriers around it: the block's accesses
        before it are thread 0's by causality), its old value into `prev`: one `atom.<sem>.gpu`
        where PTX has the operation on global memory (ORDERED), else the relaxed atomic between
        fences (seq_cst always); after an acquire also a global async-proxy fence, for the TMA
        loads thread 0 issues later."""
        buf = s.dst.buffer
        if buf.scope == "global":
            self.written_by_one.add(buf)
        one = buf.scope == "global" and s.order in ("acquire", "release", "acq_rel") \
            and (s.kind, ctype(buf.dtype)) in ORDERED
        fn = f"atomic_{s.kind}_{s.order}" if one else f"atomic_{s.kind}"
        call = f"tc::{fn}(&{ref}, {self._value(s)})"
        if s.prev is not None:
            t = self._shared_tensors().get(s.prev.buffer)
            if t is None:
                raise self.refuse(s, f"the unallocated `{s.prev.buffer.name}`")
            starts = [self.p(i) for i in s.prev.starts]
            call = f"{self.tensor(t)}[{self.shared_offset(s, t, starts)}] = {call}"
        self.w(f"if (tid == 0) {{  // T.atomic_{s.kind}, memory_order {s.order}")
        if s.order in ("release", "acq_rel", "seq_cst") and not one:
            self.w("  __threadfence();")
        self.w(f"  {call};")
        if s.order in ("acquire", "acq_rel", "seq_cst"):  # (TMA loads are thread 0's too)
            if not one:
                self.w("  __threadfence();")
            self.w("  tc::fence_proxy_async_global();")
        self.w("}")

    def par_atomic(self, s: Atomic) -> None:
        """An atomic inside the current `parallel`: once per logical element."""
        if isinstance(s.src, BufferRegion) or s.dst.buffer.scope not in ("global", "shared"):
            raise self.refuse(s, f"T.atomic_{s.kind} on {s.dst.buffer.scope} memory")
        ref = self.element(s, s.dst.buffer, s.dst.starts)
        owner = replica_index(self.par.layout, "tid")
        self._atomic_call(s, ref, f"({owner}) == 0" if owner else None)

    def _atomic_call(self, s: Atomic, ref: str, guard: str | None) -> None:
        buf = s.dst.buffer
        if guard is not None and buf.scope == "global":
            self.written_by_one.add(buf)
        call = f"tc::atomic_{s.kind}(&{ref}, {self._value(s)});  // T.atomic_{s.kind}"
        self.w(f"if ({guard}) {call}" if guard else call)

    def _value(self, s: Atomic) -> str:
        """The atomic's value as dst's C type (a constant too, unless its literal has that type:
        `-3` is an int in C, and the int8 overload would not match it)."""
        t, text = ctype(s.dst.buffer.dtype), self.p(s.src)
        if isinstance(s.src, Const) and t not in ("int", "float", "double") \
                and not text.startswith(f"tc::cast<{t}>("):
            return f"tc::cast<{t}>({text})"
        return convert(t, text, self.exprs.value_ctype(s.src.dtype))

    def _shared_tensors(self) -> dict:
        if getattr(self, "_shared_of", None) is None:
            self._shared_of = {x.out.buffer: x.out for x in walk(self.program.body)
                               if isinstance(x, AllocateShared)
                               and isinstance(x.out, SharedTensor)}
        return self._shared_of

    def _thread_dependence(self):
        return self.threads  # (scalar.py: the values that differ between threads)


__all__ = ["AtomicPrinter"]
