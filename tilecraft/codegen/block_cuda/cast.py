"""Fast register casts as CUDA: a `cast` that instruction selection planned (block/select_cast.py)
prints as one call of the device function its plan names (include/tilecraft/fast_cast.cuh),
which converts the thread's whole bit string in registers:

    // cast(wf, out=wf_f16)  (line 12)
    tc::fast_cast_int<4, false, false, 8>(wf_, wf_f16_);  // lop3: 8 elements per 32-bit word

A mixin of `BlockPrinter` (printer.py), before ComputePrinter: its `fast_cast` hook is the first
thing `_Cast` asks (compute.py); without a plan the element-wise form prints.
"""

from __future__ import annotations

from tilecraft.block.compute import BinaryOp, Cast, CastBytes, CastPlanes
from tilecraft.block.select_cast import CastPlan, FusedBytes, FusedCast
from tilecraft.block.select_planes import PlaneCast


class CastPrinter:
    def fused_cast(self, s: BinaryOp) -> bool:
        """Print `s` (a zero point's subtraction, a multiplication by a power of two, a sum of
        bit planes) as the fast cast fused into it; False when it has no such plan."""
        plan = self.plans.get(id(s))
        if isinstance(plan, PlaneCast):
            srcs = [self.tensor(t) for t in plan.srcs] + ["nullptr"] * (3 - len(plan.srcs))
            self.w(f"{plan.func}({', '.join(srcs)}, {self.tensor(s.out)});  // bit planes: "
                   "their fields OR'd under the magic number, one subtraction")
            return True
        if isinstance(plan, FusedBytes):  # each pair's subtrahend: magic + offset + its zeros
            c = plan.cast
            magic = 0x4300 if c.out.dtype.name == "bfloat16" else 0x6400
            codes, zs = self.tensor(plan.codes), f"zs{len(self.lines)}"
            if plan.nibbles:  # (each result's zero: the nibbles' two subtrahend forms)
                zeros = [f"tc::u32({codes}[{k}])" for k in plan.slots]
                self.w(f"const tc::u32 {zs}[{len(zeros)}] = {{{', '.join(zeros)}}};")
            else:
                half = [f"({magic + c.offset}u + tc::u32({codes}[{k}]))" for k in plan.slots]
                pairs = [f"{half[2 * p]} | ({half[2 * p + 1]} << 16)"
                         for p in range(len(half) // 2)]
                self.w(f"const tc::u32 {zs}[{len(pairs)}] = {{{', '.join(pairs)}}};")
            names = [self.tensor(x) for x in c.parts] + ["nullptr"] * (3 - len(c.parts))
            self.w(f"{plan.func}({', '.join(names)}, {zs}, {self.tensor(s.out)});  // "
                   f"{c.dtype} in bytes, then - `{plan.codes.buffer.name}`: each zero point "
                   "joins the magic number")
            return True
        if not isinstance(plan, FusedCast):
            return False
        src = self.tensor(plan.cast.src)
        if plan.codes is not None:  # each result's zero point, from the codes' registers
            codes = self.tensor(plan.codes)
            zk = f"zk{len(self.lines)}"
            self.w(f"const tc::u32 {zk}[{len(plan.slots)}] = "
                   f"{{{', '.join(f'tc::u32({codes}[{k}])' for k in plan.slots)}}};")
            self.w(f"{plan.plan.func}({src}, {self.tensor(s.out)}, {zk});  // cast, then - "
                   f"`{plan.codes.buffer.name}`: each zero point joins the magic number")
            return True
        if plan.scale > 0:
            what = f"* {1 << plan.scale}: the trick's HFMA2 scales"
        elif plan.scale < 0:
            what = f"* 2^{plan.scale}: the trick's own multiply, smaller or gone"
        else:
            what = f"- {plan.zero}: the zero point joins the magic number"
        self.w(f"{plan.plan.func}({src}, {self.tensor(s.out)});  // cast, then {what}")
        return True

    def _CastPlanes(self, s: CastPlanes) -> None:
        """A 6-bit float from its uint2 + uint4 planes in interleaved words, to f16 / bf16 in
        natural order: `tc::fast_cast_float_planes` (anything else is refused)."""
        from tilecraft.layout.permute import interleave_permutation, local_permutation

        t, out, n = s.dtype, s.out.dtype, s.out.layout.local_size
        bottom = -((127 if out.name == "bfloat16" else 15) - t.bias)
        ok = t.bits == 6 and (s.hi.dtype.bits, s.lo.dtype.bits) == (2, 4) and n % 16 == 0 \
            and out.name in ("float16", "bfloat16") and bottom <= s.scale <= 0 and all(
                local_permutation(x.layout, s.out.layout) == interleave_permutation(n, x.dtype.bits)
                for x in (s.hi, s.lo))
        if not ok:
            raise self.refuse(s, f"cast_planes of {t} from {s.hi.dtype} + {s.lo.dtype} planes "
                              f"to {out} times 2^{s.scale} in these layouts (tilecraft casts "
                              "6-bit floats from uint2 + uint4 planes in interleaved words, to "
                              f"f16 or bf16, times 2^s for {bottom} <= s <= 0)")
        bf16 = "true" if out.name == "bfloat16" else "false"
        func = f"tc::fast_cast_float_planes<{t.exponent_bits}, {t.mantissa_bits}, {bf16}, {n}" + \
            (f", {s.scale}>" if s.scale else ">")
        self.w(f"{func}({self.tensor(s.hi)}, {self.tensor(s.lo)}, {self.tensor(s.out)});  "
               "// planes: fields in place, per pair SHF + LOP3 each")

    def _CastBytes(self, s: CastBytes) -> None:
        """6- or 7-bit codes in bytes, to f16 / bf16, from at most three parts of whole words
        a group: ints minus an offset below 128 by `tc::fast_cast_bytes`, floats with 2 or 3
        mantissa bits times 2^S (S <= 0, down to the biases' difference) by
        `tc::fast_cast_bytes_float` (anything else is refused)."""
        t, out, n = s.dtype, s.out.dtype, s.out.layout.local_size
        sizes = [x.layout.local_size * 32 // n for x in s.parts]  # (bytes a group: verified)
        bottom = -((127 if out.name == "bfloat16" else 15) - t.bias) if t.is_float else 0
        kind_ok = (0 <= s.offset < (64 if t.bits == 3 else 128)) if not t.is_float else \
            t.mantissa_bits in (2, 3) and bottom <= s.scale <= 0
        if out.name not in ("float16", "bfloat16") or not kind_ok or len(sizes) > 3 \
                or any(b % 4 for b in sizes):
            raise self.refuse(s, f"cast_bytes of {t} to {out} (offset {s.offset}, scale "
                              f"2^{s.scale}) from parts of {sizes} bytes a group (tilecraft "
                              "casts codes in bytes to f16 or bf16 from at most three parts of "
                              "whole words a group: ints minus 0..127 (3 bits: 0..63), floats "
                              "with 2 or 3 mantissa "
                              f"bits times 2^s for {bottom} <= s <= 0)")
        sizes += [0] * (3 - len(sizes))
        names = [self.tensor(x) for x in s.parts] + ["nullptr"] * (3 - len(s.parts))
        bf16 = "true" if out.name == "bfloat16" else "false"
        parts = f"{sizes[0]}, {sizes[1]}, {sizes[2]}"
        if t.is_float:
            func = f"tc::fast_cast_bytes_float<{t.bits}, {t.exponent_bits}, {bf16}, {n}, " \
                f"{s.scale}, {parts}>"
        elif t.bits == 3:
            func = f"tc::fast_cast_nibbles3<{bf16}, {n}, {s.offset}, {parts}>"
        else:
            func = f"tc::fast_cast_bytes<{t.bits}, {bf16}, {n}, {s.offset}, {parts}>"
        self.w(f"{func}({', '.join(names)}, {self.tensor(s.out)});  "
               f"// {t} in bytes: per word LOP3 + 2 PRMT (+ the subtractions)")

    def fast_cast(self, s: Cast) -> bool:
        """Print `s` by its fast plan; False when it has none."""
        plan = self.plans.get(id(s))
        if not isinstance(plan, CastPlan):
            return False
        per = "pairs of elements" if plan.group == 2 else f"{plan.group} elements per 32-bit word"
        self.w(f"{plan.func}({self.tensor(s.src)}, {self.tensor(s.out)});  // {plan.kind}: {per}")
        return True
