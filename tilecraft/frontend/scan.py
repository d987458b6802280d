"""Pre-scans of a kernel's AST, read before a block is evaluated.

`assigned_names(body)` is the set of names that assignments anywhere in `body` (nested blocks
included) bind: the parser makes such a name a mutable local before it enters a device `if` or
loop whose body rebinds it (frontend/mutable.py).

    x = 0.0
    for k in T.serial(4):        # assigned_names(body) == {"x", "t"}
        t = A[k]
        x = x + t
"""

from __future__ import annotations

import ast
from collections.abc import Iterable


def _target_names(target: ast.expr, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for e in target.elts:
            _target_names(e, out)
    elif isinstance(target, ast.Starred):
        _target_names(target.value, out)


def assigned_names(body: Iterable[ast.stmt]) -> set[str]:
    """Names bound by `=`, `+=`-style and annotated assignments in `body`, at any depth (loop
    targets and `with ... as` names are not counted: they bind fresh names per construct)."""
    out: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    _target_names(t, out)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                _target_names(node.target, out)
    return out
