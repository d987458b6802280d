"""Computation of block programs as CUDA: element-wise ops with broadcasting, casts, fills,
dot (mma.sync when selected: mma.py; else staged through shared memory) and reductions. A mixin of
`BlockPrinter` (printer.py).

Packed register tensors (subbyte.py) are read and written element by element through their bit
fields (`reg_get` / `reg_set`); a `cast` first asks `fast_cast` (a planned in-register
conversion, codegen/block_cuda/cast.py), else converts element by element with `tc::cast`
(lowbit.cuh's codecs for packed types). `view` copies the thread's bits."""

from __future__ import annotations

import math

from tilecraft.block import BinaryOp, Cast, Dot, Fill, Fma, ReduceRegister, RegisterTensor, UnaryOp
from tilecraft.block.compute import elementwise_expr
from tilecraft.interp.ops.reduce import accumulator_dtype
from tilecraft.ir import Var

from ..cuda.cexpr import ctype, zero
from ..cuda.indexing import frag_coords
from .mma import MmaPrinter
from .text import convert

_COMBINE = {"sum": "{a} + {b}", "abssum": "{a} + {b}", "max": "tc::maximum<{t}>({a}, {b})",
            "absmax": "tc::maximum<{t}>({a}, {b})", "min": "tc::minimum<{t}>({a}, {b})"}


