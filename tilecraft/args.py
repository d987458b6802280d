"""A kernel's parameters as the runtime's argument checker sees them, for both backends.

There is one argument checker, the runtime's `ArgChecker` (tilecraft/runtime/args.py). The CUDA
backend hands it the parameter list the code generator makes (`runtime_params(func,
vector_bytes)`, plus the dim-bound scalars and tensor maps it adds); the CPU interpreter hands it
`runtime_params(func)`, the same list without the alignment that only vector accesses on the GPU
need. So a call the GPU path refuses is refused by the interpreter too, with the same error
(count TC301, shape TC302, dtype and scalar values TC303, dynamic dims TC305, contiguity TC306,
a written tensor overlapping another argument TC317, packed bytes TC318-TC320), at the same
line. `written_params(func)` says which tensor parameters the kernel writes (a store, a tile
op's destination or an atomic), for both backends' checkers:

    bind_arguments(func, [a, b, 3])     # -> {m: 1024}, the values of the dynamic dims
    arg_checker(func, outputs=["C"])    # the checker the jit's interpreter path calls

A sub-byte or custom-float parameter takes its packed bytes (docs/dtypes.md "Host side"): the
checker accepts them, and the interpreter gets them untouched (`to_numpy_view`: a numpy uint8 or
int8 array of the caller's shape, sharing its memory).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, BufferStore, PrimFunc, TileOp, Var
from tilecraft.ir.visitor import walk
from tilecraft.runtime.args import ArgChecker
from tilecraft.runtime.params import SCALAR_KINDS, Param, ScalarParam, TensorParam


def runtime_params(
    func: PrimFunc, vector_bytes: Mapping[Buffer, int] | None = None
) -> list[Param]:
    """`func`'s parameters as runtime `TensorParam`/`ScalarParam`s, in order. `vector_bytes`
    (from the code generator): per global buffer, its widest vector access, which its data
    pointer must be aligned to. A scalar of a dtype no kernel argument has is TC311."""
    out: list[Param] = []
    for p in func.params:
        if isinstance(p, Buffer):
            shape = tuple(d if isinstance(d, int) else getattr(d, "name", str(d))
                          for d in p.shape)
            align = (vector_bytes or {}).get(p, 0)
            out.append(TensorParam(p.name, p.dtype.name, shape, align=align if align > 1 else 0))
        elif p.dtype.name in SCALAR_KINDS:
            out.append(ScalarParam(p.name, p.dtype.name))
        else:
            raise TilecraftError("TC311", span=p.span, param=p.name, dtype=p.dtype.name,
                                 kinds=", ".join(SCALAR_KINDS))
    return out


_WRITTEN: weakref.WeakKeyDictionary[PrimFunc, tuple[str, ...]] = weakref.WeakKeyDictionary()


def written_params(func: PrimFunc) -> tuple[str, ...]:
    """The names of `func`'s tensor parameters the kernel writes (by a BufferStore, as a tile
    op's destination, or by an atomic), in parameter order; computed once per kernel."""
    found = _WRITTEN.get(func)
    if found is None:
        written: set[Buffer] = set()
        for s in walk(func.body):
            if isinstance(s, BufferStore):
                written.add(s.buffer)
            elif isinstance(s, TileOp):
                written.update(r.buffer for r in s.writes())
        found = _WRITTEN[func] = tuple(
            p.name for p in func.params if isinstance(p, Buffer) and p in written)
    return found


def arg_checker(func: PrimFunc, outputs: Sequence[str] = ()) -> ArgChecker:
    """The checker of `func`'s calls on the interpreter (`outputs`: the out_idx parameters it
    allocates); errors point at the parameters' lines, as on the GPU path."""
    return ArgChecker(
        runtime_params(func),
        kernel=func.name,
        outputs=outputs,
        writes=written_params(func),
        spans={p.name: p.span for p in func.params if p.span is not None},
        span=func.span,
    )


def bind_arguments(func: PrimFunc, args: list[Any]) -> dict[Var, int]:
    """Check `args` against `func`'s parameters; return the values of the dynamic dims."""
    dims = arg_checker(func).bind(args, require_cuda=False).dims
    found: dict[Var, int] = {}
    for p in func.params:
        for d in p.shape if isinstance(p, Buffer) else ():
            if isinstance(d, Var) and d.name in dims:
                found[d] = dims[d.name]
    return found


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def arg_dtype(x) -> dt.DataType | None:
    try:
        return dt.resolve(x.dtype)
    except (ValueError, TypeError, AttributeError):
        return None


def to_numpy_view(x) -> np.ndarray:
    """A numpy array sharing memory with a CPU tensor (bf16/fp8 viewed through ml_dtypes)."""
    if isinstance(x, np.ndarray):
        return x
    t = dt.resolve(x.dtype)
    if t.name in ("bfloat16",):
        import torch

        return x.view(torch.int16).numpy().view(t.np_dtype)
    if t.name.startswith("float8"):
        import torch

        return x.view(torch.uint8).numpy().view(t.np_dtype)
    return x.numpy()
