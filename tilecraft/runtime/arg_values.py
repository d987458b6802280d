"""What the argument checker accepts as a value: scalars per kind, and numpy arrays on the host.

A scalar parameter's kind is its C type (params.SCALAR_KINDS). The checker takes, per kind:

    int8 ... uint64   a Python int, a numpy integer, or anything with `__index__` (a one-element
                      integer tensor), inside the kind's range; never a bool, a float or None
    bool              a Python or numpy bool only
    float16 ... 64    a real number (int, float, numpy scalar), never a bool or None; float16 and
                      bfloat16 travel as their bits, rounded as a numpy cast rounds

`scalar_value(kind, x)` returns the value for the parameter block, or raises `BadScalar` with
what to print. The CPU interpreter also takes numpy arrays (bf16/fp8 through ml_dtypes; sub-byte
and custom-float tensors as uint8/int8 arrays of their packed bytes, never as ml_dtypes arrays of
one element per value): `HostArray` gives one the few attributes the checker reads from a torch
tensor.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

from .params import _TORCH_NAMES

INT_RANGES: dict[str, tuple[int, int]] = {
    f"{sign}int{bits}": ((0, 2**bits - 1) if sign else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    for sign in ("", "u")
    for bits in (8, 16, 32, 64)
}
FLOAT_KINDS = ("float16", "bfloat16", "float32", "float64")


class BadScalar(Exception):
    """A scalar the kind cannot take: `got` says what it was, `fix` how to pass one."""

    def __init__(self, got: str, fix: str):
        super().__init__(got)
        self.got = got
        self.fix = fix


def _is_bool(x: object) -> bool:
    return isinstance(x, bool) or (type(x).__module__ == "numpy" and type(x).__name__
                                   in ("bool", "bool_"))


def scalar_value(kind: str, x: object) -> int | float | bool:
    """The parameter-block value of `x` for a scalar of `kind` (see the module docstring)."""
    rng = INT_RANGES.get(kind)
    if rng is not None:
        if type(x) is not int:
            if _is_bool(x) or isinstance(x, float):
                raise BadScalar(type(x).__name__, "int(...)")
            try:
                x = operator.index(x)  # type: ignore[arg-type]
            except TypeError:
                raise BadScalar(type(x).__name__, "int(...)") from None
        if not rng[0] <= x <= rng[1]:  # type: ignore[operator]
            raise BadScalar(f"{x} (out of range)", "a smaller value")
        return x  # type: ignore[return-value]
    if kind == "bool":
        if not _is_bool(x):
            raise BadScalar(type(x).__name__, "bool(...)")
        return bool(x)
    if type(x) is not float:
        if _is_bool(x) or not isinstance(x, numbers.Real):
            raise BadScalar(type(x).__name__, "float(...)")
        try:
            x = float(x)
        except OverflowError:
            raise BadScalar(f"{x} (out of range)", "a smaller value") from None
    if kind in ("float16", "bfloat16"):
        return _half_bits(kind, x)  # type: ignore[arg-type]
    return x  # type: ignore[return-value]


def _half_bits(kind: str, x: float) -> int:
    import numpy as np

    from tilecraft.dtypes import resolve

    with np.errstate(over="ignore"):
        return int(np.asarray(x, dtype=resolve(kind).np_dtype).view(np.uint16))


def is_host_array(x: object) -> bool:
    """A numpy array (the interpreter takes them beside torch tensors)."""
    return type(x).__module__ == "numpy" and type(x).__name__ == "ndarray"


class HostArray:
    """A numpy array seen as the checker sees a tensor: dtype (torch's, or tilecraft's name for a
    type torch lacks), shape, strides in elements, contiguity, address, device."""

    __slots__ = ("array", "dtype", "shape")
    is_cuda = False

    def __init__(self, array: Any):
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = _array_dtype(array.dtype)

    def stride(self) -> tuple[int, ...]:
        size = self.array.dtype.itemsize
        return tuple(s // size for s in self.array.strides)

    def is_contiguous(self) -> bool:
        return bool(self.array.flags.c_contiguous)

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def element_size(self) -> int:
        return int(self.array.dtype.itemsize)

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cpu")


def _array_dtype(np_dtype: Any) -> object:
    name = np_dtype.name
    if name in _TORCH_NAMES:
        import torch

        return getattr(torch, _TORCH_NAMES[name], name)
    from tilecraft.dtypes import resolve

    try:
        return resolve(np_dtype).name
    except ValueError:
        return name
