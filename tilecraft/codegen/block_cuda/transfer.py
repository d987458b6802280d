"""Transfers of block programs as CUDA: loads and stores through layouts, copy_async (cp.async
when selected), commit/wait, barriers. A mixin of `BlockPrinter` (printer.py).

Packed types (subbyte.py) move element by element through their bit fields; a store writes
whole bytes where each thread owns the bytes it writes, else through compare-and-swap. 8-bit
packed types are bytes in memory and take the vector and cp.async plans as uint8 does."""

from __future__ import annotations

import math

from tilecraft.block import (
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    Exit,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedSlice,
    SharedTensor,
    StoreGlobal,
    StoreShared,
    Synchronize,
)

from ..cuda.cexpr import ctype, is_packed, storage_ctype, zero
from ..cuda.indexing import frag_coords
from .cexpr_text import C
from .subbyte import store_rel_global, store_rel_shared, whole_bytes


def small(buf) -> bool:
    """The buffer has fewer than 2^31 elements for sure (int32 index arithmetic suffices)."""
    return all(isinstance(d, int) for d in buf.shape) and math.prod(buf.shape) < 2**31


def in_64_bits(e):
    """`e` with its integer arithmetic done in int64, as wide_p prints it."""
    import dataclasses

    from tilecraft.dtypes import int64
    from tilecraft.ir import BinOp

    if isinstance(e, BinOp) and e.dtype.is_integer and e.dtype.bits < 64:
        return dataclasses.replace(e, a=in_64_bits(e.a), b=in_64_bits(e.b), dtype=int64)
    return e


