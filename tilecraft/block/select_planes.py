"""Selection of bit-plane sums: quant/qmm.py stores 5-bit integers (and until session 24 3-, 6-
and 7-bit ones) as 1-, 2- and 4-bit planes and adds them back after casting each
(`cast(hi) * 2^s + cast(lo) - T`). When every plane is a fast cast of interleaved words into
the same registers, the sum prints as one `tc::fast_cast_planes` (fast_cast.cuh): two (or
4 + 2 + 1) planes to f16 each masked in place under the magic number and combined by HFMA2s (no
addition of their own), else the planes' fields OR'd into one code under the magic and one
subtraction; instead of a trick per plane and an addition.

    cast(p2, out=f); mul(f, 2.0, out=g); cast(p1, out=h); sub(h, 4.0, out=k); add(g, k, out=w)
    -> the add: PlaneCast(srcs=(p2, p1), func="tc::fast_cast_planes<2, 1, 0, false, 32, 4>")

Exact, as the VM computes it: every term and every partial sum is a whole number below 1024 (the
planes cover the bits [0, 7) once each, T below the magic's exact range)."""

from __future__ import annotations

from dataclasses import dataclass

from .compute import BinaryOp, Cast
from .select_cast import CastPlan, FusedCast
from .tensors import RegisterTensor


@dataclass(frozen=True)
class PlaneCast:
    """`add` printed as `func(srcs..., out)`: the planes' packed words, most significant first;
    `parts`: ids of the instructions it replaces (the casts, their fused readers, inner adds)."""

    srcs: tuple
    func: str
    parts: tuple


@dataclass(frozen=True)
class _Term:
    cast: Cast
    scale: int  # the plane's weight 2^scale
    zero: int  # subtracted from it


def plane_sum(add: BinaryOp, at: int, stmts: list, plans: dict, readers: dict,
              writers: dict) -> PlaneCast | None:
    """The plan of `add` (stmts[at]) as one sum of bit planes, or None. `writers`: tensor ->
    [(index, instruction)] writing it in `stmts`; `readers`: tensor -> its readers anywhere."""
    if not isinstance(add, BinaryOp) or add.op != "+" or add.out.dtype.name not in (
            "float16", "bfloat16"):
        return None
    terms: list[_Term] = []
    parts: list[int] = []
    if not _collect(add, at, stmts, plans, readers, writers, terms, parts) or len(terms) > 3:
        return None
    terms.sort(key=lambda t: -t.scale)
    count = terms[0].cast.src.layout.local_size
    bits = [t.cast.src.dtype.bits for t in terms]
    place = 0
    for t, b in zip(reversed(terms), reversed(bits)):  # the planes tile [0, total) once
        if t.scale != place:
            return None
        place += b
    zero = sum(t.zero for t in terms)
    out = add.out.dtype
    limit = 128 if out.name == "bfloat16" else 1024  # (magic + T exact: fast_cast_planes)
    if place > 7 or not 0 <= zero < limit \
            or any(t.cast.src.layout.local_size != count or count % (32 // b)
                   for t, b in zip(terms, bits)):
        return None
    args = [*bits, *([0] * (3 - len(bits))), "true" if out.name == "bfloat16" else "false", count]
    tail = f", {zero}" if zero else ""
    func = f"tc::fast_cast_planes<{', '.join(map(str, args))}{tail}>"
    return PlaneCast(tuple(t.cast.src for t in terms), func, tuple(parts))


def _collect(add: BinaryOp, at: int, stmts, plans, readers, writers, terms, parts) -> bool:
    """Add `add`'s two operands to `terms` (each a plane's cast, times 2^s or minus a zero,
    or an inner sum of them), their instructions to `parts`; False where one is something
    else, is read elsewhere too, or its plane's words change before `add`."""
    for x in (add.a, add.b):
        if not isinstance(x, RegisterTensor) or x.layout != add.out.layout \
                or x.dtype != add.out.dtype or readers.get(x) != [add]:
            return False
        before = [(i, w) for i, w in writers.get(x, ()) if i < at]
        if not before:
            return False
        i, w = before[-1]
        plan = plans.get(id(w))
        if isinstance(w, BinaryOp) and w.op == "+" and plan is None:
            if not _collect(w, i, stmts, plans, readers, writers, terms, parts):
                return False
            parts.append(id(w))
            continue
        if isinstance(w, Cast) and isinstance(plan, CastPlan):
            term, made, func = _Term(w, 0, 0), [w], plan.func
        elif isinstance(w, BinaryOp) and isinstance(plan, FusedCast) and plan.codes is None \
                and plan.scale >= 0:
            term, made, func = _Term(plan.cast, plan.scale, plan.zero), [w, plan.cast], \
                plan.plan.func
        else:
            return False
        cast = term.cast
        src = cast.src.dtype
        if src.kind != "uint" or src.bits not in (1, 2, 4) or cast.out.layout == cast.src.layout \
                or not func.startswith("tc::fast_cast_int<"):
            return False  # (a fast cast from interleaved words: it reorders the registers)
        start = next((k for k, s in enumerate(stmts) if s is cast), None)
        if start is None or any(start < k < at for k, _ in writers.get(cast.src, ())):
            return False
        terms.append(term)
        parts.extend(id(m) for m in made)
    return True
