"""Call-time argument checking and conversion for the CPU interpreter, on the IR's parameters.

Checks count, rank, shape (binding `T.dynamic` dims) and dtype before anything runs, with errors
that name the parameter. Launches on the GPU are checked by the runtime's `ArgChecker` instead
(tilecraft/runtime/args.py), once, on the parameter list the code generator hands over.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, PrimFunc, Var


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def arg_dtype(x) -> dt.DataType | None:
    try:
        return dt.resolve(x.dtype)
    except (ValueError, TypeError, AttributeError):
        return None


def bind_arguments(func: PrimFunc, args: list[Any]) -> dict[Var, int]:
    """Check `args` against `func`'s parameters; return the values of the dynamic dims."""
    if len(args) != len(func.params):
        raise TilecraftError("TC301", span=func.span, kernel=func.name, expected=len(func.params),
                             got=len(args), out_hint="")
    dims: dict[Var, tuple[int, str]] = {}
    for p, a in zip(func.params, args):
        if isinstance(p, Var):
            if is_torch(a) or isinstance(a, np.ndarray):
                raise TilecraftError("TC302", span=p.span, param=p.name, got="a tensor",
                                     expected=f"a {p.dtype} scalar", hint="pass a Python number")
            continue
        if not (is_torch(a) or isinstance(a, np.ndarray)):
            raise TilecraftError("TC302", span=p.span, param=p.name, got=type(a).__name__,
                                 expected=f"a tensor of shape {_shape_str(p)}",
                                 hint="pass a torch tensor (or a numpy array on the interpreter)")
        shape = tuple(a.shape)
        if len(shape) != p.ndim:
            raise TilecraftError("TC302", span=p.span, param=p.name, got=list(shape),
                                 expected=_shape_str(p), hint=f"a {p.ndim}-D tensor")
        for d, (want, got) in enumerate(zip(p.shape, shape)):
            if isinstance(want, int):
                if want != got:
                    raise TilecraftError("TC302", span=p.span, param=p.name, got=list(shape),
                                         expected=_shape_str(p), hint=f"dimension {d} must be {want}")
            elif isinstance(want, Var):
                if want in dims and dims[want][0] != got:
                    raise TilecraftError("TC305", span=p.span, dim=want.name, first=dims[want][0],
                                         second=got, param=p.name)
                dims.setdefault(want, (got, p.name))
        t = arg_dtype(a)
        if t != p.dtype:
            raise TilecraftError("TC303", span=p.span, param=p.name, got=str(t) if t else a.dtype,
                                 expected=str(p.dtype), torch_dtype=_torch_name(p.dtype))
    return {v: n for v, (n, _) in dims.items()}


def _shape_str(p: Buffer) -> str:
    return "[" + ", ".join(str(d) for d in p.shape) + "]"


def _torch_name(t: dt.DataType) -> str:
    tt = t.torch_dtype
    return str(tt) if tt is not None else str(t)


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
