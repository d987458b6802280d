"""What a code generator tells the runtime about a kernel's parameters and launch.

A kernel's parameter list is a tuple of `TensorParam` and `ScalarParam`, in the order of the CUDA
entry function's parameters. Tensor shapes and strides mix static ints with names of dynamic
dimensions (`"m"`); the runtime binds each name from the first tensor that uses it and checks every
other use agrees. A `ScalarParam` with `dim="m"` is filled with that bound value (the caller does
not pass it); a `ScalarParam` without `dim` is passed by the caller.

A tensor of a packed dtype (`packed_dtype`: sub-byte ints, custom floats) is passed as its
bytes: a contiguous uint8 or int8 tensor of any shape holding exactly `TensorParam.nbytes(dims)`
bytes (docs/dtypes.md "Host side"); fp8 tensors may be passed so too. Its dynamic dims are bound
by the other tensors, never from the byte count.

`LaunchSpec` gives grid, block, dynamic shared memory and cluster dims. A grid entry is an int or a
callable taking the bound dims (a `dict[str, int]`) and returning an int, e.g.
`lambda d: (d["m"] + 127) // 128`.

Example (C[m, 256] = A[m, 64] @ B[64, 256], m dynamic, passed to the kernel as an int32):
```
params = (TensorParam("A", "float16", ("m", 64)), TensorParam("B", "float16", (64, 256)),
          TensorParam("C", "float16", ("m", 256)), ScalarParam("m", "int32", dim="m"))
launch = LaunchSpec(grid=(2, lambda d: (d["m"] + 127) // 128), block=(128,), smem=32768)
```
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

from .._frozen import Frozen, _set

Dim = int | str
GridEntry = int | Callable[[Mapping[str, int]], int]

#: dtype names accepted in a TensorParam -> torch dtype attribute names.
_TORCH_NAMES: dict[str, str] = {
    "float64": "float64",
    "float32": "float32",
    "float": "float32",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float8_e4m3": "float8_e4m3fn",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
}

SCALAR_KINDS: tuple[str, ...] = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "float16", "bfloat16", "float32", "float64",
)


def torch_dtype(name: str):  # -> torch.dtype
    """The torch dtype of a storage dtype name ("float16", "float8_e4m3", ...); packed types
    (sub-byte, custom floats) have none: their tensors are torch.uint8 bytes (`storage_dtype`).
    """
    import torch

    try:
        return getattr(torch, _TORCH_NAMES[name])
    except (KeyError, AttributeError):
        raise ValueError(
            f"no torch storage dtype for {name!r}; known: {sorted(_TORCH_NAMES)}"
        ) from None


def storage_dtype(name: str) -> object:
    """What a tensor of dtype `name` has as its `.dtype` when it is right: the torch dtype, or
    torch.uint8 for a packed type (`packed_dtype`), whose tensors travel as their bytes."""
    if name in _TORCH_NAMES:
        return torch_dtype(name)
    from tilecraft.dtypes import resolve

    try:
        dt = resolve(name)
    except ValueError:
        raise ValueError(f"unknown tensor dtype {name!r}") from None
    if packed_dtype(name) is not None:
        return torch_dtype("uint8")
    return torch_dtype(dt.name)


def packed_dtype(name: str):  # -> tilecraft.dtypes.DataType | None
    """The type of a tensor dtype stored packed (docs/dtypes.md "Storage"): a sub-byte type or
    a custom float torch lacks (`float8_e3m4`); None for every type torch has (and unknown
    names). A tensor of a packed type and logical shape S is `packed_nbytes(prod(S), dt)` bytes,
    element i in bits [i*b, (i+1)*b), least significant bit first."""
    if name in _TORCH_NAMES:
        return None
    from tilecraft.dtypes import resolve

    try:
        dt = resolve(name)
    except ValueError:
        return None
    return dt if dt.torch_dtype is None and not dt.is_bool else None


def takes_bytes(name: str) -> bool:
    """Whether a tensor of dtype `name` may be passed as its bytes (a contiguous uint8 or int8
    tensor of any shape holding exactly `nbytes` bytes): packed types (only so) and the fp8
    types (also as torch float8 tensors of the logical shape)."""
    if packed_dtype(name) is not None:
        return True
    from tilecraft.dtypes import resolve

    try:
        return resolve(name).name in ("float8_e4m3", "float8_e5m2")
    except ValueError:
        return False


def dtype_bits(name: str) -> int:
    """The width in bits of tensor dtype `name`."""
    from tilecraft.dtypes import resolve

    return resolve(name).bits


class TensorParam(Frozen):
    """A tensor argument, passed to the kernel as a device pointer.

    `shape`: ints (static) or names (dynamic). `strides` in elements: None requires the tensor to be
    contiguous; otherwise one entry per dimension, an int (must match), a name (a dynamic stride,
    bound like a dim) or None (anything). `align`: the bytes the data pointer must be a multiple
    of, because the kernel reads or writes the tensor with vector accesses that wide (0: any).
    (A `Frozen` value class, not a dataclass: a jit-cache hit imports it; _frozen.py.)
    """

    __slots__ = ("name", "dtype", "shape", "strides", "align")
    name: str
    dtype: str
    shape: tuple[Dim, ...]
    strides: tuple[Dim | None, ...] | None
    align: int

    def __init__(self, name: str, dtype: str, shape: tuple[Dim, ...],
                 strides: tuple[Dim | None, ...] | None = None, align: int = 0) -> None:
        _set(self, "name", name)
        _set(self, "dtype", dtype)
        _set(self, "shape", shape)
        _set(self, "strides", strides)
        _set(self, "align", align)
        storage_dtype(self.dtype)
        if self.strides is not None and self.packed:
            raise ValueError(f"param {self.name}: a {self.dtype} tensor is packed bytes, which "
                             "are contiguous (strides must be None)")
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ValueError(
                f"param {self.name}: {len(self.strides)} strides for rank {len(self.shape)}"
            )
        if type(self.align) is not int or self.align < 0 or self.align & (self.align - 1):
            raise ValueError(f"param {self.name}: align must be 0 or a power of two")

    @property
    def packed(self) -> bool:
        """Whether the tensor is stored packed (`packed_dtype`): passed as its bytes only."""
        return packed_dtype(self.dtype) is not None

    def nbytes(self, dims: Mapping[str, int]) -> int:
        """The bytes of the tensor, compactly stored, for the bound dynamic `dims` (KeyError for
        a dim `dims` lacks): `ceil(prod(shape) * bits / 8)`."""
        count = 1
        for d in self.shape:
            count *= d if isinstance(d, int) else dims[d]
        return (count * dtype_bits(self.dtype) + 7) // 8

    @property
    def dynamic_dims(self) -> tuple[str, ...]:
        names = [d for d in self.shape if isinstance(d, str)]
        names += [s for s in (self.strides or ()) if isinstance(s, str)]
        return tuple(names)


class ScalarParam(Frozen):
    """A scalar argument: `kind` is its C type ("int32", "int64", "float32", ...).

    With `dim`, its value is the bound dynamic dimension of that name and the caller does not pass
    it; without, the caller passes it positionally.
    """

    __slots__ = ("name", "kind", "dim")
    name: str
    kind: str
    dim: str | None

    def __init__(self, name: str, kind: str, dim: str | None = None) -> None:
        _set(self, "name", name)
        _set(self, "kind", kind)
        _set(self, "dim", dim)
        if self.kind not in SCALAR_KINDS:
            raise ValueError(f"param {self.name}: scalar kind must be one of {SCALAR_KINDS}")


class TensorMapParam(Frozen):
    """A TMA tensor map of tensor parameter `tensor` (tensor_map.py), passed by value and made at
    launch from the tensor's address and shape; the caller does not pass it. `box`: the box one
    load moves, in the tensor's dimension order (outermost first); `swizzle`: its shared-memory
    swizzle in bytes (0, 32, 64 or 128); `split` > 0: the map views the innermost dim L as
    (L / split, outermost; split, innermost), and `box` is in that view's order."""

    __slots__ = ("name", "tensor", "box", "swizzle", "split")
    name: str
    tensor: str
    box: tuple[int, ...]
    swizzle: int
    split: int

    def __init__(self, name: str, tensor: str, box: tuple[int, ...], swizzle: int = 0,
                 split: int = 0) -> None:
        _set(self, "name", name)
        _set(self, "tensor", tensor)
        _set(self, "box", box)
        _set(self, "swizzle", swizzle)
        _set(self, "split", split)


