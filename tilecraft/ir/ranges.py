"""Integer interval analysis for index expressions.

`bound(e, env)` gives the smallest (lo, hi) the analysis can prove for an integer expression,
with `env` mapping variables to their own intervals (block indices from the grid, loop
variables from their extents). The code generator uses it to drop bounds guards that can never
fail: with 8192 rows, `by * 128 + r` for by in [0, 63] and r in [0, 127] is always < 8192.

    bound(by * 128 + 127, {by: (0, 63)})  ->  (127, 8191)
    bound(n * 2, {})                       ->  None   (n unknown)
"""

from __future__ import annotations

from .expr import BinOp, Cast, Const, Select, Var

Interval = tuple[int, int]


def bound(e, env: dict[Var, Interval]) -> Interval | None:
    """Interval of integer expression `e`, or None when some part is unknown or not integer."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return e, e
    if getattr(e, "dtype", None) is not None and not e.dtype.is_integer:
        return None
    if isinstance(e, Const):
        return int(e.value), int(e.value)
    if isinstance(e, Var):
        return env.get(e)
    if isinstance(e, Cast):
        return _fits(e.dtype, bound(e.value, env))
    if isinstance(e, Select):
        t, f = bound(e.a, env), bound(e.b, env)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if isinstance(e, BinOp):
        a, b = bound(e.a, env), bound(e.b, env)
        if a is None or b is None:
            return None
        return _fits(e.dtype, _binop(e.op, a, b))
    return None


def _fits(dtype, r: Interval | None) -> Interval | None:
    """`r` when every value in it is representable in `dtype`; None where C would wrap
    (unsigned results below 0, narrowing casts, signed overflow)."""
    if r is None:
        return None
    bits = dtype.bits
    if dtype.kind == "uint":
        lo, hi = 0, (1 << bits) - 1
    else:
        lo, hi = -(1 << bits - 1), (1 << bits - 1) - 1
    return r if lo <= r[0] and r[1] <= hi else None


def _binop(op: str, a: Interval, b: Interval) -> Interval | None:
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*":
        p = [x * y for x in a for y in b]
        return min(p), max(p)
    if op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if op == "//" and b[0] > 0:  # floor division by a positive divisor is monotone
        return a[0] // b[1] if a[0] >= 0 else a[0] // b[0], a[1] // b[0] if a[1] >= 0 else \
            a[1] // b[1]
    if op == "%" and b[0] > 0:
        if 0 <= a[0] and a[1] < b[0]:
            return a
        return 0, b[1] - 1
    return None


def work_grows_with(body, v: Var, ranges: dict[Var, Interval]) -> bool:
    """Some loop of `body` runs more iterations for larger `v` (a causal attention's key loop):
    launching those blocks first keeps the last wave from being a few long blocks. The order of
    blocks is not part of the program's meaning, so reversing an axis changes only the
    schedule."""
    from .stmt import For, LetStmt
    from .visitor import walk

    r = ranges.get(v)
    if r is None or r[0] == r[1]:
        return False

    def extents(value: int) -> list:
        env = {**ranges, v: (value, value)}
        out = []
        for s in walk(body):
            if isinstance(s, LetStmt) and (b := bound(s.value, env)) is not None:
                env[s.var] = b
            elif isinstance(s, For):
                out.append(bound(s.extent, env))
        return out

    return any(lo is not None and hi is not None and hi[0] > lo[0] and hi[1] > lo[1]
               for lo, hi in zip(extents(r[0]), extents(r[1])))
