"""A small linear simplifier for index expressions.

Index expressions in kernels are mostly affine in the loop and block variables
(`(bx + 1) * 128 - bx * 128`). `linear_form` writes such an expression as a map from
non-linear atoms to integer coefficients plus a constant; `simplify` rebuilds a canonical
expression from it, so slice extents and bounds checks fold to constants.

    simplify((bx + 1) * 128 - bx * 128)  ->  Const(128)
"""

from __future__ import annotations

from .expr import BinOp, Cast, Const, Expr, as_expr, const_int

LinearForm = tuple[dict[Expr, int], int]


def linear_form(e) -> LinearForm | None:
    """`e` as ({atom: coeff}, const) when it is affine with integer coefficients."""
    e = as_expr(e)
    if e.dtype.is_float:
        return None
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, Cast) and not e.value.dtype.is_float:
        return linear_form(e.value)
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
    terms, c = form
    out: Expr | None = None
    for atom, coeff in terms.items():
        term = atom if coeff == 1 else BinOp.create("*", atom, coeff)
        out = term if out is None else BinOp.create("+", out, term)
    if out is None:
        return Const.create(c) if dtype is None else Const.create(c, dtype)
    return BinOp.create("+", out, c) if c else out


def simplify(e) -> Expr:
    """Canonicalize an integer affine expression; other expressions come back unchanged."""
    e = as_expr(e)
    form = linear_form(e)
    if form is None:
        return e
    return from_linear(form, e.dtype)


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
