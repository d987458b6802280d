"""Interpreter semantics of tile ops, registered per op class (one small file per family)."""

from __future__ import annotations

from collections.abc import Callable

from tilecraft.diagnostics import TilecraftError

_RULES: dict[type, Callable] = {}


def rule(op_class: type):
    """Register the interpreter semantics of `op_class`: fn(machine, op)."""

    def deco(fn):
        _RULES[op_class] = fn
        return fn

    return deco


def run_tile_op(machine, op) -> None:
    fn = _RULES.get(type(op))
    if fn is None:
        raise TilecraftError("TC403", detail=f"T.{op.op_name}", hint="")
    fn(machine, op)


from . import copy, gemm, misc, reduce  # noqa: E402,F401  (registration)
