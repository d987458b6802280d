"""Statement bodies (of a T.Parallel loop, or block-level scalar code): lets, rebinding, stores,
if/else on device values and serial loops, printed as DSL source and run on model values.

The meaning is Python's: a name bound before an `if` or a loop and assigned inside it holds the
new value after it (a mutable local). Names first bound inside a branch or loop are not used
after it. Element-wise `if`s in a T.Parallel loop are masks: each element takes its branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import dtypes as D
from . import values as M
from .exprs import INDEX, LET, Bin, Cast, ExprGen, Node, Ref, evaluate


@dataclass
class Target:
    """Where a store goes: `text` prints it, `key` is the model state it updates, `index` is
    None for an element-wise store at the loop's own element, else a constant index."""
    text: str
    key: str
    t: D.DType
    index: tuple | None = None


@dataclass
class Let:
    name: str
    x: Node


@dataclass
class Store:
    target: Target
    x: Node
    keep: bool = False  # an initialisation the shrinker must not delete


@dataclass
class If:
    c: Node
    then: list
    other: list | None = None


@dataclass
class Loop:
    var: str
    n: int
    kind: str  # serial | range | unroll
    body: list = field(default_factory=list)


def render(stmts: list, ind: int) -> list[str]:
    pad = "    " * ind
    out: list[str] = []
    for s in stmts:
        if isinstance(s, Let):
            out.append(f"{pad}{s.name} = {s.x.render()}")
        elif isinstance(s, Store):
            out.append(f"{pad}{s.target.text} = {s.x.render()}")
        elif isinstance(s, If):
            out.append(f"{pad}if {s.c.render()}:")
            out += render(s.then, ind + 1)
            if s.other:
                out.append(f"{pad}else:")
                out += render(s.other, ind + 1)
        elif isinstance(s, Loop):
            head = {"serial": f"T.serial({s.n})", "range": f"range({s.n})",
                    "unroll": f"T.unroll({s.n})"}[s.kind]
            out.append(f"{pad}for {s.var} in {head}:")
            out += render(s.body, ind + 1)
    return out


def run(stmts: list, env: dict) -> None:
    """Execute on model values; `env` maps names and target keys to `V`s (updated in place)."""
    for s in stmts:
        if isinstance(s, Let):
            env[s.name] = evaluate(s.x, env)
        elif isinstance(s, Store):
            tg = s.target
            new = M.cast(evaluate(s.x, env), tg.t)
            old = env[tg.key]
            if tg.index is None:
                env[tg.key] = new.full(old.shape)
            else:
                upd = old.full(old.shape)
                nv = new.full(())
                upd.v[tg.index], upd.e[tg.index], upd.dc[tg.index] = nv.v, nv.e, nv.dc
                env[tg.key] = upd
        elif isinstance(s, If):
            c = evaluate(s.c, env)
            e1, e2 = dict(env), dict(env)
            run(s.then, e1)
            if s.other:
                run(s.other, e2)
            for k in list(env):
                if e1[k] is not env[k] or e2[k] is not env[k]:
                    a, b = e1[k], e2[k]
                    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
                    env[k] = M.select(c, a, b).full(shape)
        elif isinstance(s, Loop):
            for it in range(s.n):
                env[s.var] = M.exact(it, D.ALL["int32"])
                run(s.body, env)


def top_lets(stmts: list) -> list[str]:
    """Names bound at the top level of `stmts`, each once, in the order of their last binding."""
    names = [s.name for s in stmts if isinstance(s, Let)]
    return [n for k, n in enumerate(names) if n not in names[k + 1:]]


def walk(stmts: list):
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.other or [])
        elif isinstance(s, Loop):
            yield from walk(s.body)


@dataclass
class BodyGen:
    """Random statement lists over an ExprGen's leaves; `names` makes fresh identifiers."""
    rng: object
    eg: ExprGen
    feats: object
    names: object
    depth_limit: int = 2
    vars: tuple = ()  # T.alloc_var names: `y = x` of a bare var only with feature var_alias
    rebind: bool = True

    def value(self, t: D.DType, depth: int) -> Node:
        x = self.eg.expr(t, depth)
        if isinstance(x, Ref) and x.key in self.vars and not self.feats.var_alias:
            x = Cast(t, x)  # T.cast(x, "<its own type>"): a value, not the var
        return x

    def body(self, targets: list[Target], depth: int, lets: list[Ref],
             n: int | None = None) -> list:
        out: list = []
        mine: list[Ref] = []  # lets bound at this level (dropped from the leaves afterwards)
        for _ in range(n if n is not None else self.rng.randint(1, 3)):
            kinds = ["let", "let"]
            if targets:
                kinds += ["store"]
            if self.feats.device_if and depth < self.depth_limit:
                kinds += ["if"]
            if self.feats.loops and depth < self.depth_limit:
                kinds += ["loop"]
            if self.rebind and (lets or mine):
                kinds += ["rebind", "rebind"]
            k = self.rng.choice(kinds)
            if k == "let":
                t = D.get(self.rng.choice(self.feats.dtypes))
                name = self.names.fresh("v")
                out.append(Let(name, self.value(t, self.rng.randint(1, 3))))
                ref = Ref(t, name, name, LET)
                mine.append(ref)
                self.eg.leaves.append(ref)
            elif k == "rebind":
                ref = self.rng.choice(lets + mine)
                out.append(Let(ref.key, self.value(ref.t, self.rng.randint(1, 2))))
            elif k == "store":
                tg = self.rng.choice(targets)
                out.append(Store(tg, self.value(tg.t, self.rng.randint(1, 3))))
            elif k == "if":
                c = self.eg.cond(2)
                then = self.body(targets, depth + 1, lets + mine)
                other = self.body(targets, depth + 1, lets + mine) if self.rng.random() < 0.6 \
                    else None
                out.append(If(c, then, other))
            else:
                var = self.names.fresh("k")
                ref = Ref(D.ALL["int32"], var, var, INDEX)
                self.eg.leaves.append(ref)
                kind = self.rng.choice(["serial", "range", "unroll"])
                body = self.body(targets, depth + 1, lets + mine)
                self.eg.leaves.remove(ref)
                out.append(Loop(var, self.rng.randint(1, 3), kind, body))
        if depth > 0 and targets and self.rng.random() < 0.7:  # nested values reach an output
            tg = self.rng.choice(targets)
            x = self.value(tg.t, self.rng.randint(1, 2))
            if mine:
                last = mine[-1]
                x = Bin(tg.t, self.rng.choice(["+", "-", "max"]),
                        last if last.t is tg.t else Cast(tg.t, last), x)
            out.append(Store(tg, x))
        for ref in mine:
            self.eg.leaves.remove(ref)
        return out
