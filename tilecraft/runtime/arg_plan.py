"""The plan of a kernel's argument checks: what each parameter asks of a call, worked out once.

`CallPlan.create(params, outputs=..., writes=...)` splits a kernel's parameter list into what the
caller passes and what is filled in (outputs the checker allocates, scalars bound to a dynamic dim,
tensor maps), and records per parameter where its value comes from (`arg`: position among the
caller's arguments) and where it goes (`slot`: position in the kernel's parameter list):

    plan = CallPlan.create(params, outputs=("C",), writes=("C",))
    plan.tensors[0].arg, plan.tensors[0].slot, plan.tensors[0].contiguous
    plan.pairs        # ((i, j), ...): tensors (positions in plan.tensors) that must not overlap

The argument checker (args.py) runs these checks on every call it sees; the fast path
(fast_call.py) reads the same plan to write its straight-line call, so both agree on which
argument lands in which slot.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .._frozen import Frozen, _set
from .params import (
    Param,
    ScalarParam,
    TensorMapParam,
    TensorParam,
    storage_dtype,
    takes_bytes,
    torch_dtype,
)

if TYPE_CHECKING:
    from .args import ArgChecker


@functools.cache
def byte_dtypes() -> tuple[Any, ...]:
    """The torch dtypes of a tensor passed as its bytes (a packed or an fp8 parameter)."""
    return torch_dtype("uint8"), torch_dtype("int8")


class ScalarSlot(NamedTuple):
    """A scalar parameter: caller-passed at `arg`, or (arg None) bound to `param.dim`."""

    slot: int
    param: ScalarParam
    arg: int | None


class OutputSlot(NamedTuple):
    """A tensor parameter the checker allocates (out_idx), of torch dtype `dtype`; a packed one
    (`packed`: a sub-byte or custom-float parameter) is allocated as 1-D uint8 bytes of its
    packed size (`TensorParam.nbytes`)."""

    slot: int
    param: TensorParam
    dtype: Any
    packed: bool = False

    def size(self, dims: Mapping[str, int]) -> tuple[int, ...]:
        """The allocated shape for the bound `dims` (KeyError for a dim `dims` lacks)."""
        if self.packed:
            return (self.param.nbytes(dims),)
        return tuple(d if type(d) is int else dims[d] for d in self.param.shape)


class MapSlot(NamedTuple):
    """A tensor-map parameter: the map of the tensor in `tensor_slot`, made by `encoder`."""

    slot: int
    tensor_slot: int
    tensor: TensorParam
    encoder: Any


class TensorCheck:
    """The planned checks of one caller-passed tensor parameter."""

    __slots__ = ("align", "arg", "binds", "bytes_ok", "dtype", "fixed", "packed", "param",
                 "rank", "shape", "slot", "strides")

    def __init__(self, param: TensorParam, arg: int, slot: int):
        self.arg = arg  # position among the caller's arguments
        self.slot = slot  # position in the kernel's parameter list
        self.param = param
        self.dtype = storage_dtype(param.dtype)  # a torch dtype
        self.packed = param.packed  # passed as its bytes only (sub-byte, custom floats)
        # the dtypes it may be passed in as its bytes (packed and fp8 parameters; else none)
        self.bytes_ok = byte_dtypes() if takes_bytes(param.dtype) else ()
        self.align = param.align if param.align > 1 else 0
        static = all(isinstance(d, int) for d in param.shape)
        self.shape = tuple(param.shape) if static else None  # compared in one go when static
        self.rank = len(param.shape)
        self.fixed = tuple((i, d) for i, d in enumerate(param.shape) if isinstance(d, int))
        self.binds = tuple((i, d) for i, d in enumerate(param.shape) if isinstance(d, str))
        # None: must be contiguous; else (axis, int | name) for every constrained stride
        self.strides = (
            None
            if param.strides is None
            else tuple((i, s) for i, s in enumerate(param.strides) if s is not None)
        )

    @property
    def contiguous(self) -> bool:
        """Whether the parameter must be contiguous (then `is_contiguous()` is its stride check)."""
        return self.strides is None

    def check(self, x: Any, dims: dict[str, int], checker: ArgChecker) -> int | None:
        """Dtype, shape (binding dynamic dims into `dims`) and strides of `x`; raises the
        checker's error for the first that is wrong. For `x` passed as bytes (a packed or fp8
        parameter), returns its byte count, which the checker compares with
        `param.nbytes(dims)` once every tensor has bound its dims; else None."""
        if self.bytes_ok and x.dtype in self.bytes_ok:
            if not x.is_contiguous():
                raise checker.error("TC306", self.param.name)
            return math.prod(x.shape)
        if self.packed:
            raise checker.packed_dtype_error(self.param, x.dtype)
        if x.dtype != self.dtype:
            raise checker.error(
                "TC303",
                self.param.name,
                got=str(x.dtype).replace("torch.", ""),
                expected=self.param.dtype,
                torch_dtype=str(self.dtype),
            )
        shape = x.shape
        if self.shape is not None:
            if shape != self.shape:
                raise checker.shape_error(self.param, shape)
        else:
            if len(shape) != self.rank:
                raise checker.shape_error(self.param, shape)
            for axis, want in self.fixed:
                if shape[axis] != want:
                    raise checker.shape_error(self.param, shape)
            for axis, name in self.binds:
                got = shape[axis]
                if dims.setdefault(name, got) != got:
                    raise checker.dim_error(name, dims[name], got, self.param.name)
        if self.strides is None:
            if not x.is_contiguous():
                raise checker.error("TC306", self.param.name)
            return
        got_strides = x.stride()
        for axis, want in self.strides:
            got = got_strides[axis]
            if type(want) is int:
                if want != got:
                    raise checker.error("TC306", self.param.name)
            elif dims.setdefault(want, got) != got:
                raise checker.dim_error(want, dims[want], got, self.param.name)
        return None


class CallPlan(Frozen):
    """Where every parameter's value comes from, and which tensors must not overlap."""

    __slots__ = ("params", "caller_params", "tensors", "scalars", "outputs", "maps", "writes",
                 "pairs")
    params: tuple[Param, ...]
    caller_params: tuple[Param, ...]  # what a caller passes, in order
    tensors: tuple[TensorCheck, ...]  # caller-passed tensors
    scalars: tuple[ScalarSlot, ...]
    outputs: tuple[OutputSlot, ...]
    maps: tuple[MapSlot, ...]
    #: the tensor parameters the kernel writes, in parameter order
    writes: tuple[str, ...]
    #: (i, j) positions in `tensors`, i < j, of the pairs that must not overlap (one of the two is
    #: written); outputs are allocated by the checker, so they overlap nothing
    pairs: tuple[tuple[int, int], ...]

    def __init__(self, params: tuple[Param, ...], caller_params: tuple[Param, ...],
                 tensors: tuple[TensorCheck, ...], scalars: tuple[ScalarSlot, ...],
                 outputs: tuple[OutputSlot, ...], maps: tuple[MapSlot, ...],
                 writes: tuple[str, ...], pairs: tuple[tuple[int, int], ...]) -> None:
        for name, value in zip(self.__slots__, (params, caller_params, tensors, scalars, outputs,
                                                maps, writes, pairs)):
            _set(self, name, value)

    @classmethod
    def create(cls, params: Sequence[Param], *, kernel: str = "kernel",
               outputs: Sequence[str] = (), writes: Sequence[str] | None = None) -> CallPlan:
        """The plan of `params`; `outputs` are allocated, `writes` (None: unknown) are written.
        Raises ValueError where `outputs`, `writes` or a tensor map name no tensor parameter."""
        params = tuple(params)
        out = set(outputs)
        tensor_names = [p.name for p in params if isinstance(p, TensorParam)]
        if out - set(tensor_names):
            raise ValueError(f"outputs {sorted(out - set(tensor_names))} are not tensor "
                             f"parameters of {kernel}")
        written = set(() if writes is None else writes)
        if written - set(tensor_names):
            raise ValueError(f"writes {sorted(written - set(tensor_names))} are not tensor "
                             f"parameters of {kernel}")
        caller = tuple(p for p in params if not _filled_in(p, out))
        position = {p.name: i for i, p in enumerate(caller)}
        slots = list(enumerate(params))
        tensors = tuple(TensorCheck(p, position[p.name], s) for s, p in slots
                        if isinstance(p, TensorParam) and p.name not in out)
        pairs = tuple((i, j) for j, b in enumerate(tensors) for i, a in enumerate(tensors[:j])
                      if a.param.name in written or b.param.name in written)
        return cls(
            params=params,
            caller_params=caller,
            tensors=tensors,
            scalars=tuple(ScalarSlot(s, p, position.get(p.name)) for s, p in slots
                          if isinstance(p, ScalarParam)),
            outputs=tuple(OutputSlot(s, p, storage_dtype(p.dtype), p.packed) for s, p in slots
                          if p.name in out),
            maps=tuple(_map_plan(s, p, params) for s, p in slots
                       if isinstance(p, TensorMapParam)),
            writes=tuple(n for n in tensor_names if n in written),
            pairs=pairs,
        )


