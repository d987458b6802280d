"""Which keyword arguments of a kernel factory are tunable, and their candidate values.

A declared space (`{"block_M": [64, 128], "num_stages": [2, 3]}`) is used as given: every
name must be a parameter of the factory (TC111 with the closest name otherwise). Without
one, the tunable parameters are the factory's keyword parameters with an integer default
(or None: "the factory chooses") that the call does not set, whose names say what they are:

| name (any case) | values |
|---|---|
| block_M, block_N, block_H, BLOCK_M, ... (a block size other than K) | 32, 64, 128, 256 |
| block_K, BLOCK_K | 32, 64, 128 |
| num_stages, stages | 2, 3, 4 |
| threads, num_threads | 128, 256 |

Other parameters keep their defaults. The default configuration is always a candidate. The
product is capped at `MAX_CONFIGS` configurations (the space's values are thinned from the
ends, the defaults kept).
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tilecraft.diagnostics import TilecraftError

MAX_CONFIGS = 400

_RULES: tuple[tuple[str, tuple[int, ...]], ...] = (
    (r"block_?k", (32, 64, 128)),
    (r"block_?[a-z]+", (32, 64, 128, 256)),
    (r"(num_)?stages", (2, 3, 4)),
    (r"(num_)?threads", (128, 256)),
)


def tunable_defaults(fn: Callable, args: Sequence[Any], fixed: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """{name: default} of the keyword parameters of `fn` that a rule names and the call leaves
    free."""
    params = list(inspect.signature(fn).parameters.values())
    out: dict[str, Any] = {}
    for k, p in enumerate(params):
        if k < len(args) or p.name in fixed or p.default is inspect.Parameter.empty:
            continue
        if p.default is not None and (isinstance(p.default, bool)
                                      or not isinstance(p.default, int)):
            continue
        if any(re.fullmatch(rule, p.name.lower()) for rule, _ in _RULES):
            out[p.name] = p.default
    return out


def candidate_space(fn: Callable, args: Sequence[Any], fixed: Mapping[str, Any],
                    declared: Mapping[str, Sequence[Any]] | None = None,
                    span: Any = None) -> dict[str, list[Any]]:
    """{name: values} to enumerate (each list holds the default first where there is one)."""
    sig = inspect.signature(fn)
    if declared is not None:
        if not isinstance(declared, Mapping):
            raise TilecraftError("TC321", span, func="recommend", detail="`space` must be a "
                                 f"dict of parameter name -> list of values, not "
                                 f"{type(declared).__name__}", hint="space={'block_M': [64, 128]}")
        for name, values in declared.items():
            if name not in sig.parameters:
                names = list(sig.parameters)
                close = [n for n in names if n.lower() == name.lower()] or \
                    difflib.get_close_matches(name, names, n=1)
                raise TilecraftError(
                    "TC111", span, func=fn.__name__, keyword=name,
                    suggest=f"did you mean `{close[0]}`? " if close else "",
                    params=f"({', '.join(sig.parameters)})")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or \
                    not values:
                raise TilecraftError("TC321", span, func="recommend", detail=f"space[{name!r}] "
                                     "must be a non-empty list of values",
                                     hint=f"space={{{name!r}: [...]}}")
        return {k: list(v) for k, v in declared.items()}
    space: dict[str, list[Any]] = {}
    for name, default in tunable_defaults(fn, args, fixed).items():
        values = next(v for rule, v in _RULES if re.fullmatch(rule, name.lower()))
        space[name] = [default] + [v for v in values if v != default]
    return space


def configurations(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination (the first values first), thinned to at most MAX_CONFIGS."""
    names = list(space)
    values = [list(space[n]) for n in names]
    while _product(values) > MAX_CONFIGS:
        k = max(range(len(values)), key=lambda i: len(values[i]))
        if len(values[k]) <= 2:
            break
        values[k].pop()  # the last added: the defaults and the first alternatives stay
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def _product(values: list[list[Any]]) -> int:
    n = 1
    for v in values:
        n *= len(v)
    return n
