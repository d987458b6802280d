"""The CPU interpreter: runs Tile IR on numpy. It is the executable specification of the language
and never imports codegen."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilecraft.args import bind_arguments, is_torch, to_numpy_view
from tilecraft.ir import Buffer, PrimFunc, Var

from .machine import Machine


def run(func: PrimFunc, args: list[Any], *, debug_nans: bool = False) -> None:
    """Run `func` on torch tensors or numpy arrays, writing outputs in place.

    CPU tensors are used in place; tensors on another device are copied in and back.
    `debug_nans`: stop with TC404 at the first statement that makes a NaN or an inf from values
    that had none (see nan_check.py).
    """
    dims = bind_arguments(func, args)
    buffers: dict[Buffer, np.ndarray] = {}
    scalars: dict[Var, Any] = dict(dims)
    copies = []
    for p, a in zip(func.params, args):
        if isinstance(p, Var):
            scalars[p] = np.asarray(a, dtype=p.dtype.np_dtype)[()]
            continue
        if is_torch(a) and a.device.type != "cpu":
            host = a.detach().cpu()
            copies.append((a, host))
            a = host
        buffers[p] = to_numpy_view(a.detach() if is_torch(a) else a)
    for v, n in dims.items():
        scalars[v] = np.int32(n)
    Machine(func, buffers, scalars, debug_nans=debug_nans).run()
    for dev, host in copies:
        dev.copy_(host)


__all__ = ["run"]