def byte_range(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> tuple[int, int]:
    """(start, end): the bytes from the data pointer a tensor's elements occupy (from its lowest
    to its highest element address + itemsize); (0, 0) when it has no element."""
    low = high = 0
    for n, s in zip(shape, strides):
        if n == 0:
            return 0, 0
        if s > 0:
            high += (n - 1) * s
        else:
            low += (n - 1) * s
    return low * itemsize, (high + 1) * itemsize


def _filled_in(p: Param, outputs: set[str]) -> bool:
    """True for parameters the caller does not pass: dim-bound scalars, tensor maps, outputs."""
    return ((isinstance(p, ScalarParam) and p.dim is not None) or isinstance(p, TensorMapParam)
            or p.name in outputs)


def _map_plan(slot: int, p: TensorMapParam, params: tuple[Param, ...]) -> MapSlot:
    from .tensor_map import TensorMapEncoder

    found = [(s, t) for s, t in enumerate(params) if isinstance(t, TensorParam)
             and t.name == p.tensor]
    if not found:
        raise ValueError(f"tensor map `{p.name}` names no tensor parameter `{p.tensor}`")
    (s, t), = found
    if t.strides is not None:
        raise ValueError(f"tensor map `{p.name}`: `{p.tensor}` must be contiguous")
    return MapSlot(slot, s, t, TensorMapEncoder(t.dtype, p.box, p.swizzle, t.name, p.split))