class TransferPrinter:
    def wide_p(self, e, wide: bool) -> str:
        """`e` printed with 64-bit integer arithmetic when `wide` (the interpreter's rule for
        indices of tensors of 2^31 elements or more: no 32-bit step may wrap)."""
        saved = self.exprs.wide
        self.exprs.wide = wide or saved
        try:
            return self.p(e)
        finally:
            self.exprs.wide = saved

    def tile_index(self, s, coords: list[str]) -> list[str]:
        """Per dimension of the big tensor: offset + the tile's coordinate where covered (in
        64 bits for a global tensor that may hold 2^31 elements or more)."""
        mem = next(getattr(s, f) for f in ("src", "dst") if not isinstance(getattr(s, f, None),
                                                                        RegisterTensor))
        wide = mem.buffer.scope == "global" and not small(mem.buffer)
        idx = [self.wide_p(o, wide) for o in s.offset]
        for k, d in enumerate(s.dims):
            c = f"(long long)({coords[k]})" if wide else coords[k]
            idx[d] = c if idx[d] == "0" else f"({idx[d]} + {c})"
        return idx

    def global_flat(self, t, idx: list[str], s=None) -> tuple[str, str]:
        """(flat element index, in-bounds condition) of `idx` in global tensor `t`; with the
        transfer `s` whose tile `idx` indexes, no `>= 0` test in a dimension whose offset is
        provably non-negative (block indices, loop variables: the tile's coordinates are)."""
        dims = t.buffer.shape
        shape = [str(d) if isinstance(d, int) else self.p(d) for d in dims]
        flat = idx[0] if small(t.buffer) else f"(long long)({idx[0]})"  # 64-bit past 2^31
        for i, n in zip(idx[1:], shape[1:]):
            flat = f"({flat}) * {n} + {i}"
        wide = not small(t.buffer)
        lows = [True] * len(idx) if s is None else [self.may_be_negative(o, wide)
                                                    for o in s.offset]
        ok = " && ".join((f"{i} >= 0 && " if low else "") + f"{i} < {n}"
                         for i, n, low in zip(idx, shape, lows))
        return flat, ok

    def may_be_negative(self, e, wide: bool) -> bool:
        """`e`, printed in 64-bit arithmetic when `wide` (wide_p), may be below 0."""
        from tilecraft.ir.ranges import bound

        r = bound(in_64_bits(e) if wide else e, self.exprs.ranges)
        return r is None or r[0] < 0

    def shared_offset(self, s, t: SharedTensor, idx: list[str]) -> str:
        """The layout's own offset function, evaluated on C text (indices are non-negative)."""
        return str(t.layout.offset(*(C(f"({i})") for i in idx)))

    def vector_transfer(self, s, plan, reg, mem, load: bool) -> None:
        """The plan's vector accesses (block/select.py VectorPlan): each thread moves its
        register groups g*v .. g*v+v-1 as one access; a global vector is wholly in or out of
        bounds (rows a multiple of v, aligned offsets)."""
        v, t = plan.width, storage_ctype(reg.dtype)
        r, m = self.tensor(reg), self.tensor(mem)
        # an 8-bit packed register tensor: its words as bytes (element li is byte li)
        at = (f"reinterpret_cast<unsigned char*>({r}) + li" if is_packed(reg.dtype)
              else f"&{r}[li]")
        self.w(f"// {'load' if load else 'store'} in vectors of {v}")
        self.w("#pragma unroll")
        self.open(f"for (int g = 0; g < {reg.layout.local_size // v}; ++g)")
        self.w(f"const int li = g * {v};")
        idx = self.tile_index(s, frag_coords(reg.layout, "tid", "li"))
        if isinstance(mem, SharedTensor):
            ptr, ok = f"&{m}[{self.shared_offset(s, mem, idx)}]", None
        else:
            flat, ok = self.global_flat(mem, idx, s)
            ptr = f"&{m}[{flat}]"
            if self.in_bounds(s, reg.shape):
                ok = None
        regs = f"*reinterpret_cast<tc::Vec<{t}, {v}>*>({at})"
        if load and ok is None:
            self.w(f"{regs} = tc::load_vec<{t}, {v}>({ptr});")
        elif load:
            self.w(f"if ({ok}) {regs} = tc::load_vec<{t}, {v}>({ptr});")
            if is_packed(reg.dtype):
                self.w(f"else {regs} = tc::Vec<{t}, {v}>{{}};")
            else:
                self.w(f"else for (int k = 0; k < {v}; ++k) {r}[li + k] = {zero(t)};")
        else:
            guard = f"if ({ok}) " if ok is not None else ""
            self.w(f"{guard}tc::store_vec<{t}, {v}>({ptr}, {regs});")
        self.close()

    def _vector(self, s, reg, mem, load: bool) -> bool:
        from tilecraft.block.select import VectorPlan

        plan = self.plans.get(id(s))
        if not isinstance(plan, VectorPlan):
            return False
        self.vector_transfer(s, plan, reg, mem, load)
        return True

    def _LoadGlobal(self, s: LoadGlobal) -> None:
        out = s.out
        if self._vector(s, out, s.src, True):
            return
        self.per_register(out)
        flat, ok = self.global_flat(s.src, self.tile_index(s, frag_coords(out.layout, "tid", "li")),
                                    s)
        if is_packed(out.dtype):
            code = self.mem_code(out.dtype, self.tensor(s.src), self.bit_index(s.src.buffer, flat))
            if not self.in_bounds(s, out.shape):
                code = f"({ok}) ? {code} : 0u"
            self.w(self.reg_set_code(out, "li", code))
        elif self.in_bounds(s, out.shape):
            self.w(f"{self.tensor(out)}[li] = {self.tensor(s.src)}[{flat}];")
        else:
            self.w(f"{self.tensor(out)}[li] = ({ok}) ? {self.tensor(s.src)}[{flat}] : "
                   f"{zero(ctype(out.dtype))};")
        self.close()

    def _StoreGlobal(self, s: StoreGlobal) -> None:
        src = s.src
        if self._vector(s, src, s.dst, False):
            return
        safe = self.in_bounds(s, src.shape)

        def flat_of(li: str) -> tuple[str, str]:
            return self.global_flat(s.dst, self.tile_index(s, frag_coords(src.layout, "tid", li)),
                                    s)

        if is_packed(src.dtype) and safe:
            rel = store_rel_global(s, src)
            groups = whole_bytes(src.dtype.bits, *rel) if rel is not None else None
            if groups is not None:
                return self.store_whole_bytes(src, self.tensor(s.dst), groups,
                                              lambda li: self.bit_index(s.dst.buffer,
                                                                        flat_of(str(li))[0]))
        self.per_register(src)
        flat, ok = flat_of("li")
        guard = "" if safe else f"if ({ok}) "
        if is_packed(src.dtype):
            self.w(guard + self.mem_set_code(src.dtype, self.tensor(s.dst),
                                             self.bit_index(s.dst.buffer, flat),
                                             self.reg_code(src, "li")))
        else:
            self.w(f"{guard}{self.tensor(s.dst)}[{flat}] = {self.tensor(src)}[li];")
        self.close()

    def _LoadShared(self, s: LoadShared) -> None:
        out = s.out
        if self.matrix_transfer(s) or self._vector(s, out, s.src, True):  # (ldst_matrix.py)
            return
        self.per_register(out)
        off = self.shared_offset(s, s.src, self.tile_index(s, frag_coords(out.layout, "tid", "li")))
        if is_packed(out.dtype):
            self.w(self.reg_set_code(out, "li", self.mem_code(out.dtype, self.tensor(s.src), off)))
        else:
            self.w(f"{self.tensor(out)}[li] = {self.tensor(s.src)}[{off}];")
        self.close()

    def _StoreShared(self, s: StoreShared) -> None:
        src = s.src
        if self.matrix_transfer(s) or self._vector(s, src, s.dst, False):  # (ldst_matrix.py)
            return

        def offset_of(li: str) -> str:
            return self.shared_offset(s, s.dst, self.tile_index(s, frag_coords(src.layout, "tid",
                                                                               li)))

        if is_packed(src.dtype):
            rel = store_rel_shared(s, src)
            groups = whole_bytes(src.dtype.bits, rel, 0) if rel is not None else None
            if groups is not None:
                return self.store_whole_bytes(src, self.tensor(s.dst), groups,
                                              lambda li: offset_of(str(li)))
        self.per_register(src)
        off = offset_of("li")
        if is_packed(src.dtype):
            self.w(self.mem_set_code(src.dtype, self.tensor(s.dst), off, self.reg_code(src, "li")))
        else:
            self.w(f"{self.tensor(s.dst)}[{off}] = {self.tensor(src)}[li];")
        self.close()

    def _AtomicGlobal(self, s) -> None:
        """dst[tile] <kind>= src, one atomic per logical element: the first thread of each
        replica group issues it (tc::atomic_<kind>: the hardware's, NaN-propagating max/min)."""
        from ..cuda.indexing import replica_index

        src = s.src
        owner = replica_index(src.layout, "tid")
        self.per_register(src)
        flat, ok = self.global_flat(s.dst, self.tile_index(s, frag_coords(src.layout, "tid",
                                                                           "li")), s)
        guard = f"{ok} && ({owner}) == 0" if owner else ok
        self.w(f"if ({guard}) tc::atomic_{s.kind}(&{self.tensor(s.dst)}[{flat}], "
               f"{self.tensor(src)}[li]);")
        self.close()

    def _CopyAsync(self, s: CopyAsync) -> None:
        plan = self.plans.get(id(s))
        if plan is not None:
            return self.cp_async(s, plan)
        if is_packed(s.dst.dtype) and self.copy_async_bytes(s):  # (subbyte.py)
            return
        dst = s.dst
        shape = [int(d) for d in dst.shape]
        n, nt = math.prod(shape), self.program.num_threads
        self.w(f"// copy_async {s.src.buffer.name} -> {dst.buffer.name}: copied when issued")
        self.open(f"for (int e = tid; e < {n}; e += {nt})")
        coords = [f"(e / {math.prod(shape[k + 1:])}) % {shape[k]}" for k in range(len(shape))]
        flat, ok = self.global_flat(s.src, self.tile_index(s, coords), s)
        off = self.shared_offset(s, dst, coords)
        if is_packed(dst.dtype):  # (threads share bytes: compare-and-swap below 8 bits)
            code = self.mem_code(dst.dtype, self.tensor(s.src), self.bit_index(s.src.buffer, flat))
            self.w(self.mem_set_code(dst.dtype, self.tensor(dst), off, f"({ok}) ? {code} : 0u"))
        else:
            self.w(f"{self.tensor(dst)}[{off}] = ({ok}) ? {self.tensor(s.src)}[{flat}] : "
                   f"{zero(ctype(dst.dtype))};")
        self.close()

    def in_bounds(self, s, tile_shape) -> bool:
        """Every element of the tile at `s.offset` lies inside the global tensor (proved from
        the offsets' intervals: block indices, loop variables, refining `if`s)."""
        from tilecraft.ir.ranges import bound

        shape = s.src.buffer.shape if s.WHOLE == "src" else s.dst.buffer.shape
        if not all(isinstance(d, int) for d in shape):
            return False
        extent = {d: int(e) for d, e in zip(s.dims, tile_shape)}
        for d, (o, n) in enumerate(zip(s.offset, shape)):
            r = bound(o, self.exprs.ranges)
            if r is None or r[0] < 0 or r[1] + extent.get(d, 1) > n:
                return False
        return True

    def cp_async(self, s: CopyAsync, plan) -> None:
        """The plan's 16-byte cp.async chunks, spread over the threads (block/select.py)."""
        dst, c = s.dst, plan.chunk
        shape = [int(d) for d in dst.shape]
        per_row = shape[-1] // c
        n, nt = math.prod(shape) // c, self.program.num_threads
        if self.cp_async_strided(s, plan, shape, n, nt):
            return
        self.w(f"// copy_async {s.src.buffer.name} -> {dst.buffer.name}: cp.async, {n} chunks "
               f"of 16 bytes")
        if n <= nt:  # (a chunk for each of the first n threads: no loop to unroll around)
            self.open(f"if (tid < {n})")
            self.w("const int e = tid;")
        else:
            self.open(f"for (int e = tid; e < {n}; e += {nt})")
        coords = [f"(e / {per_row * math.prod(shape[k + 1:-1])}) % {shape[k]}"
                  for k in range(len(shape) - 1)] + [f"(e % {per_row}) * {c}"]
        flat, ok = self.global_flat(s.src, self.tile_index(s, coords), s)
        off = self.shared_offset(s, dst, coords)
        src = self.tensor(s.src)
        self.w(f"const bool ok = {ok};")
        self.w(f"tc::cp_async_16(&{self.tensor(dst)}[{off}], ok ? (const void*)&{src}[{flat}] "
               f": (const void*){src}, ok);")
        self.close()
        self.async_copies = True

    def cp_async_strided(self, s: CopyAsync, plan, shape: list[int], n: int, nt: int) -> bool:
        """Each thread's chunks as constant steps from its first one, when the layouts allow it
        (every thread's k-th chunk is its first moved by the same tile, shared and global
        offsets, checked on every thread): one address computation, no per-chunk index math;
        no bounds test when the tile provably lies inside the tensor. False when they do not."""
        import numpy as np

        src = s.src.buffer
        if n % nt or not all(isinstance(d, int) for d in src.shape):
            return False
        c, dst = plan.chunk, s.dst
        grid = shape[:-1] + [shape[-1] // c]
        e = np.arange(n).reshape(n // nt, nt)
        coords = list(np.unravel_index(e, grid))
        coords[-1] = coords[-1] * c
        offs = np.asarray(dst.layout.offset(*coords))
        d_tile = [x - x[:1] for x in coords]
        d_smem = offs - offs[:1]
        if any((x != x[:, :1]).any() for x in d_tile) or (d_smem != d_smem[:, :1]).any():
            return False
        strides = [math.prod(src.shape[d + 1:]) for d in range(len(src.shape))]
        d_glob = sum(x[:, 0] * strides[d] for x, d in zip(d_tile, s.dims))
        per_row = grid[-1]
        first = [f"(tid / {per_row * math.prod(shape[k + 1:-1])}) % {shape[k]}"
                 for k in range(len(shape) - 1)] + [f"(tid % {per_row}) * {c}"]
        flat, _ = self.global_flat(s.src, self.tile_index(s, first))
        size = dst.dtype.bits // 8
        t = storage_ctype(dst.dtype)
        safe = self.in_bounds(s, shape)
        self.w(f"// copy_async {src.name} -> {dst.buffer.name}: cp.async, {n // nt} chunk(s) "
               f"of 16 bytes per thread{'' if safe else ', bounds-checked'}")
        self.open("")
        self.w(f"const {t}* src_t = &{self.tensor(s.src)}[{flat}];")
        off0 = self.shared_offset(s, dst, first)
        self.w(f"const tc::u32 dst_t = tc::smem_addr(&{self.tensor(dst)}[{off0}]);")
        for k in range(n // nt):
            d_s, d_g = int(d_smem[k, 0]) * size, int(d_glob[k])
            if safe:
                self.w(f"tc::cp_async_16(dst_t + {d_s}u, src_t + {d_g});")
                continue
            idx = self.tile_index(s, [f"({f}) + {int(x[k, 0])}" for f, x in zip(first, d_tile)])
            _, ok = self.global_flat(s.src, idx, s)
            self.w(f"tc::cp_async_16(dst_t + {d_s}u, ({ok}) ? (const void*)(src_t + {d_g}) : "
                   f"(const void*){self.tensor(s.src)}, {ok});")
        self.close()
        self.async_copies = True
        return True

    def _SharedSlice(self, s: SharedSlice) -> None:
        t, base = storage_ctype(s.out.dtype), self.p(s.base)
        if is_packed(s.out.dtype):  # a byte pointer: the slice must start on a byte
            from .subbyte import byte_aligned

            if not byte_aligned(s.out.dtype.bits, s.base):
                raise self.refuse(s, f"a slice of the {s.out.dtype} tensor `{s.src.name}` that "
                                  "may start inside a byte")
            base = f"({base}) * {s.out.dtype.bits} / 8"
        self.w(f"{t}* const {self.tensor(s.out)} = {self.tensor(s.src)} + ({base});  "
               f"// shared_slice")

    def _CopyAsyncCommitGroup(self, s: CopyAsyncCommitGroup) -> None:
        self.w("tc::cp_async_commit();")

    def _CopyAsyncWaitGroup(self, s: CopyAsyncWaitGroup) -> None:
        self.w(f"tc::cp_async_wait<{s.n}>();")

    def _Synchronize(self, s: Synchronize) -> None:
        self.w(self.bar_sync)
        if self.role is None:  # (a role's named barrier does not wait for the other role)
            self.scratch_clean()

    def _Exit(self, s: Exit) -> None:
        self.w("return;")