Param = TensorParam | ScalarParam | TensorMapParam


class LaunchSpec(Frozen):
    """Grid (up to 3 entries, int or callable of the dims), block dims, dynamic shared memory
    bytes, and optional cluster dims (sm_90)."""

    __slots__ = ("grid", "block", "smem", "cluster")
    grid: tuple[GridEntry, ...]
    block: tuple[int, ...]
    smem: int
    cluster: tuple[int, ...] | None

    def __init__(self, grid: tuple[GridEntry, ...], block: tuple[int, ...], smem: int = 0,
                 cluster: tuple[int, ...] | None = None) -> None:
        _set(self, "grid", grid)
        _set(self, "block", block)
        _set(self, "smem", smem)
        _set(self, "cluster", cluster)
        if not 1 <= len(self.grid) <= 3 or not 1 <= len(self.block) <= 3:
            raise ValueError("grid and block take 1 to 3 entries")
        if self.cluster is not None and not 1 <= len(self.cluster) <= 3:
            raise ValueError("cluster takes 1 to 3 entries")

    def grid_dims(self, dims: Mapping[str, int]) -> tuple[int, int, int]:
        """The grid for the bound dims, padded to 3 entries."""
        g = []
        for e in self.grid:
            v = e(dims) if callable(e) else e
            try:
                v = operator.index(v)
            except TypeError:
                raise ValueError(f"grid entry evaluated to {v!r}; expected an int") from None
            if v < 0:
                raise ValueError(f"grid entry evaluated to {v}; expected a non-negative int")
            g.append(v)
        return _pad3(g)

    def block_dims(self) -> tuple[int, int, int]:
        return _pad3(self.block)

    def cluster_dims(self) -> tuple[int, int, int] | None:
        return None if self.cluster is None else _pad3(self.cluster)


def _pad3(v) -> tuple[int, int, int]:
    v = tuple(int(x) for x in v)
    return v + (1,) * (3 - len(v))  # type: ignore[return-value]
