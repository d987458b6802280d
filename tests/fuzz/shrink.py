"""Greedy shrinking of a failing program: drop segments, delete statements, flatten ifs and
loops, replace expressions by their operands, switch segment options off — keeping a change
whenever the failure keeps its signature. The model follows every change (it is computed from
the same structure), so a shrunk program is still checked against a correct expectation."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from . import exprs as E
from . import stmts as S

# options a segment can lose without changing its parameters
KNOBS = {
    "GemmSeg": {"epi": None, "policy": None, "a_frag": False, "loop": "serial"},
    "CopySeg": {"part": None},
    "RedSeg": {"form": "named", "clear": True},
    "CumSeg": {"reverse": False},
}


def _get(obj, path):
    for kind, key in path:
        obj = obj[key] if kind == "i" else getattr(obj, key)
    return obj


def _set(obj, path, value) -> None:
    parent = _get(obj, path[:-1])
    kind, key = path[-1]
    if kind == "i":
        parent[key] = value
    else:
        setattr(parent, key, value)


def _stmt_lists(lst: list, path: tuple) -> Iterator[tuple]:
    yield path
    for k, s in enumerate(lst):
        here = path + (("i", k),)
        if isinstance(s, S.If):
            yield from _stmt_lists(s.then, here + (("a", "then"),))
            if s.other:
                yield from _stmt_lists(s.other, here + (("a", "other"),))
        elif isinstance(s, S.Loop):
            yield from _stmt_lists(s.body, here + (("a", "body"),))


def _nodes(node, path: tuple) -> Iterator[tuple]:
    """Nodes that may be simplified: not within a divisor (its guard keeps it nonzero)."""
    yield path, node
    for key in ("x", "a", "b", "c"):
        child = getattr(node, key, None)
        divisor = key == "b" and isinstance(node, E.Bin) and node.op in ("//", "%", "/")
        if isinstance(child, E.Node) and not divisor:
            yield from _nodes(child, path + (("a", key),))


def candidates(prog) -> Iterator[Callable]:
    """Edits, each a function that applies itself to a copy of `prog`."""
    n = len(prog.segments)
    for k in range(n if n > 1 else 0):
        yield lambda p, k=k: p.segments.pop(k)
    for si, seg in enumerate(prog.segments):
        base = (("a", "segments"), ("i", si))
        for attr, value in KNOBS.get(type(seg).__name__, {}).items():
            if getattr(seg, attr) != value:
                yield lambda p, path=base + (("a", attr),), v=value: _set(p, path, v)
        if not hasattr(seg, "body"):
            continue
        lists = list(_stmt_lists(seg.body, base + (("a", "body"),)))
        for lp in lists:
            lst = _get(prog, lp)
            for k, s in enumerate(lst):
                if len(lst) > 1 and not getattr(s, "keep", False):
                    yield lambda p, lp=lp, k=k: _get(p, lp).pop(k)
                if isinstance(s, S.If):
                    yield lambda p, lp=lp, k=k: _get(p, lp).__setitem__(
                        slice(k, k + 1), _get(p, lp)[k].then)
                elif isinstance(s, S.Loop) and s.n > 1:
                    yield lambda p, lp=lp, k=k: setattr(_get(p, lp)[k], "n", 1)
        for lp in lists:
            for k, s in enumerate(_get(prog, lp)):
                root = lp + (("i", k),)
                for field in ("x", "c"):
                    node = getattr(s, field, None)
                    if not isinstance(node, E.Node):
                        continue
                    for path, sub in _nodes(node, root + (("a", field),)):
                        for child in E.children(sub):
                            if child.t is sub.t and not isinstance(child, (E.Const,
                                                                           E.Implicit)):
                                yield lambda p, path=path, child=child: _set(
                                    p, path, copy.deepcopy(child))


def shrink(prog, still_fails: Callable, budget: int = 200):
    """The smallest variant of `prog` found for which `still_fails(variant)` holds."""
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        for edit in candidates(prog):
            if tries >= budget:
                break
            trial = copy.deepcopy(prog)
            try:
                edit(trial)
                trial.source  # noqa: B018 - renders, or the edit made no program
            except Exception:  # noqa: BLE001 - an edit that does not apply is skipped
                continue
            tries += 1
            try:
                fails = still_fails(trial)
            except Exception:  # noqa: BLE001 - a variant the fuzzer cannot model
                fails = False
            if fails:
                prog, progress = trial, True
                break
    return prog
