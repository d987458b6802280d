"""Random scalar expressions: trees that print as DSL source and evaluate on model values.

Every binary operation has operands of one dtype (the generator inserts `T.cast`), so the
result dtype is never a question of promotion rules. Constants print as Python literals, typed
by the other operand as the language says; a constant never meets another constant. Divisors
are guarded so that no element divides by zero (nor INT_MIN by -1 in 32/64 bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import dtypes as D
from . import values as M
from .values import V


@dataclass
class Node:
    t: D.DType


@dataclass
class Const(Node):
    value: int | float = 0
    typed: bool = False  # print as T.cast(lit, dtype) (both sides of a select are constants)

    def render(self) -> str:
        lit = repr(self.value) if self.t.is_float else str(self.value)
        return f'T.cast({lit}, "{self.t.name}")' if self.typed else lit


@dataclass
class Ref(Node):
    """A leaf whose value the segment provides per block: a tile element, a let, an index."""
    text: str = ""
    key: str = ""
    weight: float = 1.0  # how often the generator picks it (data > indices)

    def render(self) -> str:
        return self.text


@dataclass
class Un(Node):
    op: str = "neg"
    x: Node = None

    def render(self) -> str:
        return f"(-{self.x.render()})" if self.op == "neg" else f"T.abs({self.x.render()})"


@dataclass
class Bin(Node):
    op: str = "+"
    a: Node = None
    b: Node = None
    style: str = "T"  # min/max: "T" -> T.min(a, b), "py" -> min(a, b)

    def render(self) -> str:
        if self.op in ("min", "max"):
            fn = f"T.{self.op}" if self.style == "T" else self.op
            return f"{fn}({self.a.render()}, {self.b.render()})"
        return f"({self.a.render()} {self.op} {self.b.render()})"


@dataclass
class Fma(Node):
    a: Node = None
    b: Node = None
    c: Node = None

    def render(self) -> str:
        return f"T.fma({self.a.render()}, {self.b.render()}, {self.c.render()})"


@dataclass
class Cmp(Node):
    op: str = "<"
    a: Node = None
    b: Node = None

    def render(self) -> str:
        return f"({self.a.render()} {self.op} {self.b.render()})"


@dataclass
class Logic(Node):
    op: str = "and"
    a: Node = None
    b: Node | None = None

    def render(self) -> str:
        if self.op == "not":
            return f"(not {self.a.render()})"
        return f"({self.a.render()} {self.op} {self.b.render()})"


@dataclass
class Sel(Node):
    c: Node = None
    a: Node = None
    b: Node = None
    style: str = "T"  # "T" -> T.if_then_else(c, a, b), "py" -> (a if c else b)

    def render(self) -> str:
        if self.style == "T":
            return f"T.if_then_else({self.c.render()}, {self.a.render()}, {self.b.render()})"
        return f"({self.a.render()} if {self.c.render()} else {self.b.render()})"


@dataclass
class Cast(Node):
    x: Node = None

    def render(self) -> str:
        return f'T.cast({self.x.render()}, "{self.t.name}")'


@dataclass
class Implicit(Node):
    """An operand of another type in a mixed operation: printed as is, the language converts
    it to the operation's type (the wider integer type, or the float type)."""
    x: Node = None

    def render(self) -> str:
        return self.x.render()


def evaluate(n: Node, env: dict[str, V]) -> V:
    if isinstance(n, Const):
        return M.exact(n.value, n.t)
    if isinstance(n, Ref):
        v = env[n.key]
        return v(env) if callable(v) else v
    if isinstance(n, Un):
        return M.unary(n.op, evaluate(n.x, env))
    if isinstance(n, Bin):
        return M.binop(n.op, evaluate(n.a, env), evaluate(n.b, env))
    if isinstance(n, Fma):
        return M.fma(evaluate(n.a, env), evaluate(n.b, env), evaluate(n.c, env))
    if isinstance(n, Cmp):
        return M.compare(n.op, evaluate(n.a, env), evaluate(n.b, env))
    if isinstance(n, Logic):
        return M.logic(n.op, evaluate(n.a, env), evaluate(n.b, env) if n.b is not None else None)
    if isinstance(n, Sel):
        return M.select(evaluate(n.c, env), evaluate(n.a, env), evaluate(n.b, env))
    if isinstance(n, (Cast, Implicit)):
        return M.cast(evaluate(n.x, env), n.t)
    raise TypeError(n)


