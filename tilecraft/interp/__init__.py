"""The CPU interpreter: runs Tile IR on numpy. It is the executable specification of the language
and never imports codegen."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilecraft.args import bind_arguments, is_torch, to_numpy_view
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Buffer, PrimFunc, Var

from .machine import Machine
from .packed import PackedArray, wrap_argument


def packed_argument(p: Buffer, arr: np.ndarray, dims: dict, kernel: str
                    ) -> np.ndarray | PackedArray:
    """The array the machine holds for global buffer `p`: the caller's bytes of a packed type
    (or of float8) as a tensor of p's shape (`packed.wrap_argument`); others unchanged. A
    dimension of a packed tensor must be static or bound by another argument (TC609)."""
    if not isinstance(arr, np.ndarray) or arr.dtype not in (np.uint8, np.int8):
        return arr
    shape = []
    for d, n in enumerate(p.shape):
        if isinstance(n, Var) and n in dims:
            n = dims[n]
        if not isinstance(n, int):
            raise TilecraftError("TC609", p.span, param=p.name, program=kernel,
                                 detail=f"dimension {d} (`{n}`) of the packed {p.dtype} tensor "
                                 "cannot be read from a byte count: make it static or bind it "
                                 "through another argument")
        shape.append(n)
    try:
        return wrap_argument(arr, tuple(shape), p.dtype)
    except ValueError as err:
        raise TilecraftError("TC609", p.span, param=p.name, program=kernel,
                             detail=str(err)) from None


def run(func: PrimFunc, args: list[Any], *, debug_nans: bool = False) -> None:
    """Run `func` on torch tensors or numpy arrays, writing outputs in place.

    CPU tensors are used in place; tensors on another device are copied in and back. A tensor
    of a packed type (sub-byte ints, custom floats; float8 may also come so) is its bytes,
    read and written in place through `packed.PackedArray` (docs/interpreter.md).
    `debug_nans`: stop with TC404 at the first statement that makes a NaN or an inf from values
    that had none (see nan_check.py).
    """
    execute(func, args, bind_arguments(func, args), debug_nans=debug_nans)


def execute(func: PrimFunc, args: list[Any], dims: dict[Var, int], *,
            debug_nans: bool = False) -> None:
    """`run` on arguments the runtime's checker already accepted; `dims` holds the values of
    the dynamic dims it bound."""
    buffers: dict[Buffer, np.ndarray | PackedArray] = {}
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
        arr = to_numpy_view(a.detach() if is_torch(a) else a)
        buffers[p] = packed_argument(p, arr, dims, func.name)
    for v, n in dims.items():
        scalars[v] = np.int32(n)
    Machine(func, buffers, scalars, debug_nans=debug_nans).run()
    for dev, host in copies:
        dev.copy_(host)


__all__ = ["execute", "run"]
