"""A `parallel` whose body is `x[...] = T.if_then_else(a <op> b, u, v)` with a margin a - b that
is affine in the loop variables (a causal mask): the margin's range over the whole tile is
computed once, and where the condition holds (or fails) at both ends of that range it holds
(fails) for every element, so the tile stores u (v) with no per-element select; only tiles the
boundary crosses select per element (the general form, printed as it would be otherwise).

    acc_s[i, j] = T.if_then_else(bx * 128 + i >= k * 128 + j, 0.0, -inf)   (i, j < 128)
        ->  margin = bx * 128 - k * 128 + (i - j):  d_lo = bx * 128 - k * 128 - 127,
            d_hi = bx * 128 - k * 128 + 127; all-true if d_lo >= 0, all-false if d_hi < 0

The decision is taken on the IR with the interpreter's integer semantics: it applies only where
the interval analysis (ir/ranges.py, over the printer's proven ranges of the block-level
variables and the layout's index ranges) shows that a and b, and the printed ends of the range,
never wrap, so a - b is the exact difference and `a <op> b` is `a - b <op> 0` (comparisons of
mixed integer types are by value, like the interpreter's). The specialized branches store u or
v, which the general form would have stored for each element of the tile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilecraft.block.parallel import ParallelCompute
from tilecraft.ir import BinOp, BufferStore, Compare, Expr, Select, Var
from tilecraft.ir.ranges import Interval, bound
from tilecraft.ir.simplify import from_linear, linear_form
from tilecraft.ir.visitor import walk_expr

HOLDS = {">=": lambda d: d >= 0, ">": lambda d: d > 0, "<=": lambda d: d <= 0,
         "<": lambda d: d < 0}


@dataclass(frozen=True)
class UniformSelect:
    """The store of a tile-uniform select: its margin `a - b` lies in [lo, hi] on every element
    (block-level expressions, no loop variable), and the condition is `margin <op> 0`."""

    store: BufferStore
    op: str
    lo: Expr | int  # an int when the range does not depend on block-level values
    hi: Expr | int

    def branch(self, taken: bool) -> BufferStore:
        """The store every element makes when the condition is `taken` on all of them."""
        sel = self.store.value
        return replace(self.store, value=sel.a if taken else sel.b)

    def decided(self) -> bool | None:
        """True/False when the range is a compile-time constant on which the condition is
        uniform; None otherwise."""
        if isinstance(self.lo, int) and isinstance(self.hi, int):
            at_lo, at_hi = HOLDS[self.op](self.lo), HOLDS[self.op](self.hi)
            if at_lo == at_hi:
                return at_lo
        return None


def uniform_select(s: ParallelCompute, ranges: dict[Var, Interval]) -> UniformSelect | None:
    """`s`'s body as a tile-uniform select, or None when it is not of that form or the interval
    analysis cannot show the margin exact (`ranges`: the proven intervals of the variables in
    scope outside the loop)."""
    store = s.body
    if not (isinstance(store, BufferStore) and isinstance(store.value, Select)):
        return None
    cond = store.value.cond
    if not (isinstance(cond, Compare) and cond.op in HOLDS
            and cond.a.dtype.is_integer and cond.b.dtype.is_integer):
        return None
    inner = {v: (0, n - 1) for v, n in zip(s.vars, s.extents)}
    env = {**ranges, **inner}
    if bound(cond.a, env) is None or bound(cond.b, env) is None:
        return None  # may wrap: a - b need not be the difference the comparison sees
    form = linear_form(BinOp.create("-", cond.a, cond.b))
    if form is None:
        return None
    terms, const = form
    lo = hi = const
    outer = {}
    for atom, coeff in terms.items():
        used = {x for x in walk_expr(atom) if isinstance(x, Var)}
        if used & set(s.vars):
            if not used <= set(s.vars):
                return None  # loop variables mixed with block-level values
            r = bound(atom, inner)
            if r is None:
                return None
            lo, hi = lo + min(coeff * r[0], coeff * r[1]), hi + max(coeff * r[0], coeff * r[1])
        else:
            outer[atom] = coeff
    if len(outer) == len(terms):
        return None  # no loop variable: a condition uniform anyway
    if not outer:  # the same range on every tile: of use only where it decides the condition
        split = UniformSelect(store, cond.op, lo, hi)
        return split if split.decided() is not None else None
    lo_e, hi_e = from_linear((outer, lo)), from_linear((outer, hi))
    if not (lo_e.dtype.kind == "int" and bound(lo_e, ranges) is not None
            and bound(hi_e, ranges) is not None):
        return None  # the ends themselves could wrap when printed
    return UniformSelect(store, cond.op, lo_e, hi_e)


__all__ = ["HOLDS", "UniformSelect", "uniform_select"]
