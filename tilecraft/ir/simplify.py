"""A small linear simplifier for index expressions.

Index expressions in kernels are mostly affine in the loop and block variables
(`(bx + 1) * 128 - bx * 128`). `linear_form` writes such an expression as a map from
non-linear atoms to integer coefficients plus a constant; `simplify` rebuilds a canonical
expression from it, so slice extents and bounds checks fold to constants.

    simplify((bx + 1) * 128 - bx * 128)  ->  Const(128)

A cast between integer types is looked through only where it keeps every value (a wider type
of the same signedness, or a signed one wider than an unsigned source); a narrowing or
sign-changing cast is an atom, since it wraps. The rebuilt expression computes in the
original's type (atoms of another type are cast to it; negative terms of unsigned types are
subtracted), and an expression that does not rebuild is returned unchanged.
"""

from __future__ import annotations

from tilecraft.diagnostics import TilecraftError

from .expr import BinOp, Cast, Const, Expr, as_expr, cast, const_int

LinearForm = tuple[dict[Expr, int], int]


def _keeps_values(src, dst) -> bool:
    """Whether converting integer type `src` to `dst` keeps every value of `src`."""
    if src.kind == dst.kind:
        return dst.bits >= src.bits
    return src.kind == "uint" and dst.kind == "int" and dst.bits > src.bits


def linear_form(e) -> LinearForm | None:
    """`e` as ({atom: coeff}, const) when it is affine with integer coefficients."""
    e = as_expr(e)
    if e.dtype.is_float:
        return None
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, Cast) and not e.value.dtype.is_float:
        if _keeps_values(e.value.dtype, e.dtype):
            return linear_form(e.value)
        return {e: 1}, 0
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        la, lb = linear_form(e.a), linear_form(e.b)
        if la is None or lb is None:
            return None
        sign = 1 if e.op == "+" else -1
        terms = dict(la[0])
        for k, v in lb[0].items():
            terms[k] = terms.get(k, 0) + sign * v
        return {k: v for k, v in terms.items() if v}, la[1] + sign * lb[1]
    if isinstance(e, BinOp) and e.op == "*":
        ca, cb = const_int(e.a), const_int(e.b)
        if ca is not None or cb is not None:
            c, other = (ca, e.b) if ca is not None else (cb, e.a)
            lo = linear_form(other)
            if lo is None:
                return None
            return {k: v * c for k, v in lo[0].items() if v * c}, lo[1] * c
    return {e: 1}, 0


def from_linear(form: LinearForm, dtype=None) -> Expr:
    """An expression of `form`, computing in `dtype` when given (atoms of another type cast to
    it; negative coefficients and constants of an unsigned type as subtractions)."""
    terms, c = form
    unsigned = dtype is not None and dtype.kind == "uint"
    out: Expr | None = None
    for atom, coeff in sorted(terms.items(), key=lambda t: t[1] < 0):  # (positive terms first)
        if dtype is not None and atom.dtype != dtype:
            atom = cast(dtype, atom)
        if unsigned and coeff < 0 and out is not None:
            term = atom if coeff == -1 else BinOp.create("*", atom, -coeff)
            out = BinOp.create("-", out, term)
            continue
        term = atom if coeff == 1 else BinOp.create("*", atom, coeff)
        out = term if out is None else BinOp.create("+", out, term)
    if out is None:
        return Const.create(c) if dtype is None else Const.create(c, dtype)
    if unsigned and c < 0:
        return BinOp.create("-", out, -c)
    return BinOp.create("+", out, c) if c else out


def simplify(e) -> Expr:
    """Canonicalize an integer affine expression; other expressions come back unchanged (and
    so does one whose canonical form would not build, e.g. a leading negative term of an
    unsigned type, or one whose type would change)."""
    e = as_expr(e)
    form = linear_form(e)
    if form is None:
        return e
    try:
        out = from_linear(form, e.dtype)
    except TilecraftError:
        return e
    return out if out.dtype == e.dtype else e


def const_difference(a, b) -> int | None:
    """`a - b` when it is a compile-time integer, else None."""
    fa, fb = linear_form(a), linear_form(b)
    if fa is None or fb is None:
        return None
    terms = dict(fa[0])
    for k, v in fb[0].items():
        terms[k] = terms.get(k, 0) - v
    if any(terms.values()):
        return None
    return fa[1] - fb[1]
