"""Checking call arguments against a kernel's parameter list, before anything is launched.

`ArgChecker(params)` plans the checks once per kernel (per tensor: its torch dtype, rank, static
sizes, the dynamic dims it binds, its stride rule; per scalar: its range), and `bind(args)` runs
them on every call; it is the only argument checker, on the launch path and, with
`require_cuda=False`, on the CPU interpreter (tilecraft/args.py makes its parameter list from the
IR), so both backends refuse the same calls with the same errors. Checks run in this order, so the
error a user sees names the first real problem: argument count, then per tensor its type and
dtype, rank and shape (binding dynamic dims), strides, the alignment its vector accesses need
(TC308), then that no tensor the kernel writes overlaps another tensor argument in memory
(TC317: the GPU code takes different parameters for different memory), then scalars
(arg_values.py says what each kind takes), and last the device (all tensors on one CUDA
device). Everything but the device check works on CPU tensors, so mistakes are reported the
same way on a machine without a GPU. With `require_cuda=False` numpy arrays are
taken too (the interpreter runs on them).

The jit layer also hands the checker the tensors it allocates (`outputs`: `out_idx`, sized from the
bound dims), the tensor parameters the kernel writes (`writes`, from the IR; None for hand-written CUDA,
whose aliasing is its author's to decide: no overlap check)
and the user's source spans (`spans` per parameter, `span` for the kernel), so errors point at
the kernel's definition:

    checker = ArgChecker(params, kernel="gemm", outputs=("C",), writes=("C",),
                         spans={"A": span_of_A})
    bound = checker.bind([a, b])   # BoundArgs(values, dims, device, outputs=(c,))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..diagnostics import Span
from .arg_values import BadScalar, HostArray, is_host_array, scalar_value
from .errors import LaunchArgumentError
from .params import Param, ScalarParam, TensorMapParam, TensorParam, storage_dtype


class BoundArgs(NamedTuple):
    """Checked arguments: one value per parameter (data pointers for tensors), the bound dynamic
    dims, the CUDA device index of the tensors (None when there are none or the device was not
    checked), and the output tensors the checker allocated."""

    values: tuple[int | float, ...]
    dims: dict[str, int]
    device: int | None
    outputs: tuple[Any, ...] = ()


def _fmt_shape(shape: Sequence[object]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + (",)" if len(shape) == 1 else ")")


class _TensorCheck:
    """The planned checks of one caller-passed tensor parameter."""

    __slots__ = ("align", "arg", "binds", "dtype", "fixed", "param", "rank", "shape", "slot",
                 "strides")

    def __init__(self, param: TensorParam, arg: int, slot: int):
        self.arg = arg  # position among the caller's arguments
        self.slot = slot  # position in the kernel's parameter list
        self.param = param
        self.dtype = storage_dtype(param.dtype)  # a torch dtype (a name where torch has none)
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

    def check(self, x: Any, dims: dict[str, int], checker: ArgChecker) -> None:
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


class ArgChecker:
    """The argument checks of one kernel, planned once; `bind(args)` runs them per call."""

    def __init__(
        self,
        params: Sequence[Param],
        *,
        kernel: str = "kernel",
        outputs: Sequence[str] = (),
        writes: Sequence[str] | None = None,
        spans: Mapping[str, Span] | None = None,
        span: Span | None = None,
    ):
        import torch

        self.params = tuple(params)
        self.kernel = kernel
        self.spans = dict(spans or {})
        self.span = span
        self._tensor_type = torch.Tensor
        self._empty = torch.empty
        self._devices: dict[int, Any] = {}
        out = set(outputs)
        unknown = out - {p.name for p in self.params if isinstance(p, TensorParam)}
        if unknown:
            raise ValueError(f"outputs {sorted(unknown)} are not tensor parameters of {kernel}")
        caller = [p for p in self.params if not _filled_in(p, out)]
        self.caller_params = tuple(caller)
        position = {p.name: i for i, p in enumerate(caller)}
        slots = list(enumerate(self.params))
        self._tensors = tuple(
            _TensorCheck(p, position[p.name], s)
            for s, p in slots
            if isinstance(p, TensorParam) and p.name not in out
        )
        self._outputs = tuple((s, p, self._output_dtype(p)) for s, p in slots if p.name in out)
        self.outputs = tuple(p.name for _, p, _ in self._outputs)
        self._scalars = tuple(
            (s, p, position.get(p.name)) for s, p in slots if isinstance(p, ScalarParam)
        )
        self._maps = tuple(_map_plan(s, p, self.params) for s, p in slots
                           if isinstance(p, TensorMapParam))
        tensor_names = [p.name for p in self.params if isinstance(p, TensorParam)]
        written = set(() if writes is None else writes)
        if written - set(tensor_names):
            raise ValueError(f"writes {sorted(written - set(tensor_names))} are not tensor "
                             f"parameters of {kernel}")
        #: the tensor parameters the kernel writes, in parameter order
        self.writes = tuple(n for n in tensor_names if n in written)
        #: (i, j) positions in `_tensors`, i < j, of the pairs that must not overlap (one of the
        #: two is written); outputs are allocated here, so they overlap nothing
        self._pairs = tuple((i, j) for j, b in enumerate(self._tensors)
                            for i, a in enumerate(self._tensors[:j])
                            if a.param.name in written or b.param.name in written)
        self._first_use: dict[str, str] = {}
        for t in self._tensors:
            for name in t.param.dynamic_dims:
                self._first_use.setdefault(name, t.param.name)
        self._out_hint = (
            f"; outputs {list(self.outputs)} are allocated and returned" if self.outputs else ""
        )

    def _output_dtype(self, p: TensorParam) -> Any:
        dtype = storage_dtype(p.dtype)
        if isinstance(dtype, str):
            raise self.error("TC108", p.name, detail=f"cannot allocate output `{p.name}` of dtype "
                             f"{dtype}: torch has no such dtype",
                             hint="pass the output in instead of naming it in out_idx")
        return dtype

    # ---- the per-call path ---------------------------------------------------------------
    def bind(self, args: Sequence[object], *, require_cuda: bool = True) -> BoundArgs:
        """Check `args` (the caller-passed parameters, in order); allocate the outputs."""
        if len(args) != len(self.caller_params):
            raise self.error("TC301", None, expected=len(self.caller_params), got=len(args))
        values: list[Any] = [0] * len(self.params)
        dims: dict[str, int] = {}
        device = None
        mixed = False
        tensor_type = self._tensor_type
        for t in self._tensors:
            x = args[t.arg]
            if not isinstance(x, tensor_type):
                if require_cuda or not is_host_array(x):
                    raise self.error(
                        "TC303",
                        t.param.name,
                        got=f"{type(x).__name__} (not a tensor)",
                        expected=t.param.dtype,
                        torch_dtype=f"torch.{t.param.dtype}",
                    )
                x = HostArray(x)
            t.check(x, dims, self)
            values[t.slot] = ptr = x.data_ptr()
            if t.align and ptr % t.align:
                raise self.error("TC308", t.param.name, align=t.align, rem=ptr % t.align)
            d = x.get_device() if x.is_cuda else -1
            if device is None:
                device = d
            elif d != device:
                mixed = True
        if self._pairs:
            self._check_overlap(args, values)
        for slot, p, arg in self._scalars:
            if arg is not None:
                values[slot] = self._scalar(p, args[arg])
            elif p.dim in dims:
                values[slot] = self._scalar(p, dims[p.dim])
            else:
                raise ValueError(
                    f"scalar `{p.name}` is bound to dim `{p.dim}`, which no tensor has"
                )
        if not require_cuda:
            device = None
        elif mixed or device == -1:
            self._raise_device_error(args)
        outputs = self._allocate(values, dims, device, args) if self._outputs else ()
        if self._maps and device is not None:
            self._encode_maps(values, dims)
        return BoundArgs(tuple(values), dims, device, outputs)

    def _check_overlap(self, args: Sequence[object], values: list[Any]) -> None:
        """TC317 for the first pair of tensors, one of them written, whose bytes intersect on
        one device."""
        ranges = []
        for t in self._tensors:
            x = args[t.arg]
            if not isinstance(x, self._tensor_type):
                x = HostArray(x)
            start, end = byte_range(x.shape, x.stride(), x.element_size())
            ptr = values[t.slot]
            ranges.append((ptr + start, ptr + end, x.get_device() if x.is_cuda else -1))
        for i, j in self._pairs:
            (a0, a1, da), (b0, b1, db) = ranges[i], ranges[j]
            if a0 < b1 and b0 < a1 and da == db:
                first, second = self._tensors[i].param.name, self._tensors[j].param.name
                param = second if second in self.writes else first
                raise self.error("TC317", param, first=first, second=second)

    def _encode_maps(self, values: list[Any], dims: dict[str, int]) -> None:
        from .tensor_map import TensorMapError

        for slot, tensor_slot, tensor, encoder in self._maps:
            shape = [d if isinstance(d, int) else dims[d] for d in tensor.shape]
            try:
                values[slot] = encoder(values[tensor_slot], shape)
            except TensorMapError as exc:
                raise self.error("TC307", tensor.name, detail=str(exc)) from None

    def _scalar(self, p: ScalarParam, x: object) -> int | float:
        try:
            return scalar_value(p.kind, x)
        except BadScalar as bad:
            raise self.error("TC303", p.name, got=bad.got, expected=p.kind,
                             torch_dtype=bad.fix) from None

    def _allocate(
        self, values: list[Any], dims: dict[str, int], device: int | None, args: Sequence[object]
    ) -> tuple[Any, ...]:
        where = self._device(device, args)
        outputs = []
        for slot, p, dtype in self._outputs:
            shape = []
            for d in p.shape:
                if type(d) is not int:
                    if d not in dims:
                        raise self.error(
                            "TC108",
                            p.name,
                            detail=f"cannot size output `{p.name}`: "
                            f"dimension `{d}` is not set by any input",
                            hint="give the output a static shape or pass it in",
                        )
                    d = dims[d]
                shape.append(d)
            out = self._empty(shape, dtype=dtype, device=where)
            values[slot] = out.data_ptr()
            outputs.append(out)
        return tuple(outputs)

    def _device(self, device: int | None, args: Sequence[object]) -> Any:
        """Where outputs go: the inputs' CUDA device, else the first input tensor's device."""
        if device is not None:
            where = self._devices.get(device)
            if where is None:
                import torch

                where = self._devices[device] = torch.device("cuda", device)
            return where
        import torch

        if self._tensors:
            first = args[self._tensors[0].arg]
            return torch.device("cpu") if is_host_array(first) else first.device  # type: ignore

        return torch.device("cuda", torch.cuda.current_device())

    # ---- errors --------------------------------------------------------------------------
    def error(self, code: str, param: str | None, **fields: object) -> LaunchArgumentError:
        """A catalog error about `param` (None: the whole call), at the user's source if known."""
        span = self.spans.get(param, self.span) if param is not None else self.span
        if code == "TC301":
            fields.update(kernel=self.kernel, out_hint=self._out_hint)
        return LaunchArgumentError(code, span=span, param=param, **fields)

    def shape_error(self, p: TensorParam, shape: Sequence[int]) -> LaunchArgumentError:
        return self.error(
            "TC302",
            p.name,
            got=_fmt_shape(tuple(shape)),
            expected=_fmt_shape(p.shape),
            hint="names in the expected shape are dynamic dimensions",
        )

    def dim_error(self, dim: str, first: int, second: int, param: str) -> LaunchArgumentError:
        return self.error(
            "TC305",
            param,
            dim=dim,
            first=f"{first} (in `{self._first_use.get(dim, '?')}`)",
            second=second,
        )

    def _raise_device_error(self, args: Sequence[object]) -> None:
        """TC304 for the first tensor not on CUDA, or not on the first tensor's CUDA device."""
        device, first = None, ""
        for t in self._tensors:
            dev = args[t.arg].device  # type: ignore[attr-defined]
            if dev.type != "cuda":
                raise self.error(
                    "TC304",
                    t.param.name,
                    got=str(dev),
                    expected="a CUDA device",
                    hint="move it with `.cuda()`, or run the kernel with the CPU interpreter",
                )
            if device is None:
                device, first = dev.index or 0, t.param.name
            elif (dev.index or 0) != device:
                raise self.error(
                    "TC304",
                    t.param.name,
                    got=str(dev),
                    expected=f"cuda:{device}",
                    hint=f"all tensors must be on one device, as `{first}` is",
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


def _map_plan(slot: int, p: TensorMapParam, params: tuple[Param, ...]) -> tuple:
    """(slot, the tensor's slot, its TensorParam, an encoder) of a tensor-map parameter."""
    from .tensor_map import TensorMapEncoder

    found = [(s, t) for s, t in enumerate(params) if isinstance(t, TensorParam)
             and t.name == p.tensor]
    if not found:
        raise ValueError(f"tensor map `{p.name}` names no tensor parameter `{p.tensor}`")
    (s, t), = found
    if t.strides is not None:
        raise ValueError(f"tensor map `{p.name}`: `{p.tensor}` must be contiguous")
    return slot, s, t, TensorMapEncoder(t.dtype, p.box, p.swizzle, t.name)


def check_args(
    params: Sequence[Param],
    args: Sequence[object],
    *,
    kernel: str = "kernel",
    require_cuda: bool = True,
) -> BoundArgs:
    """Check `args` (tensors and caller-passed scalars, in parameter order) against `params`.

    A one-off `ArgChecker(params, kernel=kernel).bind(args)`; kernels keep their checker.
    """
    return ArgChecker(params, kernel=kernel).bind(args, require_cuda=require_cuda)
