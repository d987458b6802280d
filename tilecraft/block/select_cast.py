"""Selection of fast register casts (Tilus section 7): a `cast` of a register tensor of 1..8-bit
codes to float16 or bfloat16 converts the thread's whole bit string in registers with the bit
tricks of include/tilecraft/fast_cast.cuh instead of one conversion per element.

    cast(b_u4, out=b_f16)     (8 elements per thread)
    -> CastPlan("lop3", group=8, func="tc::fast_cast_int<4, false, false, 8>", count=8)

Kinds (SASS instructions per element, loads and stores included: the difference between
kernels converting 64 and 128 elements per thread; the same on sm_80 and sm_90a):
    prmt   uint8/int8 -> f16: PRMT under 0x64 + HSUB2, 4 per word (1.2 / 1.4)
           uint8/int8 -> bf16: PRMT into an f32's mantissa, FADD, F2FP (2.7 / 2.9)
    lop3   uint4/int4 -> f16 / bf16: LOP3 0x64006400 (0x4300) trick, 8 per word (1.8-2.2);
           uint1, uint2/int2: codes k and k + 16/b in one word's halves, 32/b per word (2.1)
    field  other ints (3, 5, 6, 7 bits): each pair of fields in the halves of a word, OR the
           magic, one subtraction (3.6-4.1)
    float  1..8-bit floats: code at the top of each half, shift, sign-keeping LOP3, one multiply
           (3.3-3.7; 4-bit floats from interleaved words to f16: SHF + LOP3 a pair, 5 more a
           word, and the multiply); float8 NaN (and e5m2 inf) fixed up: e4m3 4.7, e5m2 4.7
           (f16) / 6.7 (bf16); f16 for exponent widths <= 4 and float8_e5m2, bf16 for all
    cvt    float8_e4m3 -> f16 on sm_89+: cvt.rn.f16x2.e4m3x2 per pair of bytes; a thread whose
           codes hold a NaN casts them again by the float trick (the interpreter's NaN bits)
Elements past the last whole word (a local size that is not a multiple of the group) go by
pairs (the field form; 8-bit ints to bf16 one by one through f32). Every kind is bit-exact
with the interpreter (tests/codegen).

The plan is recorded by `select_instructions` (select.py); None (any other pair: f32 results,
16/32-bit sources, ...) leaves the element-wise `tc::cast` of the printer.

A cast into another register order (Cast's `out.layout`, layout/permute.py) takes the fast path
when it undoes `interleave_words` for 1-, 2- and 4-bit integers (the halves of a result word come
from codes k and k + 16/b of a source word: in that order no PRMT puts them in place; `ILV` in
the function's template arguments); other reorderings stay element-wise.

An integer cast whose only reader subtracts a whole constant (a zero point) is one fast cast:
the tricks subtract a magic number anyway, and the zero joins it (exact: `fuse_zero_points`).
Likewise a float cast (no special codes, to f16) whose only reader multiplies by 2^-s, s up to
the biases' difference: the trick multiplies by 2^(difference) anyway, now by 2^(difference -
s), and not at all at the bottom (the quantized matmul folds 2^14 into float4's group scales).

    cast(w, out=w_f16); sub(w_f16, 8.0, out=w_z)
    -> the sub: FusedCast(cast, CastPlan(..., func="tc::fast_cast_int<4, false, false, 64, 8>"))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilecraft import dtypes as dt
from tilecraft.interp.values import store_cast
from tilecraft.ir import Cast as CastExpr
from tilecraft.ir import Const, Expr

from .compute import BinaryOp, Cast

_DESTS = ("float16", "bfloat16")
_SPECIAL = {"float8_e4m3": 1, "float8_e5m2": 2}  # SPECIAL of fast_cast_float: NaN (and inf) codes


@dataclass(frozen=True)
class CastPlan:
    """`cast` by the device function `func` (fast_cast.cuh) on the thread's `count` elements:
    `kind` names the trick, `group` the elements one 32-bit source word feeds (2: by pairs)."""

    kind: str  # "prmt" | "lop3" | "field" | "float" | "cvt"
    group: int
    func: str
    count: int


def select_cast(s: Cast, target=None, zero: int = 0, scale: int = 0) -> CastPlan | None:
    """The fast plan for `s` on `target` (a tilecraft.targets.Target; None: sm_80), or None;
    `zero`: minus that zero point, `scale`: times 2^scale (integer sources; floats: negative,
    `float_headroom`)."""
    count = s.src.layout.local_size
    if s.out.layout == s.src.layout:
        return plan_for(s.src.dtype, s.out.dtype, count, target, zero, scale=scale)
    from tilecraft.layout.permute import interleave_permutation, local_permutation

    bits = s.src.dtype.bits
    if not words_interleave(s.src.dtype) or count % (32 // bits) \
            or local_permutation(s.src.layout, s.out.layout) != interleave_permutation(count, bits):
        return None
    return plan_for(s.src.dtype, s.out.dtype, count, target, zero, interleaved=True, scale=scale)


def words_interleave(t: dt.DataType) -> bool:
    """Whether the fast cast of `t` takes words in `interleave_words` order (then without
    byte permutes): 1-, 2- and 4-bit integers, 4-bit floats without special codes."""
    if t.is_integer:
        return t.bits in (1, 2, 4)
    return t.is_float and t.bits == 4 and t.name not in _SPECIAL


def plan_for(src: dt.DataType, out: dt.DataType, count: int, target=None,
             zero: int = 0, interleaved: bool = False, scale: int = 0) -> CastPlan | None:
    """The plan converting `count` elements of `src` to `out` per thread, or None; `zero` (an
    integer source only) is subtracted from every result, which are then multiplied by
    2^`scale` (1-, 2- and 4-bit integers; floats without special codes to f16, down to minus
    `float_headroom`); `interleaved`: the source's words are in
    `interleave_words` order (1-, 2-, 4-bit integers, whole words), the results natural."""
    if out.name not in _DESTS or src.bits > 8 or src.is_bool or count < 1:
        return None
    if target is not None and tuple(target.compute_capability) < (8, 0):
        return None  # fma.rn.bf16x2 is sm_80's
    bf16 = out.name == "bfloat16"
    flag = "true" if bf16 else "false"
    if src.is_integer:
        signed = "true" if src.kind == "int" else "false"
        if scale and src.bits not in (1, 2, 4):
            return None
        args = [str(zero), "true" if interleaved else "false", str(scale)]
        while args and args[-1] in ("0", "false"):  # (the template's defaults)
            args.pop()
        tail = "".join(f", {a}" for a in args)
        func = f"tc::fast_cast_int<{src.bits}, {signed}, {flag}, {count}{tail}>"
        kind, group = {8: ("prmt", 4), 4: ("lop3", 8), 2: ("lop3", 16),
                       1: ("lop3", 32)}.get(src.bits, ("field", 2))
        return CastPlan(kind, group, func, count)
    e, m = src.exponent_bits, src.mantissa_bits
    special = _SPECIAL.get(src.name, 0)
    if interleaved and not words_interleave(src):
        return None
    if not bf16 and not (e <= 4 or src.name == "float8_e5m2"):
        return None  # exponent fields of 5+ bits overflow f16 (custom E=5 reaches 2^16)
    if scale and not -float_headroom(src, out) <= scale < 0:
        return None
    if (src.name == "float8_e4m3" and not bf16 and not interleaved and not scale
            and target is not None and tuple(target.compute_capability) >= (8, 9)):
        return CastPlan("cvt", 2, f"tc::fast_cast_e4m3_cvt<{count}>", count)
    args = ["true" if interleaved else "false", str(scale)]
    while args and args[-1] in ("0", "false"):  # (the template's defaults)
        args.pop()
    tail = "".join(f", {a}" for a in args)
    func = f"tc::fast_cast_float<{e}, {m}, {special}, {flag}, {count}{tail}>"
    return CastPlan("float", 2, func, count)


def float_headroom(src: dt.DataType, out: dt.DataType) -> int:
    """s such that the float trick's casts of `src` to f16 times 2^-s cost one multiply less
    (`DataType.f16_headroom`: its codes placed in an f16 are the values times 2^-s), for
    floats without special codes; 0 for the rest (bf16: the values would be subnormal)."""
    return src.f16_headroom if out.name == "float16" else 0


@dataclass(frozen=True)
class FusedCast:
    """`out = cast(src) - zero` or `out = cast(src) * 2^scale` (the plan of that instruction;
    the cast is fused into it): one fast integer cast whose magic subtrahend includes the
    integer `zero`, or whose scaling HFMA2 includes the power of two."""

    cast: Cast
    plan: CastPlan
    zero: int
    scale: int = 0
    codes: Any = None  # zero points per element: this integer register tensor (`fused_codes`)
    slots: tuple = ()  # for each result, the register of `codes` holding its zero


def zero_point_limit(src: dt.DataType, out: dt.DataType) -> int:
    """Offset (zero plus the signed bias) bound below which `(magic + x) - (magic + offset)` is
    exact in `out`: the f16 high nibbles of 4-bit codes keep a 1/16 ulp at 64 (fast_cast.cuh)."""
    if out.name == "bfloat16":
        return 128 if src.bits < 8 else 1024  # (8 bits go through f32: rounded once)
    return 64 if src.bits == 4 else 1024


def fused_reader(sub: BinaryOp, cast: Cast, plan: CastPlan, target=None) -> FusedCast | None:
    """The fused plan for `sub` = `cast.out - c` with c a whole constant the fast cast of an
    integer type can absorb exactly, or `cast.out * 2^s` (1 <= s <= 7) of 1-, 2- or 4-bit
    codes, or `cast.out * 2^-s` (1 <= s <= `float_headroom`) of floats without special codes to
    f16 (exact: the values times 2^-s are what the trick makes before its multiply); else
    None."""
    if not isinstance(sub, BinaryOp) or sub.op not in ("-", "*") or sub.a != cast.out:
        return None
    value = _constant(sub.b)
    src = cast.src.dtype
    if value is None or sub.out.dtype != cast.out.dtype \
            or float(store_cast(sub.out.dtype, value)) != value:  # (the VM rounds it first)
        return None
    if plan.func.startswith("tc::fast_cast_float") and sub.op == "*" and 0 < value < 1:
        s = -(int(1 / value).bit_length() - 1)
        if value != 2.0 ** s or -s > float_headroom(src, cast.out.dtype):
            return None
        fused = select_cast(cast, target, scale=s)
        return FusedCast(cast, fused, 0, s) if fused is not None else None
    if not plan.func.startswith("tc::fast_cast_int") or value != int(value):
        return None
    if sub.op == "*":
        s = int(value).bit_length() - 1
        top = 7 if cast.out.dtype.name == "bfloat16" else 5  # ((magic + T) 2^s stays finite)
        if value < 2 or int(value) != 1 << s or s > top or src.bits not in (1, 2, 4):
            return None
        fused = select_cast(cast, target, scale=s)
        return FusedCast(cast, fused, 0, s) if fused is not None else None
    offset = int(value) + (1 << (src.bits - 1) if src.kind == "int" else 0)
    if not 0 <= offset < zero_point_limit(src, cast.out.dtype) or int(value) == 0:
        return None
    fused = select_cast(cast, target, zero=int(value))
    return FusedCast(cast, fused, int(value)) if fused is not None else None


_CODES = {(1, "float16"), (2, "float16"), (4, "float16"), (8, "float16"), (1, "bfloat16"),
          (2, "bfloat16"), (4, "bfloat16")}  # (bits, out) fast_cast_int_z takes


def zero_codes_limit(src: dt.DataType, out: dt.DataType) -> int:
    """The bound below which `fast_cast_int_z` subtracts zero points exactly: `zero_point_limit`
    for 4 and 8 bits; 1- and 2-bit codes' subtrahends 2^(m - b j) + z stay in their field's
    binade up to the window's top field j = W - 1 (fast_cast.cuh `narrow_z_limit`: W = 4, or 2
    for uint2 to bf16): 128 / 16 for uint1 to f16 / bf16, 16 / 32 for uint2."""
    if src.bits <= 2:
        bf16 = out.name == "bfloat16"
        window = 2 if src.bits == 2 and bf16 else 4
        return 1 << ((7 if bf16 else 10) - src.bits * (window - 1))
    return zero_point_limit(src, out)


def fused_codes(sub: BinaryOp, cast: Cast, plan: CastPlan, made: dict) -> FusedCast | None:
    """The fused plan for `sub` = `cast.out - cast(codes)` with `codes` unsigned integers each
    result's zero point (broadcast), provably below the trick's limit (`zero_codes_limit`):
    `codes = x & m` (`made`: the instruction that wrote each tensor) or of a type that narrow;
    1-, 2-, 4- and 8-bit unsigned codes to f16, 1-, 2- and 4-bit to bf16 (`fast_cast_int_z`:
    the quantized matmul's per-group zeros); else None."""
    src, out = cast.src.dtype, cast.out.dtype
    zeros = _zero_codes(sub, cast.out, made)
    if zeros is None or src.kind != "uint" or (src.bits, out.name) not in _CODES \
            or not plan.func.startswith("tc::fast_cast_int<"):
        return None
    codes, top, slots = zeros
    if top >= zero_codes_limit(src, out) or plan.count % (32 // src.bits):
        return None
    ilv = "true" if plan.func.rstrip(">").split(", ")[5:6] == ["true"] else "false"
    bf16 = ", true" if out.name == "bfloat16" else ""
    func = f"tc::fast_cast_int_z<{src.bits}, {plan.count}, {ilv}{bf16}>"
    return FusedCast(cast, CastPlan(plan.kind, plan.group, func, plan.count), 0, codes=codes,
                     slots=slots)


@dataclass(frozen=True)
class FusedBytes:
    """`out = cast_bytes(...) - cast(codes)`: integer codes in bytes minus per-element whole
    zero points, one `fast_cast_bytes_z` whose per-pair subtrahends hold them, or for 3-bit
    codes in nibbles one `fast_cast_nibbles3_z` given each result's zero (`slots`: for each
    result, the register of `codes` holding its zero point)."""

    cast: Any  # the CastBytes
    codes: Any
    slots: tuple
    func: str
    nibbles: bool = False  # (the zeros per result, not the pairs' subtrahends)


def fused_bytes_codes(sub: BinaryOp, cast: Any, made: dict) -> FusedBytes | None:
    """The fused plan for `sub` = `cast.out - cast(codes)` with `cast` a `cast_bytes` of 3-, 6-
    or 7-bit integer codes to f16 / bf16 and `codes` unsigned integers (each result's zero
    point, broadcast) that, with the cast's offset, stay below 128 (3 bits to f16: 64, the high
    nibbles' -(64 + T)) (`x & m`, as in `fused_codes`); else None."""
    out = cast.out.dtype
    zeros = _zero_codes(sub, cast.out, made)
    if zeros is None or cast.dtype.is_float or out.name not in ("float16", "bfloat16"):
        return None
    codes, top, slots = zeros
    n = cast.out.layout.local_size
    sizes = [x.layout.local_size * 32 // n for x in cast.parts]
    nibbles = cast.dtype.bits == 3
    limit = 64 if nibbles and out.name == "float16" else 128
    if not 0 <= cast.offset < limit - top or len(sizes) > 3 or any(b % 4 for b in sizes):
        return None
    sizes += [0] * (3 - len(sizes))
    bf16 = "true" if out.name == "bfloat16" else "false"
    if nibbles:
        func = f"tc::fast_cast_nibbles3_z<{bf16}, {n}, {cast.offset}, " \
            f"{sizes[0]}, {sizes[1]}, {sizes[2]}>"
    else:
        func = f"tc::fast_cast_bytes_z<{cast.dtype.bits}, {bf16}, {n}, " \
            f"{sizes[0]}, {sizes[1]}, {sizes[2]}>"
    return FusedBytes(cast, codes, slots, func, nibbles)


def _zero_codes(sub: BinaryOp, result: Any, made: dict) -> tuple | None:
    """(codes, their largest value, slots) where `sub` = `result - cast(codes)` in result's
    type and layout, `codes` an unsigned integer register tensor (`_largest`) broadcast the
    same way in every thread (slots: for each of result's registers, the register of `codes`
    holding its value); else None."""
    from tilecraft.block.broadcast import broadcast_slots

    from .tensors import RegisterTensor

    if not isinstance(sub, BinaryOp) or sub.op != "-" or sub.a != result \
            or sub.out.dtype != result.dtype or sub.out.layout != result.layout \
            or not isinstance(sub.b, RegisterTensor):
        return None
    zf = made.get(sub.b)
    if not isinstance(zf, Cast) or zf.out.dtype != result.dtype \
            or zf.out.layout != zf.src.layout:
        return None
    codes = zf.src
    top = _largest(codes, made)
    if top is None:
        return None
    slots = broadcast_slots(result.layout, codes.layout)
    if (slots < 0).any() or not (slots == slots[0]).all():
        return None
    return codes, top, tuple(int(x) for x in slots[0])


def _largest(codes, made: dict) -> int | None:
    """The largest value `codes` (an unsigned integer register tensor) can hold: m for
    `x & m`, else its type's; None for other types."""
    t = codes.dtype
    if not t.is_integer or t.kind != "uint" or t.bits not in (8, 16, 32):  # (not packed)
        return None
    top = (1 << t.bits) - 1
    mask = made.get(codes)
    if isinstance(mask, BinaryOp) and mask.op == "&" and mask.out == codes:
        m = _constant(mask.b) if not hasattr(mask.b, "layout") else None
        if m is not None and m == int(m) and m >= 0:
            top = min(top, int(m))
    return top


def _constant(e: Expr) -> float | None:
    """The value of a (possibly converted) numeric constant, else None."""
    if isinstance(e, CastExpr) and isinstance(e.value, Const):
        e = e.value
    if isinstance(e, Const) and not isinstance(e.value, bool):
        return float(e.value)
    return None