class ComputePrinter(MmaPrinter):
    def elementwise(self, op: str, operands, out: RegisterTensor, s=None) -> None:
        args = []
        for o in operands:
            if isinstance(o, RegisterTensor):
                v = Var.create(f"e{len(args)}", o.dtype)
                self.elem[v] = self.reg_get(o, self.broadcast_slot(s, o, out))
                args.append(v)
            else:
                args.append(o)
        self.per_register(out)
        self.w(self.reg_set(out, "li", self.p(elementwise_expr(op, tuple(args)))))
        self.close()

    def broadcast_slot(self, s, o: RegisterTensor, out: RegisterTensor) -> str:
        """`li`, or for an operand broadcast to out's shape the register of it that element li
        of out reads (the same on every thread: a constant table the unrolled loop folds)."""
        if tuple(o.shape) == tuple(out.shape):
            return "li"
        from tilecraft.block.broadcast import broadcast_slots

        slots = broadcast_slots(out.layout, o.layout)
        if not (slots == slots[0]).all():
            raise self.refuse(s, f"a broadcast of `{o.buffer.name}` whose registers differ "
                                 "between threads")
        name = f"bslot{len(self.lines)}"
        self.w(f"const int {name}[{len(slots[0])}] = {{{', '.join(map(str, slots[0]))}}};")
        return f"{name}[li]"

    def _BinaryOp(self, s: BinaryOp) -> None:
        if self.fused_cast(s):
            return
        self.elementwise(s.op, (s.a, s.b), s.out, s)

    def _Fma(self, s: Fma) -> None:
        self.elementwise("fma", (s.a, s.b, s.c), s.out, s)

    def _UnaryOp(self, s: UnaryOp) -> None:
        self.elementwise(s.op, (s.src,), s.out)

    def fused_cast(self, s: BinaryOp) -> bool:
        """Print `s` as a planned cast minus a zero point; False here (cast.py overrides it)."""
        return False

    def fast_cast(self, s: Cast) -> bool:
        """Print `s` as a planned in-register conversion; False here (no plan: element-wise).
        The fast-cast mixin (cast.py), before this one in BlockPrinter, overrides it."""
        return False

    def _Cast(self, s: Cast) -> None:
        if self.fast_cast(s):
            return
        slot = "li"
        if s.out.layout != s.src.layout:  # another register order (the same in every thread)
            from tilecraft.layout.permute import local_permutation

            slot = f"perm{len(self.lines)}"
            perm = local_permutation(s.src.layout, s.out.layout)
            self.w(f"const int {slot}[{len(perm)}] = {{{', '.join(map(str, perm))}}};")
            slot += "[li]"
        self.per_register(s.out)
        value = f"tc::cast<{ctype(s.out.dtype)}>({self.reg_get(s.src, slot)})"
        self.w(self.reg_set(s.out, "li", value))
        self.close()

    def _View(self, s) -> None:
        """Each thread's bits, relabelled: a byte copy between its register arrays (the verifier
        checked the bits per thread are equal; the compiler keeps it in registers). Packed
        arrays are whole words, at least as long as the bits copied; bytes past them stay as
        declared (zero): nothing reads bits past an array's last element."""
        from .subbyte import nbytes

        n = nbytes(s.src.layout.local_size, s.src.dtype.bits)
        self.w(f"memcpy({self.tensor(s.out)}, {self.tensor(s.src)}, {n});  // view")

    def _Fill(self, s: Fill) -> None:
        self.per_register(s.out)
        self.w(self.reg_set(s.out, "li", self.cast(s.out.dtype, s.value)))
        self.close()

    def scratch_base(self, s, nbytes: int) -> str:
        """Where instruction `s` stages `nbytes` of shared memory: the dead bytes of the arena
        the plan reserved for it (block/smem_plan.py; insert_barriers ordered its reads with the
        accesses after it), else the scratch area after the arena."""
        got = self.smem_plan.scratch_at(s) if s is not None and self.smem_plan else None
        if got is not None and got[1] >= nbytes:
            return str(got[0])
        if self.role == "producer":  # (the consumer's threads use the same areas meanwhile)
            from tilecraft.diagnostics import TilecraftError

            raise TilecraftError("TC603", getattr(s, "span", None), instr="warp_roles",
                                 detail="the producer role stages registers through the "
                                 "scratch area, which the consumer role uses at the same time")
        if self.scratch_read["SCRATCH"] and not self.scratch_read["SCRATCH_B"]:
            self.scratch_b = max(self.scratch_b, nbytes)
            return "SCRATCH_B"  # (no barrier: the other area's reads are behind one)
        self.scratch = max(self.scratch, nbytes)
        return "SCRATCH"

    def scratch_needs(self, base: str, nbytes: int) -> None:
        """Area `base` (a stage's) holds `nbytes` from its start."""
        if base == "SCRATCH_B":
            self.scratch_b = max(self.scratch_b, nbytes)
        elif base == "SCRATCH":
            self.scratch = max(self.scratch, nbytes)

    def stage(self, tensors: list[RegisterTensor], owner=None) -> list[str]:
        """Write register tensors row-major into the scratch area (after a barrier; `owner`:
        the instruction, whose reserved bytes are used when the plan has some); returns their
        pointers (the area's offset: `stage_base`). Replicas write the same values."""
        base = self.stage_base = self.scratch_base(owner, staged_bytes(tensors))
        self.before_scratch(base)
        ptrs, off = [], 0
        for t in tensors:
            p = f"stage{len(ptrs)}"
            shape = [int(d) for d in t.shape]
            self.w(f"{ctype(t.dtype)}* {p} = reinterpret_cast<{ctype(t.dtype)}*>(tc_smem + "
                   f"{base} + {off});")
            self.per_register(t)
            c = frag_coords(t.layout, "tid", "li")
            flat = c[0]
            for i, n in zip(c[1:], shape[1:]):
                flat = f"({flat}) * {n} + {i}"
            self.w(f"{p}[{flat}] = {self.tensor(t)}[li];")
            self.close()
            off += -(-math.prod(shape) * t.dtype.bits // 8 // 16) * 16
            ptrs.append(p)
        self.w(self.bar_sync)
        self.after_scratch(base)
        return ptrs

    def before_scratch(self, base: str) -> None:
        """The barrier before writing staging area `base`, unless it is one of the two scratch
        areas after the arena (touched by staging code alone) and no thread may have read it
        since the last barrier of the whole block. Dead bytes of the arena keep it: the tensors
        that had them are ordered by insert_barriers, which sees the staging reads only."""
        if not self.scratch_read.get(base, True) and self.role is None:
            return
        self.w(f"{self.bar_sync}  // the scratch area may still be read")
        if self.role is None:
            self.scratch_clean()

    def after_scratch(self, base: str) -> None:
        """After the barrier that follows the writes: the threads read staging area `base`, and
        the other area's earlier reads are done."""
        if self.role is None:
            self.scratch_clean()
        if base in self.scratch_read:
            self.scratch_read[base] = True

    def _Dot(self, s: Dot) -> None:
        plan = self.plans.get(id(s))
        if type(plan).__name__ == "FromSharedPlan":
            return self.mma_from_shared(s, plan)
        if plan is not None:
            return self.mma(s, plan)
        (m, k), n = (int(x) for x in s.a.shape), int(s.b.shape[1])
        self.open("")
        a, b = self.stage([s.a, s.b])
        self.per_register(s.out)
        i, j = frag_coords(s.out.layout, "tid", "li")
        t = ctype(s.c.dtype)
        self.w(f"{t} acc = {self.tensor(s.c)}[li];")
        self.w(f"for (int k = 0; k < {k}; ++k) acc += tc::cast<{t}>({a}[({i}) * {k} + k]) * "
               f"tc::cast<{t}>({b}[k * {n} + {j}]);")
        self.w(f"{self.tensor(s.out)}[li] = acc;")
        self.close()
        self.close()
        del m

    def _ReduceRegister(self, s: ReduceRegister) -> None:
        if self.reduce_by_shuffles(s):
            return
        self.reduce_staged(s)

    def reduce_by_shuffles(self, s: ReduceRegister) -> bool:
        """The CUDA emitter's reduction on the block program's layouts (emit_reduce.py): each
        thread folds its registers per output register, butterfly shuffles combine the lanes of
        a row, and rows that span warps combine through the scratch area. False when the layouts
        do not allow it (the staged form then)."""
        from .text import combine as _combine
        from .text import identity as _init

        form = shuffle_form(s)
        if form is None:
            return False
        lane, warp, m = form
        src, out = s.src.layout, s.out.layout
        acc = accumulator_dtype(s.src.dtype, s.out.dtype)
        t = ctype(acc)
        n, nt = out.local_size, self.program.num_threads
        x = convert(t, f"{self.tensor(s.src)}[li]", ctype(s.src.dtype))
        if s.kind in ("abssum", "absmax"):
            x = f"({x} < {zero(t)} ? -{x} : {x})"
        self.w(f"// {s.kind} over dim {s.dim}: shuffles {lane}, across warps {warp}")
        self.open("")
        self.w(f"{t} red[{n}];")
        self.w(f"for (int j = 0; j < {n}; ++j) red[j] = {_init(s.kind, t)};")
        self.w("#pragma unroll")
        self.w(f"for (int li = 0; li < {src.local_size}; ++li) red[{m}] = "
               f"{_combine(s.kind, t, f'red[{m}]', x)};")
        self.w("#pragma unroll")
        self.open(f"for (int j = 0; j < {n}; ++j)")
        def shuffle(o: int) -> None:
            partner = f"__shfl_xor_sync(0xffffffffu, red[j], {o})"
            self.w(f"red[j] = {_combine(s.kind, t, 'red[j]', partner)};")

        for o in lane:
            shuffle(o)
        self.close()
        if warp:  # one partial per warp and row, through the scratch area (after a barrier)
            base = self.scratch_base(s, n * nt * acc.bits // 8)
            self.before_scratch(base)
            self.w(f"{t}* scratch = reinterpret_cast<{t}*>(tc_smem + {base});")
            self.w(f"for (int j = 0; j < {n}; ++j) scratch[j * {nt} + tid] = red[j];")
            self.w(self.bar_sync)
            self.after_scratch(base)
            pick = " | ".join(f"((tid & {lo}) << {(wo // lo).bit_length() - 1})"
                              for lo, wo in zip(lane, warp))
            self.w(f"const int rbase = tid & ~{sum(warp)}, pick = {pick};")
            self.open(f"for (int j = 0; j < {n}; ++j)")
            self.w(f"red[j] = scratch[j * {nt} + rbase + pick];")
            for lo in lane[:len(warp)]:
                shuffle(lo)
            self.close()
        o = self.tensor(s.out)
        ot = ctype(s.out.dtype)
        if s.clear:
            self.w(f"for (int j = 0; j < {n}; ++j) {o}[j] = {convert(ot, 'red[j]', t)};")
        else:
            old = convert(t, f"{o}[j]", ot)
            new = convert(ot, _combine(s.kind, t, old, "red[j]"), t)
            self.w(f"for (int j = 0; j < {n}; ++j) {o}[j] = {new};")
        self.close()
        return True

    def reduce_staged(self, s: ReduceRegister) -> None:
        acc = accumulator_dtype(s.src.dtype, s.out.dtype)
        t = ctype(acc)
        shape = [int(d) for d in s.src.shape]
        self.open("")
        (src,) = self.stage([s.src], owner=s)
        self.per_register(s.out)
        kept = frag_coords(s.out.layout, "tid", "li")
        if len(kept) == len(shape):  # keepdim: the reduced dimension has extent 1
            kept = [c for d, c in enumerate(kept) if d != s.dim]
        idx = list(kept)
        idx.insert(s.dim, "r")
        flat = idx[0]
        for x, n in zip(idx[1:], shape[1:]):
            flat = f"({flat}) * {n} + {x}"
        x = convert(t, f"{src}[{flat}]", ctype(s.src.dtype))
        if s.kind in ("abssum", "absmax"):
            x = f"({x} < {zero(t)} ? -{x} : {x})"
        comb = _COMBINE[s.kind]
        ident = {"max": f"tc::lowest<{t}>()", "absmax": f"tc::lowest<{t}>()",
                 "min": f"tc::highest<{t}>()"}.get(s.kind, zero(t))
        # as the CUDA emitter and the interpreter: fold the row, then combine with the old value
        self.w(f"{t} acc = {ident};")
        self.w(f"for (int r = 0; r < {shape[s.dim]}; ++r) acc = {comb.format(a='acc', b=x, t=t)};")
        if not s.clear:
            old = convert(t, f"{self.tensor(s.out)}[li]", ctype(s.out.dtype))
            self.w(f"acc = {comb.format(a=old, b='acc', t=t)};")
        self.w(f"{self.tensor(s.out)}[li] = {convert(ctype(s.out.dtype), 'acc', t)};")
        self.close()
        self.close()


def staged_bytes(tensors) -> int:
    """Bytes `ComputePrinter.stage` writes `tensors` in (each from a 16-byte boundary)."""
    return sum(-(-math.prod(int(d) for d in t.shape) * t.dtype.bits // 8 // 16) * 16
               for t in tensors)


def shuffle_form(s: ReduceRegister):
    """(lane offsets, warp offsets, C register map) of the shuffle form of reduction `s`, or None
    when its layouts need the staged form."""
    from ..cuda.indexing import local_map
    from .text import cross_warp_modes, xor_offsets

    src, out = s.src.layout, s.out.layout
    keep = tuple(d for d in range(src.ndim) if d != s.dim)
    dst_map = out.reduce(s.dim, keepdim=False) if out.ndim == src.ndim else out
    offs = xor_offsets(cross_warp_modes(src, s.dim))
    if offs is None or out.num_threads != src.num_threads:
        return None
    try:
        m = local_map(src, dst_map, keep, s.span) if keep else "0"
    except Exception:  # noqa: BLE001 (registers not affine: the staged form)
        return None
    lane = [o for o in offs if o < 32]
    warp = [o for o in offs if o >= 32]
    if warp and len(lane) < len(warp):
        return None
    return lane, warp, m


def reduction_scratch(num_threads: int, partials: bool = True):
    """For the arena planner (block/smem_plan.py): the bytes of shared memory an instruction
    of a `num_threads`-thread program stages through when printed here, for reductions (the
    partials of rows that span warps, unless `partials` is False, or the staged tile); 0 for
    the other instructions, which keep the scratch areas after the arena."""

    def need(s) -> int:
        if not isinstance(s, ReduceRegister):
            return 0
        form = shuffle_form(s)
        if form is None:
            return staged_bytes([s.src])
        acc = accumulator_dtype(s.src.dtype, s.out.dtype)
        n = s.out.layout.local_size * num_threads * acc.bits // 8 if form[1] else 0
        return n if partials else 0

    return need