def children(n: Node) -> list[Node]:
    return [c for c in (getattr(n, k, None) for k in ("x", "a", "b", "c")) if isinstance(c, Node)]


def size(n: Node) -> int:
    return 1 + sum(size(c) for c in children(n))


# ---- generation ------------------------------------------------------------------------------
LET, DATA, INDEX = 2.0, 3.0, 0.5  # leaf weights: let-bound values, tile elements, indices
FLOAT_CONSTS = [0.5, 1.0, 1.5, 2.0, 3.0, 0.25, 4.0, 0.125, 7.0, 10.0, -1.0, -2.0, -0.5, -3.0]


@dataclass
class ExprGen:
    """Makes random expressions of a dtype from a list of leaves (Refs of any dtype)."""
    rng: object
    leaves: list[Ref]
    feats: object
    conds: list[Ref] = field(default_factory=list)

    def const(self, t: D.DType, small: bool = False) -> Const:
        r = self.rng
        if t.is_float:
            return Const(t, r.choice(FLOAT_CONSTS))
        if small or r.random() < 0.8:
            lo, hi = max(t.lo, -9), min(t.hi, 9)
            return Const(t, r.randint(lo, hi))
        return Const(t, r.choice([t.lo, t.hi, t.lo + 1, t.hi - 1, t.hi // 2 + 1]))

    def leaf(self, t: D.DType) -> Node:
        same = [x for x in self.leaves if x.t is t]
        other = [x for x in self.leaves if x.t is not t]
        r = self.rng.random()
        if same and (r < 0.75 or not (self.feats.casts and other)):
            return self._pick(same)
        if other and (self.feats.casts or not same):
            return Cast(t, self._pick(other))
        return self._pick(same) if same else self.const(t)

    def _pick(self, refs: list[Ref]) -> Ref:
        lets = [x for x in refs if x.weight == LET]
        if lets and self.rng.random() < 0.4:  # later values use the latest lets
            return self.rng.choice(lets[-2:])
        return self.rng.choices(refs, [x.weight for x in refs])[0]

    def expr(self, t: D.DType, depth: int) -> Node:
        """An expression of dtype t that is not a constant."""
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf(t)
        ops = ["+", "-", "*", "+", "-", "*"]
        f = self.feats
        if f.divmod and (not t.is_float or f.float_divmod):
            ops += ["//", "%"]
        if t.is_float:
            ops += ["/"]
        elif f.truncdiv:
            ops += ["/"]
        if f.minmax:
            ops += ["min", "max"]
        if f.select:
            ops += ["sel"]
        if f.fma:
            ops += ["fma"]
        if f.bitwise and not t.is_float:
            ops += ["&", "|", "^"]
        if f.shifts and not t.is_float:
            ops += ["<<", ">>"]
        ops += ["neg", "abs"]
        if f.casts:
            ops += ["cast"]
        op = self.rng.choice(ops)
        if op in ("neg", "abs"):
            return Un(t, op, self.expr(t, depth - 1))
        if op == "cast":
            src = self.rng.choice(f.dtypes)
            return Cast(t, self.expr(D.get(src), depth - 1)) if D.get(src) is not t else \
                self.expr(t, depth - 1)
        if op == "fma":  # (the first factor an expression: no constant meets a constant)
            return Fma(t, self.expr(t, depth - 1), self.operand(t, depth - 1),
                       self.operand(t, depth - 1))
        if op == "sel":
            a, b = self.operand(t, depth - 1), self.operand(t, depth - 1)
            if isinstance(a, Const) and isinstance(b, Const):
                a.typed = True
            return Sel(t, self.cond(depth - 1), a, b, self.rng.choice(["T", "py"]))
        a = self.mixed(t, depth - 1)
        if op in ("<<", ">>"):
            b = self.shift_count(t, depth - 1)
        else:
            b = self.operand(t, min(depth - 1, 1) if op in ("//", "%", "/") else depth - 1)
        if b.render() == a.render():  # not x - x
            b = self.expr(t, depth - 1)
        if isinstance(a, Implicit) and isinstance(b, Const):
            b.typed = True  # a bare literal would take a's narrower type
        if op in ("<<", ">>"):
            return Bin(t, op, a, b)
        if op in ("//", "%", "/"):
            b = self.guard(b, t)
        if self.rng.random() < 0.3 and op not in ("//", "%", "/"):  # either side
            a, b = b, a
        return Bin(t, op, a, b, self.rng.choice(["T", "py"]))

    def mixed(self, t: D.DType, depth: int) -> Node:
        """An expression of type t, or (feature `mixed`) one of a narrower integer type, or of
        an integer type under a float t, that the operation converts implicitly."""
        if self.feats.mixed and self.rng.random() < 0.2:
            us = [D.get(n) for n in self.feats.dtypes if not D.get(n).is_float and
                  (t.is_float or D.get(n).bits < t.bits)]
            if us:
                return Implicit(t, self.expr(self.rng.choice(us), depth))
        return self.expr(t, depth)

    def shift_count(self, t: D.DType, depth: int) -> Node:
        r = self.rng.random()
        if r < 0.7:
            return Const(t, self.rng.randrange(t.bits))
        if r < 0.85:
            return Const(t, self.rng.choice([t.bits, t.bits + 3] + ([-1] if t.signed else [])))
        return self.expr(t, depth)

    def operand(self, t: D.DType, depth: int) -> Node:
        return self.const(t) if self.rng.random() < 0.35 else self.expr(t, depth)

    def guard(self, d: Node, t: D.DType) -> Node:
        """`d`, made nonzero (and, in 32/64-bit signed types, never -1)."""
        if isinstance(d, Const):
            if d.value == 0 or (t.signed and not t.is_float and t.bits >= 32 and d.value == -1):
                d.value = 3
            if t.is_float and abs(d.value) < 0.5:
                d.value = 2.0
            return d
        if t.is_float:
            return Sel(t, Cmp(D.BOOL, "<", Un(t, "abs", d), Const(t, 0.5)), Const(t, 2.0), d)
        if not t.signed:
            return Bin(t, "max", d, Const(t, 1), "T")
        if t.bits <= 16:
            return Sel(t, Cmp(D.BOOL, "==", d, Const(t, 0)), Const(t, self.rng.choice([3, -3])), d)
        return Sel(t, Cmp(D.BOOL, ">", d, Const(t, 0)), d, Bin(t, "min", d, Const(t, -2)))

    def cond(self, depth: int) -> Node:
        r = self.rng.random()
        if self.conds and r < 0.1:
            return self.rng.choice(self.conds)
        if depth > 0 and r < 0.25:
            op = self.rng.choice(["and", "or", "not"])
            a = self.cond(depth - 1)
            return Logic(D.BOOL, op, a, None if op == "not" else self.cond(depth - 1))
        t = D.get(self.rng.choice(self.feats.dtypes))
        if self.leaves and self.rng.random() < 0.7:
            t = self.rng.choice(self.leaves).t
        if self.feats.mixed and self.rng.random() < 0.25:  # two types: compared by value
            u = D.get(self.rng.choice(self.feats.dtypes))
            if u is not t:
                a, b = self.expr(t, min(depth, 1)), self.expr(u, min(depth, 1))
                if t.is_float != u.is_float:  # an int meets a float in the float's type
                    a, b = (Implicit(u, a), b) if u.is_float else (a, Implicit(t, b))
                elif t.is_float:  # two float types: the wider (or the left one)
                    w = t if t.bits >= u.bits else u
                    a, b = (a if a.t is w else Implicit(w, a)), (b if b.t is w else Implicit(w, b))
                return Cmp(D.BOOL, self.rng.choice(["<", "<=", ">", ">=", "==", "!="]), a, b)
        a = self.expr(t, min(depth, 1))
        b = self.operand(t, min(depth, 1) - 1)
        if b.render() == a.render():
            b = self.operand(t, 0)
        return Cmp(D.BOOL, self.rng.choice(["<", "<=", ">", ">=", "==", "!="]), a, b)
