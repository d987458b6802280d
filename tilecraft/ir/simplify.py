"""A small linear simplifier for index expressions.

Index expressions in kernels are mostly affine in the loop and block variables
(`(bx + 1) * 128 - bx * 128`). `linear_form` writes such an expression as a map from
non-linear atoms to integer coefficients plus a constant; `simplify` rebuilds a canonical
expression from it, so slice extents and bounds checks fold to constants.

    simplify((bx + 1) * 128 - bx * 128)  ->  Const(128)

A floor modulo by a positive constant n keeps its dividend's terms and constant modulo n, and a
floor division inside it (x // m) its numerator's constant modulo m * n (the quotient moves by a
multiple of n), so pipeline indices come out non-negative wherever the loop variables are, and
print as plain C `/` and `%`:

    simplify((k - 1) % 4)         ->  (k + 3) % 4
    simplify((k - 2) // 4 % 2)    ->  (k + 6) // 4 % 2
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
    """Canonicalize an integer affine expression (and its floor modulos by constants: module
    docstring); other expressions come back unchanged."""
    e = as_expr(e)
    form = linear_form(e)
    if form is None:
        return e
    terms, c = form
    if any(_is_mod(a) for a in terms):
        terms = {}
        for a, v in form[0].items():
            a = _modulo(a) if _is_mod(a) else a
            terms[a] = terms.get(a, 0) + v
        terms = {a: v for a, v in terms.items() if v}
    return from_linear((terms, c), e.dtype)


def _is_mod(e: Expr) -> bool:
    return isinstance(e, BinOp) and e.op == "%" and e.dtype.kind == "int" \
        and (const_int(e.b) or 0) > 0  # (signed: unsigned operands wrap modulo 2^bits)


def _modulo(e: BinOp) -> Expr:
    """`e` = x % n with the terms and constant of x reduced modulo n (floor semantics: exact for
    every integer x), and a term (y // m) of x with y's constant reduced modulo m * n."""
    n = const_int(e.b)
    form = linear_form(simplify(e.a))
    if form is None:
        return e
    terms: dict[Expr, int] = {}
    for a, v in form[0].items():
        m = const_int(a.b) if isinstance(a, BinOp) and a.op == "//" else None
        inner = linear_form(a.a) if m is not None and m > 0 and a.dtype.kind == "int" else None
        if inner is not None and not 0 <= inner[1] < m * n:  # + t m n: the quotient + t n
            a = BinOp.create("//", from_linear((inner[0], inner[1] % (m * n)), a.a.dtype), a.b)
        if v % n:
            terms[a] = terms.get(a, 0) + v % n
    terms = {a: v for a, v in terms.items() if v}
    if not terms:
        return Const.create(form[1] % n, e.dtype)
    return BinOp.create("%", from_linear((terms, form[1] % n), e.a.dtype), e.b)


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
